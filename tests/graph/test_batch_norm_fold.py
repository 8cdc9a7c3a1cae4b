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
