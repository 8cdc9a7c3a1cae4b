"""A layer scale, ``mul(linear(x), gamma)`` or ``mul(conv(x), c)`` with a per-channel constant, folds into
the layer's weight and bias (kuiper/graph/constant_fold.py).  Reference: float64 NumPy."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kuiper

from conftest import param_text, write_model

RNG = np.random.default_rng(23)
IN, OUT = 24, 32
WEIGHT = (RNG.standard_normal((OUT, IN)) / math.sqrt(IN)).astype(np.float32)
BIAS = RNG.standard_normal(OUT).astype(np.float32)
GAMMA = RNG.uniform(0.1, 2.0, OUT).astype(np.float32)
CONV_WEIGHT = (RNG.standard_normal((OUT, 3, 3, 3)) / 5).astype(np.float32)
LINEAR = f"nn.Linear fc 1 1 x y bias=True in_features={IN} out_features={OUT} @weight=({OUT},{IN})f32 @bias=({OUT})f32"
CONV = (f"nn.Conv2d conv 1 1 x y bias=True dilation=(1,1) groups=1 in_channels=3 kernel_size=(3,3) "
        f"out_channels={OUT} padding=(1,1) padding_mode=zeros stride=(1,1) @bias=({OUT})f32 @weight=({OUT},3,3,3)f32")


def _model(tmp_path, layer, gamma_shape, outputs="z", gamma=GAMMA):
    weight = WEIGHT if layer is LINEAR else CONV_WEIGHT
    x_shape, y_shape = ("(2,5,24)", "(2,5,32)") if layer is LINEAR else ("(1,3,9,9)", "(1,32,9,9)")
    body = f"""
pnnx.Input in0 0 1 x #x={x_shape}f32
{layer} #x={x_shape}f32 #y={y_shape}f32
pnnx.Attribute scale 0 1 g @data={gamma_shape}f32 #g={gamma_shape}f32
pnnx.Expression mul 2 1 y g z expr=mul(@0,@1) #z={y_shape}f32
pnnx.Output output {len(outputs.split())} 0 {outputs}
"""
    weights = {"fc.weight" if layer is LINEAR else "conv.weight": weight.tobytes(),
               "fc.bias" if layer is LINEAR else "conv.bias": BIAS.tobytes(), "scale.data": gamma.tobytes()}
    return kuiper.load(write_model(tmp_path, param_text(body), weights))


def _linear(x):
    return x.astype(np.float64) @ WEIGHT.T.astype(np.float64) + BIAS


def _conv(x):
    x64, w64 = x.astype(np.float64), CONV_WEIGHT.astype(np.float64)
    padded = np.pad(x64, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))  # (N, 3, H, W, 3, 3)
    return np.einsum("nchwij,ocij->nohw", windows, w64) + BIAS[:, None, None]


def test_a_layer_scale_folds_into_a_linear(tmp_path):
    model = _model(tmp_path, LINEAR, f"({OUT})")
    (step,) = model.steps
    np.testing.assert_allclose(step.node.attrs["weight"], WEIGHT * GAMMA[:, None], rtol=1e-6)
    x = RNG.standard_normal((2, 5, IN)).astype(np.float32)
    np.testing.assert_allclose(model(x), _linear(x) * GAMMA, rtol=0, atol=2e-5)


def test_a_per_channel_factor_folds_into_a_conv(tmp_path):
    model = _model(tmp_path, CONV, f"(1,{OUT},1,1)")
    assert [step.node.type for step in model.steps] == ["Conv2d"]
    x = RNG.standard_normal((1, 3, 9, 9)).astype(np.float32)
    np.testing.assert_allclose(model(x), _conv(x) * GAMMA[:, None, None], rtol=0, atol=2e-5)


def test_a_factor_that_varies_along_rows_or_a_layer_output_also_returned_stays_a_multiply(tmp_path):
    varying = RNG.uniform(0.5, 1.5, (5, OUT)).astype(np.float32)
    model = _model(tmp_path, LINEAR, f"(5,{OUT})", gamma=varying)
    linear = next(step for step in model.steps if step.node.type == "Linear")
    np.testing.assert_array_equal(linear.node.attrs["weight"], WEIGHT)  # the multiply stays (an epilogue)
    x = RNG.standard_normal((2, 5, IN)).astype(np.float32)
    np.testing.assert_allclose(model(x), _linear(x) * varying, rtol=0, atol=2e-5)
    (tmp_path / "kept").mkdir()
    model = _model(tmp_path / "kept", LINEAR, f"({OUT})", outputs="z y")
    linear = next(step for step in model.steps if step.node.type == "Linear")
    np.testing.assert_array_equal(linear.node.attrs["weight"], WEIGHT)
    z, y = model(x)
    np.testing.assert_allclose(z, _linear(x) * GAMMA, rtol=0, atol=2e-5)
    np.testing.assert_allclose(y, _linear(x), rtol=0, atol=2e-5)


def _residual_model(tmp_path, expr):
    """PoolFormer's block end: one PNNX expression of the residual r, the conv's result y and the scale g."""
    body = f"""
