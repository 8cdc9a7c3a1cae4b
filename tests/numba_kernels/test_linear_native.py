"""nn.Linear on oneDNN (kuiper/numba_kernels/linear_native.py): which Linears go there, with which epilogue,
and that every path computes what a float64 NumPy reference does."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kuiper
from kuiper import onednn
from kuiper.onednn.primitives import PRODUCT_WORK

from conftest import param_text, write_model

pytest.importorskip("numba")
pytestmark = pytest.mark.skipif(not onednn.available(), reason=onednn.describe())

RNG = np.random.default_rng(3)
IN, OUT = 96, 192  # 60 rows of these make 1.1 M multiply-adds: enough for oneDNN (PRODUCT_WORK)
WEIGHT = (RNG.standard_normal((OUT, IN)) / math.sqrt(IN)).astype(np.float32)
BIAS = RNG.standard_normal(OUT).astype(np.float32)
WEIGHTS = {"fc.weight": WEIGHT.tobytes(), "fc.bias": BIAS.tobytes()}
TOLERANCE = 1e-5


def _load(tmp_path, body, **options):
    return kuiper.load(write_model(tmp_path, param_text(body), WEIGHTS), **options)


def _linear(x):
    return x.astype(np.float64) @ WEIGHT.T.astype(np.float64) + BIAS


def _gelu(v):
    return 0.5 * v * (1 + np.vectorize(math.erf)(v / math.sqrt(2)))


def _close(actual, expected):
    assert actual.dtype == np.float32 and actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=0, atol=TOLERANCE * max(1.0, np.abs(expected).max()))


LINEAR = f"nn.Linear fc 1 1 x a bias=True in_features={IN} out_features={OUT} @weight=({OUT},{IN})f32 @bias=({OUT})f32"

GELU_MODEL = f"""
pnnx.Input in0 0 1 x
{LINEAR}
nn.GELU act 1 1 a b
pnnx.Output out 1 0 b
"""

RESIDUAL_MODEL = f"""
pnnx.Input in0 0 1 x
pnnx.Input in1 0 1 r
{LINEAR}
pnnx.Expression add 2 1 r a b expr=add(@0,@1)
pnnx.Output out 1 0 b
"""


def test_a_linear_takes_the_gelu_after_it_as_a_post_op(tmp_path):
    model = _load(tmp_path, GELU_MODEL, threads=2)
    (step,) = model.steps
    assert step.node.params["epilogue_members"] == ["act"]
    assert step.op.native is not None and "post-ops" in step.op.kernel_note
    assert model.blas_threads == 1  # oneDNN owns the cores: BLAS stays on the calling thread
    x = RNG.standard_normal((2, 30, IN)).astype(np.float32)
    _close(model(x), _gelu(_linear(x)))


def test_a_residual_add_becomes_a_sum_post_op_and_the_residual_is_kept(tmp_path):
    model = _load(tmp_path, RESIDUAL_MODEL)
    (step,) = model.steps
    assert step.op.native is not None and step.op.native.adds_residual
    x = RNG.standard_normal((2, 30, IN)).astype(np.float32)
    r = RNG.standard_normal((2, 30, OUT)).astype(np.float32)
    kept = r.copy()
    _close(model(x, r), _linear(x) + r)
    np.testing.assert_array_equal(r, kept)


def test_a_residual_that_broadcasts_is_added_after_the_product(tmp_path):
    model = _load(tmp_path, RESIDUAL_MODEL)
    x = RNG.standard_normal((2, 30, IN)).astype(np.float32)
    r = RNG.standard_normal((1, 1, OUT)).astype(np.float32)
    _close(model(x, r), _linear(x) + r)


def test_an_epilogue_without_post_ops_runs_after_the_onednn_product(tmp_path):
    body = RESIDUAL_MODEL.replace("expr=add(@0,@1)", "expr=add(@0,mul(@1,3.0))")
    model = _load(tmp_path, body)
    (step,) = model.steps
    assert step.op.native is not None and step.op.epilogue_after and "after the product" in step.op.kernel_note
    x = RNG.standard_normal((2, 30, IN)).astype(np.float32)
    r = RNG.standard_normal((2, 30, OUT)).astype(np.float32)
    _close(model(x, r), r + 3 * _linear(x))
    _close(model(x[:1, :2], r[:1, :2]), r[:1, :2] + 3 * _linear(x[:1, :2]))  # small: the reference, then the epilogue


@pytest.mark.parametrize("shape, on_onednn", [
    ((IN,), False), ((3, IN), False), ((64, IN), True), ((3, 5, 8, IN), True),
])
def test_any_leading_dims_pass_through_and_small_products_stay_on_numpy(tmp_path, monkeypatch, shape, on_onednn):
    calls = []
    run = onednn.MatMul.__call__
    monkeypatch.setattr(onednn.MatMul, "__call__", lambda self, *args, **kw: calls.append(1) or run(self, *args, **kw))
    model = _load(tmp_path, GELU_MODEL)
    x = RNG.standard_normal(shape).astype(np.float32)
    _close(model(x), _gelu(_linear(x)))
    assert bool(calls) == on_onednn == (np.prod(shape) * OUT >= PRODUCT_WORK)


def test_other_dtypes_take_the_reference(tmp_path):
    model = _load(tmp_path, GELU_MODEL)
    x = RNG.standard_normal((4, IN))
    out = model(x)
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, _gelu(_linear(x)), rtol=1e-6, atol=1e-6)


def test_a_wrong_width_names_the_op_and_the_shape(tmp_path):
    model = _load(tmp_path, GELU_MODEL)
    with pytest.raises(kuiper.ShapeError, match=rf"fc.*last dim {IN}.*\(2, {IN + 1}\)"):
        model(np.zeros((2, IN + 1), np.float32))


def test_a_float64_bias_keeps_the_reference_and_its_promotion(tmp_path):
    body = GELU_MODEL.replace(f"@bias=({OUT})f32", f"@bias=({OUT})f64")
    lines = body.strip().splitlines()
    text = f"7767517\n{len(lines)} 3\n" + "\n".join(line.strip() for line in lines) + "\n"
    weights = {"fc.weight": WEIGHT.tobytes(), "fc.bias": BIAS.astype(np.float64).tobytes()}
    model = kuiper.load(write_model(tmp_path, text, weights))
    (step,) = model.steps
    assert step.op.native is None
    x = RNG.standard_normal((64, IN)).astype(np.float32)
    out = model(x)
    assert out.dtype == np.float64  # float32 product + float64 bias, promoted as the reference op does
    np.testing.assert_allclose(out, _gelu(_linear(x)), rtol=0, atol=1e-5)


def _heads_model(tmp_path, features_in, features_out, act=""):
    """A Linear over the heads of (N, heads, L, L) maps viewed as (N, L, L, heads), as CaiT's talking heads do."""
    weight = (RNG.standard_normal((features_out, features_in)) / math.sqrt(features_in)).astype(np.float32)
    bias = RNG.standard_normal(features_out).astype(np.float32)
    last = "y"
    lines = [
        "pnnx.Input in0 0 1 x",
        "Tensor.permute permute 1 1 x xp dims=(0,2,3,1)",
        f"nn.Linear proj 1 1 xp y bias=True in_features={features_in} out_features={features_out} "
        f"@weight=({features_out},{features_in})f32 @bias=({features_out})f32",
    ]
    if act:
        lines.append(f"{act} act 1 1 y z")
        last = "z"
    lines.append(f"pnnx.Output out 1 0 {last}")
    path = write_model(tmp_path, param_text("\n".join(lines)), {"proj.weight": weight.tobytes(), "proj.bias": bias.tobytes()})
    return kuiper.load(path), weight, bias


