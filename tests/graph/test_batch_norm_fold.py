"""A BatchNorm1d of a Linear's output (LeViT's Linear + BatchNorm1d: flatten, the norm, reshape_as the
Linear's output) folds into the Linear's weight and bias (kuiper/graph/constant_fold.py), on every
backend, fused or not.  Reference: float64 NumPy."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kuiper

from conftest import param_text, write_model

RNG = np.random.default_rng(17)
IN, OUT, EPS = 48, 40, 1e-5
WEIGHT = (RNG.standard_normal((OUT, IN)) / math.sqrt(IN)).astype(np.float32)
BIAS = RNG.standard_normal(OUT).astype(np.float32)
MEAN = RNG.standard_normal(OUT).astype(np.float32)
VAR = RNG.uniform(0.2, 3.0, OUT).astype(np.float32)
GAMMA = RNG.uniform(0.5, 1.5, OUT).astype(np.float32)
BETA = RNG.standard_normal(OUT).astype(np.float32)
WEIGHTS = {"fc.weight": WEIGHT.tobytes(), "fc.bias": BIAS.tobytes(), "bn.bias": BETA.tobytes(),
           "bn.running_mean": MEAN.tobytes(), "bn.running_var": VAR.tobytes(), "bn.weight": GAMMA.tobytes()}
LINEAR = f"nn.Linear fc 1 1 x y bias=True in_features={IN} out_features={OUT} @weight=({OUT},{IN})f32 @bias=({OUT})f32"
NORM = (f"nn.BatchNorm1d bn 1 1 {{source}} z affine=True eps={EPS} num_features={OUT} @bias=({OUT})f32 "
        f"@running_mean=({OUT})f32 @running_var=({OUT})f32 @weight=({OUT})f32")

LEVIT = f"""
pnnx.Input in0 0 1 x #x=(2,7,{IN})f32
{LINEAR} #y=(2,7,{OUT})f32
torch.flatten flat 1 1 y f end_dim=1 start_dim=0 #f=(14,{OUT})f32
{NORM.format(source="f")} #z=(14,{OUT})f32
Tensor.reshape_as back 2 1 z y r $input=z $other=y
nn.Hardswish act 1 1 r out
pnnx.Output output 1 0 out
"""
ROWS_ONLY = f"""
pnnx.Input in0 0 1 x #x=(14,{IN})f32
{LINEAR} #y=(14,{OUT})f32
{NORM.format(source="y")} #z=(14,{OUT})f32
pnnx.Output output 1 0 z
"""
FLATTENED = f"""
pnnx.Input in0 0 1 x #x=(2,7,{IN})f32
{LINEAR} #y=(2,7,{OUT})f32
torch.flatten flat 1 1 y f end_dim=1 start_dim=0 #f=(14,{OUT})f32
{NORM.format(source="f")} #z=(14,{OUT})f32
pnnx.Output output 1 0 z
"""
LINEAR_OUTPUT_ALSO_RETURNED = f"""
pnnx.Input in0 0 1 x #x=(14,{IN})f32
{LINEAR} #y=(14,{OUT})f32
{NORM.format(source="y")} #z=(14,{OUT})f32
pnnx.Output output 2 0 z y
"""


def _norm(x64):
    y = x64 @ WEIGHT.T.astype(np.float64) + BIAS
    return (y - MEAN) / np.sqrt(VAR.astype(np.float64) + EPS) * GAMMA + BETA


def _hardswish(v):
    return v * np.clip(v + 3, 0, 6) / 6


@pytest.mark.parametrize("body, shape, expected, steps", [
    (LEVIT, (2, 7, IN), lambda x: _hardswish(_norm(x)), ["Linear"]),  # the Hardswish is its epilogue too
    (ROWS_ONLY, (14, IN), _norm, ["Linear"]),
    (FLATTENED, (2, 7, IN), lambda x: _norm(x).reshape(14, OUT), ["Linear", "Flatten"]),
])
@pytest.mark.parametrize("fuse", [True, False])
def test_a_batch_norm_of_a_linear_folds_into_it(tmp_path, body, shape, expected, steps, fuse):
    model = kuiper.load(write_model(tmp_path, param_text(body), WEIGHTS), fuse=fuse)
    if fuse:  # fuse=False builds the graph as the file gives it: the reference for the folded one
        assert [step.node.type for step in model.steps] == steps
    x = RNG.standard_normal(shape).astype(np.float32)
    np.testing.assert_allclose(model(x), expected(x.astype(np.float64)), rtol=0, atol=2e-5)


def test_a_linear_whose_output_is_also_returned_keeps_its_batch_norm(tmp_path):
    model = kuiper.load(write_model(tmp_path, param_text(LINEAR_OUTPUT_ALSO_RETURNED), WEIGHTS))
    assert [step.node.type for step in model.steps] == ["Linear", "BatchNorm"]
    x = RNG.standard_normal((14, IN)).astype(np.float32)
    z, y = model(x)
    np.testing.assert_allclose(z, _norm(x.astype(np.float64)), rtol=0, atol=2e-5)
    np.testing.assert_allclose(y, x.astype(np.float64) @ WEIGHT.T + BIAS, rtol=0, atol=2e-5)


def test_a_batch_norm_of_a_flattened_conv_output_is_not_a_linears_and_stays(tmp_path):
    """(1, 8, 8) conv output flattened to (8, 8): the norm's channels are the length, not the conv's 8
    output channels, although the counts agree."""
    channels = 8
    conv = (RNG.standard_normal((channels, 2, 3)) / 3).astype(np.float32)
    stats = {key: value[:channels] for key, value in
             (("mean", MEAN), ("var", VAR), ("gamma", GAMMA), ("beta", BETA))}
    body = f"""
pnnx.Input in0 0 1 x #x=(1,2,8)f32
nn.Conv1d conv 1 1 x y bias=False dilation=(1) groups=1 in_channels=2 kernel_size=(3) out_channels={channels} padding=(1) padding_mode=zeros stride=(1) @weight=({channels},2,3)f32 #y=(1,{channels},8)f32
torch.flatten flat 1 1 y f end_dim=1 start_dim=0 #f=({channels},8)f32
nn.BatchNorm1d bn 1 1 f z affine=True eps={EPS} num_features=8 @bias=(8)f32 @running_mean=(8)f32 @running_var=(8)f32 @weight=(8)f32 #z=({channels},8)f32
pnnx.Output output 1 0 z
"""
    weights = {"conv.weight": conv.tobytes(), "bn.bias": stats["beta"].tobytes(),
               "bn.running_mean": stats["mean"].tobytes(), "bn.running_var": stats["var"].tobytes(),
               "bn.weight": stats["gamma"].tobytes()}
    model = kuiper.load(write_model(tmp_path, param_text(body), weights))
    assert "BatchNorm" in [step.node.type for step in model.steps]
    x = RNG.standard_normal((1, 2, 8)).astype(np.float32)
    padded = np.pad(x[0].astype(np.float64), ((0, 0), (1, 1)))
    y = np.stack([sum(conv[o, i, k] * padded[i, k:k + 8] for i in range(2) for k in range(3)) for o in range(channels)])
    expected = (y - stats["mean"]) / np.sqrt(stats["var"].astype(np.float64) + EPS) * stats["gamma"] + stats["beta"]
    np.testing.assert_allclose(model(x), expected, rtol=0, atol=2e-5)