pnnx.Input in0 0 1 x #x=(1,3,9,9)f32
pnnx.Input in1 0 1 r #r=(1,32,9,9)f32
{CONV} #x=(1,3,9,9)f32 #y=(1,32,9,9)f32
pnnx.Attribute scale 0 1 g @data=({OUT},1,1)f32 #g=({OUT},1,1)f32
pnnx.Expression sum 3 1 r y g z expr={expr} #z=(1,32,9,9)f32
pnnx.Output output 1 0 z
"""
    weights = {"conv.weight": CONV_WEIGHT.tobytes(), "conv.bias": BIAS.tobytes(), "scale.data": GAMMA.tobytes()}
    return kuiper.load(write_model(tmp_path, param_text(body), weights))


def test_a_layer_scale_inside_a_residual_expression_folds_into_the_conv(tmp_path):
    """``r + conv(x) * g`` in one expression: the conv's weight and bias take g, the expression reads 1 for
    it, so the conv's epilogue is a plain residual sum (a oneDNN post-op where oneDNN runs the conv)."""
    model = _residual_model(tmp_path, "add(@0,mul(@1,@2))")
    conv = next(step for step in model.steps if step.node.type == "Conv2d")
    np.testing.assert_allclose(conv.node.attrs["weight"], CONV_WEIGHT * GAMMA[:, None, None, None], rtol=1e-6)
    assert "Constant" not in [step.node.type for step in model.steps]  # the scale is read nowhere now
    x = RNG.standard_normal((1, 3, 9, 9)).astype(np.float32)
    r = RNG.standard_normal((1, 32, 9, 9)).astype(np.float32)
    np.testing.assert_allclose(model(x, r), r + _conv(x) * GAMMA[:, None, None], rtol=0, atol=2e-5)


def test_a_conv_result_read_outside_its_product_with_the_scale_keeps_the_scale(tmp_path):
    """``r + conv(x) * g + conv(x)``: scaling the weight would scale the second term too, so nothing folds."""
    model = _residual_model(tmp_path, "add(add(@0,mul(@1,@2)),@1)")
    conv = next(step for step in model.steps if step.node.type == "Conv2d")
    np.testing.assert_array_equal(conv.node.attrs["weight"], CONV_WEIGHT)
    x = RNG.standard_normal((1, 3, 9, 9)).astype(np.float32)
    r = RNG.standard_normal((1, 32, 9, 9)).astype(np.float32)
    expected = r + _conv(x) * GAMMA[:, None, None] + _conv(x)
    np.testing.assert_allclose(model(x, r), expected, rtol=0, atol=3e-5)


def test_a_layer_scale_inside_a_residual_expression_folds_into_a_linear(tmp_path):
    """CaiT's and EVA's ``x + gamma * fc(y)`` over tokens, one expression: the Linear's weight and bias take
    gamma (per feature, its last dim)."""
    body = f"""
pnnx.Input in0 0 1 x #x=(2,5,{IN})f32
pnnx.Input in1 0 1 r #r=(2,5,{OUT})f32
{LINEAR} #x=(2,5,{IN})f32 #y=(2,5,{OUT})f32
pnnx.Attribute scale 0 1 g @data=({OUT})f32 #g=({OUT})f32
pnnx.Expression sum 3 1 r g y z expr=add(@0,mul(@1,@2)) #z=(2,5,{OUT})f32
pnnx.Output output 1 0 z
"""
    weights = {"fc.weight": WEIGHT.tobytes(), "fc.bias": BIAS.tobytes(), "scale.data": GAMMA.tobytes()}
    model = kuiper.load(write_model(tmp_path, param_text(body), weights))
    linear = next(step for step in model.steps if step.node.type == "Linear")
    np.testing.assert_allclose(linear.node.attrs["weight"], WEIGHT * GAMMA[:, None], rtol=1e-6)
    x = RNG.standard_normal((2, 5, IN)).astype(np.float32)
    r = RNG.standard_normal((2, 5, OUT)).astype(np.float32)
    np.testing.assert_allclose(model(x, r), r + _linear(x) * GAMMA, rtol=0, atol=2e-5)