@pytest.mark.parametrize("act, function", [("", lambda v: v), ("nn.GELU", _gelu)])
def test_a_linear_over_the_outermost_axis_multiplies_in_place_and_returns_a_view(tmp_path, act, function):
    model, weight, bias = _heads_model(tmp_path, 4, 6, act)
    (step,) = [step for step in model.steps if step.node.type == "Linear"]
    x = RNG.standard_normal((2, 4, 30, 30)).astype(np.float32)
    xp = np.transpose(x, (0, 2, 3, 1))
    expected = function(xp.astype(np.float64) @ weight.T.astype(np.float64) + bias)
    seen = []
    product = step.op._product_along_outer_axis
    step.op._product_along_outer_axis = lambda value, axis: seen.append(axis) or product(value, axis)
    _close(model(x), expected)
    assert seen == [1]  # the batch, then the heads: W @ x per image, in the heads-major layout
    _close(model(x[:1]), expected[:1])
    assert seen == [1, 0]  # one image: the heads are outermost
    assert product(xp, 1).base is not None  # a view of the (N, out, L, L) result, no copy


def test_a_wide_linear_over_the_outermost_axis_keeps_onednn(tmp_path):
    model, weight, bias = _heads_model(tmp_path, 32, 24)
    (step,) = [step for step in model.steps if step.node.type == "Linear"]
    x = RNG.standard_normal((2, 32, 40, 40)).astype(np.float32)
    xp = np.transpose(x, (0, 2, 3, 1))
    calls = []
    step.op._product_along_outer_axis = lambda value, axis: calls.append(value)  # must not be reached
    _close(model(x), xp.astype(np.float64) @ weight.T.astype(np.float64) + bias)
    assert not calls


@pytest.mark.parametrize("rows, on_onednn", [(1, False), (2, True)])
def test_one_row_is_a_gemv_on_blas_whatever_its_size(tmp_path, monkeypatch, rows, on_onednn):
    """A batch-1 classifier (1 x 1280 @ 1280 x 1000) is a matrix-vector product: BLAS's gemv beats oneDNN's
    matmul there, though its work is over PRODUCT_WORK; two rows go to oneDNN."""
    width, features = 1280, 1000
    weight = (RNG.standard_normal((features, width)) / math.sqrt(width)).astype(np.float32)
    bias = RNG.standard_normal(features).astype(np.float32)
    body = (f"pnnx.Input in0 0 1 x\nnn.Linear fc 1 1 x y bias=True in_features={width} out_features={features} "
            f"@weight=({features},{width})f32 @bias=({features})f32\npnnx.Output out 1 0 y\n")
    model = kuiper.load(write_model(tmp_path, param_text(body), {"fc.weight": weight.tobytes(),
                                                               "fc.bias": bias.tobytes()}))
    calls = []
    run = onednn.MatMul.__call__
    monkeypatch.setattr(onednn.MatMul, "__call__", lambda self, *args, **kw: calls.append(1) or run(self, *args, **kw))
    x = RNG.standard_normal((rows, width)).astype(np.float32)
    assert rows * width * features >= PRODUCT_WORK
    got = model(x)
    expected = x.astype(np.float64) @ weight.T.astype(np.float64) + bias
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-4 * np.abs(expected).max())
    assert bool(calls) == on_onednn
