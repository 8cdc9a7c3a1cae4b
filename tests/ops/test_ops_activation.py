"""Activations: values at hand-picked points against PyTorch's documented formulas
(written here in plain Python ``math``), softmax properties, clamp bounds, build-time
errors, and the fusion expressions each elementwise activation advertises.

The fixture models (act_*, softmax_*, clamp_bounds) check the same ops against
PyTorch itself; these tests add edge points (thresholds, +-1000) and errors.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import kuiper

from conftest import pnnx_node, write_model

# -- a one-op model from a hand-written .pnnx.param ---------------------------------------


def param_value(value) -> str:
    """A Python value written the way PNNX writes params (floats: repr, so inf/-inf too)."""
    if value is None:
        return "None"
    if isinstance(value, (list, tuple)):
        return "(" + ",".join(param_value(v) for v in value) + ")"
    return str(value) if not isinstance(value, float) else repr(value)


def one_op(tmp_path, op_type, arrays, params=None, keys=None, weights=None, n_out=1, backend="numpy"):
    """Build and run ``op_type`` on ``arrays`` (fed as inputs in order); returns (outputs, model)."""
    names = [f"i{k}" for k in range(len(arrays))]
    outs = [f"o{k}" for k in range(n_out)]
    items = [f"{k}={param_value(v)}" for k, v in (params or {}).items()]
    items += [f"@{k}=({','.join(map(str, w.shape))})f32" for k, w in (weights or {}).items()]
    items += [f"${key}={name}" for key, name in zip(keys or [], names) if key]
    lines = [f"pnnx.Input in{k} 0 1 {name}" for k, name in enumerate(names)]
    lines.append(" ".join([op_type, "op", str(len(names)), str(n_out), *names, *outs, *items]))
    lines.append(f"pnnx.Output out {n_out} 0 {' '.join(outs)}")
    text = f"7767517\n{len(lines)} {len(names) + n_out}\n" + "\n".join(lines) + "\n"
    blobs = {f"op.{k}": np.asarray(w, dtype="<f4").tobytes() for k, w in (weights or {}).items()}
    path = write_model(tmp_path, text, blobs if weights else None)
    model = kuiper.load(path, backend=backend, fuse=False)
    results = model(*arrays)
    results = results if isinstance(results, tuple) else (results,)
    return [kuiper.to_numpy(r) for r in results], model


# -- reference formulas (PyTorch docs), float64 ------------------------------------------------


def sigmoid(x):
    return 1 / (1 + math.exp(-x)) if x >= 0 else math.exp(x) / (1 + math.exp(x))


def softplus(x):
    return max(x, 0.0) + math.log1p(math.exp(-abs(x)))


def f32(value):
    """A param as the op sees it: PyTorch casts scalar params to the tensor's float32."""
    return float(np.float32(value))


SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946

# (type, params, reference)
ACTIVATIONS = [
    ("nn.ReLU", {}, lambda x: max(x, 0.0)),
    ("F.relu", {}, lambda x: max(x, 0.0)),
    ("nn.ReLU6", {}, lambda x: min(max(x, 0.0), 6.0)),
    ("F.relu6", {}, lambda x: min(max(x, 0.0), 6.0)),
    ("nn.LeakyReLU", {"negative_slope": 0.2}, lambda x: x if x > 0 else 0.2 * x),
    ("F.leaky_relu", {}, lambda x: x if x > 0 else 0.01 * x),
    ("nn.ELU", {"alpha": 0.7}, lambda x: x if x > 0 else 0.7 * math.expm1(x)),
    ("F.elu", {"alpha": 1.0}, lambda x: x if x > 0 else math.expm1(x)),
    ("nn.SELU", {}, lambda x: SELU_SCALE * (x if x > 0 else SELU_ALPHA * math.expm1(x))),
    # expm1 of min(x, 0): equal to the documented formula, without math.expm1 overflowing at x=1000
    ("nn.CELU", {"alpha": 1.3}, lambda x: max(0.0, x) + min(0.0, 1.3 * math.expm1(min(x, 0) / 1.3))),
    ("F.celu", {"alpha": 0.3}, lambda x: max(0.0, x) + min(0.0, 0.3 * math.expm1(min(x, 0) / 0.3))),
    ("nn.GELU", {}, lambda x: 0.5 * x * (1 + math.erf(x / math.sqrt(2)))),
    ("F.gelu", {"approximate": "none"}, lambda x: 0.5 * x * (1 + math.erf(x / math.sqrt(2)))),
    (
        "nn.GELU",
        {"approximate": "tanh"},
        lambda x: 0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
    ),
    ("nn.SiLU", {}, lambda x: x * sigmoid(x)),
    ("F.silu", {}, lambda x: x * sigmoid(x)),
    ("nn.Mish", {}, lambda x: x * math.tanh(softplus(x))),
    ("nn.Sigmoid", {}, sigmoid),
    ("F.sigmoid", {}, sigmoid),
    ("torch.sigmoid", {}, sigmoid),
    ("nn.Tanh", {}, math.tanh),
    ("torch.tanh", {}, math.tanh),
    ("nn.Hardswish", {}, lambda x: x * min(max(x + 3, 0.0), 6.0) / 6),
    ("F.hardswish", {}, lambda x: x * min(max(x + 3, 0.0), 6.0) / 6),
    ("nn.Hardsigmoid", {}, lambda x: min(max(x + 3, 0.0), 6.0) / 6),
    ("nn.Hardtanh", {"max_val": 0.7, "min_val": -0.5}, lambda x: min(max(x, -0.5), 0.7)),
    ("F.hardtanh", {}, lambda x: min(max(x, -1.0), 1.0)),
    ("nn.Softplus", {"beta": 2.0, "threshold": 5.0}, lambda x: x if 2 * x > 5 else softplus(2 * x) / 2),
    ("F.softplus", {"beta": 1, "threshold": 20}, lambda x: x if x > 20 else softplus(x)),
    ("nn.LogSigmoid", {}, lambda x: -softplus(-x)),
    ("nn.Softsign", {}, lambda x: x / (1 + abs(x))),
    ("nn.Tanhshrink", {}, lambda x: x - math.tanh(x)),
    # POINTS holds +-0.1/0.2/0.3 exactly: compared in float32, as PyTorch does.
    ("nn.Hardshrink", {"lambd": 0.3}, lambda x: x if abs(x) > f32(0.3) else 0.0),
    ("nn.Softshrink", {"lambd": 0.2}, lambda x: x - 0.2 if x > f32(0.2) else x + 0.2 if x < -f32(0.2) else 0.0),
    ("nn.Threshold", {"threshold": 0.1, "value": -2.0}, lambda x: x if x > f32(0.1) else -2.0),
    ("torch.clamp", {"max": None, "min": -0.5}, lambda x: max(x, -0.5)),
    ("torch.clamp", {"max": 0.3, "min": None}, lambda x: min(x, 0.3)),
    ("torch.clamp", {"max": 0.4, "min": -0.2}, lambda x: min(max(x, -0.2), 0.4)),
    ("torch.clamp", {"max": 0.1, "min": float("-inf")}, lambda x: min(x, 0.1)),
    ("torch.clamp", {"max": float("inf"), "min": 0.1}, lambda x: max(x, 0.1)),
    ("torch.clamp", {"max": -1.0, "min": 1.0}, lambda x: -1.0),  # min > max: PyTorch gives max
]

# Thresholds of the formulas above, both sides of zero, and magnitudes that overflow exp().
POINTS = np.array(
    [-1000, -30, -4, -3, -2.5, -1, -0.5, -0.3, -0.2, -1e-3, 0, 1e-3, 0.1, 0.2, 0.3, 0.5, 1, 2.5, 3, 4, 6, 7, 30, 1000],
    dtype=np.float32,
)


def case_id(case):
    op_type, params, _ = case
    return op_type + "".join(f"-{k}={v}" for k, v in params.items())


@pytest.mark.parametrize("case", ACTIVATIONS, ids=case_id)
def test_activation_matches_pytorch_formula_at_edge_points(tmp_path, case, backend_name):
    op_type, params, reference = case
    x = POINTS.reshape(2, -1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow / invalid-value warnings, even at +-1000
        (got,), _ = one_op(tmp_path, op_type, [x], params, keys=["input"], backend=backend_name)
    want = np.array([reference(float(v)) for v in x.reshape(-1)]).reshape(x.shape)
    assert got.shape == x.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4)


def test_gelu_modes_differ_where_the_tanh_approximation_is_inexact(tmp_path):
    x = np.array([[-2.0, -1.0, 1.5]], dtype=np.float32)
    (exact,), _ = one_op(tmp_path, "nn.GELU", [x], {"approximate": "none"})
    (approx,), _ = one_op(tmp_path, "nn.GELU", [x], {"approximate": "tanh"})
    # The two formulas differ by ~1e-4 .. 1e-3 here: both must be computed as asked.
    assert np.abs(exact - approx).max() > 1e-4


# -- PReLU ------------------------------------------------------------------------------------


def test_prelu_uses_one_slope_per_channel_on_dim_1(tmp_path):
    slopes = np.array([-0.5, 0.1, 2.0], dtype=np.float32)
    x = np.array([[[-2.0, 3.0], [-2.0, 3.0], [-2.0, 3.0]]], dtype=np.float32)  # (1, 3, 2)
    (got,), _ = one_op(tmp_path, "nn.PReLU", [x], {"num_parameters": 3}, weights={"weight": slopes})
    np.testing.assert_allclose(got, [[[1.0, 3.0], [-0.2, 3.0], [-4.0, 3.0]]], atol=1e-6)


def test_prelu_with_one_slope_broadcasts_over_every_element(tmp_path):
    x = np.array([[-1.0, 2.0], [-4.0, 0.0]], dtype=np.float32)
    (got,), model = one_op(tmp_path, "nn.PReLU", [x], {"num_parameters": 1},
                           weights={"weight": np.array([0.25], np.float32)})
    np.testing.assert_allclose(got, [[-0.25, 2.0], [-1.0, 0.0]], atol=1e-6)
    op = model.steps[0].op
    assert type(op).elementwise(op.node) is not None, "one slope: elementwise, so fusable"


def test_prelu_rejects_a_channel_count_that_does_not_match(tmp_path):
    x = np.zeros((1, 4, 2), dtype=np.float32)
    with pytest.raises(kuiper.ShapeError, match="3 slopes need 3 channels"):
        one_op(tmp_path, "nn.PReLU", [x], {"num_parameters": 3}, weights={"weight": np.ones(3, np.float32)})


def test_functional_prelu_takes_the_slopes_as_an_input(tmp_path):
    x = np.array([[-1.0, -1.0], [2.0, -2.0]], dtype=np.float32)  # channels are the columns (dim 1)
    slopes = np.array([0.5, 3.0], dtype=np.float32)
    (got,), _ = one_op(tmp_path, "F.prelu", [x, slopes], keys=["input", "weight"])
    np.testing.assert_allclose(got, [[-0.5, -3.0], [2.0, -6.0]], atol=1e-6)


# -- softmax family --------------------------------------------------------------------------------


def softmax_reference(x, axis):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("shape", [(2, 3, 4), (2, 3, 4, 5)], ids=["rank3", "rank4"])
@pytest.mark.parametrize("dim", [0, 1, -1, -2])
@pytest.mark.parametrize("op_type", ["nn.Softmax", "F.softmax", "nn.LogSoftmax", "F.log_softmax", "nn.Softmin"])
def test_softmax_family_along_each_dim(tmp_path, shape, dim, op_type, backend_name):
    x = np.random.default_rng(7).standard_normal(shape).astype(np.float32) * 3
    (got,), _ = one_op(tmp_path, op_type, [x], {"dim": dim}, keys=["input"], backend=backend_name)
    axis = dim % len(shape)
    if op_type == "nn.Softmin":
        want = softmax_reference(-x, axis)
    elif "og" in op_type:
        want = np.log(softmax_reference(x, axis))
    else:
        want = softmax_reference(x, axis)
        np.testing.assert_allclose(got.sum(axis=axis), 1.0, atol=1e-6)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)


@pytest.mark.parametrize("op_type", ["nn.Softmax", "nn.Softmin"])
def test_softmax_of_a_permuted_view_runs_on_a_c_ordered_copy(op_type, monkeypatch):
    """A view with the softmax dim strided (CaiT's talking-heads scores) is copied in C order, so the
    backend's in-place softmax gets rows it can take; the values are the float64 softmax's."""
    from kuiper.backends import get_backend
    from kuiper.ops.activation import Softmax

    backend = get_backend("numpy")
    seen = []
    real = backend.softmax_in_place
    monkeypatch.setattr(backend, "softmax_in_place",
                        lambda scores, axis: seen.append(scores.flags.c_contiguous) or real(scores, axis))
    x = np.transpose(np.random.default_rng(3).standard_normal((1, 9, 10, 4)).astype(np.float32) * 3, (0, 3, 1, 2))
    got = Softmax(pnnx_node(op_type, "s", ["x"], ["y"], {"dim": -1}), backend).forward(x)
    assert seen == [True]
    want = softmax_reference(-x if op_type == "nn.Softmin" else x, 3)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    assert not np.shares_memory(got, x)


def test_softmax_is_stable_for_large_inputs(tmp_path):
    x = np.array([[1000.0, 1001.0, 1002.0], [-1000.0, -1001.0, -1e30]], dtype=np.float32)
    (soft,), _ = one_op(tmp_path, "nn.Softmax", [x], {"dim": -1})
    (log_soft,), _ = one_op(tmp_path, "nn.LogSoftmax", [x], {"dim": 1})
    row = [math.exp(-2) / (math.exp(-2) + math.exp(-1) + 1), math.exp(-1) / (math.exp(-2) + math.exp(-1) + 1)]
    np.testing.assert_allclose(soft[0, :2], row, atol=1e-6)
    np.testing.assert_allclose(soft[1], [1 / (1 + math.exp(-1)), math.exp(-1) / (1 + math.exp(-1)), 0.0], atol=1e-6)
    assert np.isfinite(log_soft[0]).all()
    np.testing.assert_allclose(log_soft[0, 2], -math.log1p(math.exp(-1) + math.exp(-2)), atol=1e-5)


def test_softmax2d_normalizes_over_channels(tmp_path):
    x = np.random.default_rng(1).standard_normal((2, 3, 2, 2)).astype(np.float32)
    (got,), _ = one_op(tmp_path, "nn.Softmax2d", [x])
    np.testing.assert_allclose(got, softmax_reference(x, 1), atol=1e-6)


@pytest.mark.parametrize("shape, axis", [((4,), 0), ((2, 3, 4), 0), ((2, 3), 1), ((2, 3, 4, 5), 1)])
def test_softmax_without_dim_uses_pytorchs_legacy_choice(tmp_path, shape, axis):
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    (got,), _ = one_op(tmp_path, "nn.Softmax", [x], {"dim": None})
    np.testing.assert_allclose(got, softmax_reference(x, axis), atol=1e-6)


def test_softmax_dim_out_of_range_names_the_op(tmp_path):
    with pytest.raises(kuiper.KuiperError, match="dim 3 is out of range"):
        one_op(tmp_path, "nn.Softmax", [np.zeros((2, 2, 2), np.float32)], {"dim": 3})


# -- clamp with tensor bounds ----------------------------------------------------------------------


def test_clamp_takes_tensor_bounds_from_min_and_max_inputs(tmp_path):
    x = np.array([[-3.0, 0.0, 3.0]], dtype=np.float32)
    low = np.array([[-1.0], ], dtype=np.float32)  # broadcast over the row
    high = np.array([[-2.0, 0.5, 2.0]], dtype=np.float32)
    (got,), _ = one_op(tmp_path, "torch.clamp", [x, low, high], keys=["input", "min", "max"])
    # max(x, low) first, then min(., high): where high < low, high wins (PyTorch's order).
    np.testing.assert_allclose(got, [[-2.0, 0.0, 2.0]])
    (only_min,), _ = one_op(tmp_path, "torch.clamp", [x, low], {"max": None}, keys=["input", "min"])
    np.testing.assert_allclose(only_min, [[-1.0, 0.0, 3.0]])


# -- errors at build time ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "op_type, params, error, message",
    [
        ("nn.GELU", {"approximate": "erf"}, kuiper.UnsupportedOperatorError, "approximate='erf'.*'none', 'tanh'"),
        ("nn.CELU", {"alpha": 0.0}, kuiper.UnsupportedOperatorError, "alpha=0.0"),
        ("nn.Softplus", {"beta": 0.0}, kuiper.UnsupportedOperatorError, "beta=0.0"),
        ("nn.Softshrink", {"lambd": -1.0}, kuiper.UnsupportedOperatorError, "lambd=-1.0"),
        ("nn.LeakyReLU", {"negative_slope": "steep"}, kuiper.OperatorParamError, "negative_slope"),
        ("torch.clamp", {"max": None, "min": None}, kuiper.OperatorParamError, "at least one of 'min' and 'max'"),
        ("nn.Threshold", {"threshold": 0.5}, kuiper.OperatorParamError, "missing required param 'value'"),
        ("F.softmax", {"dim": 1, "dtype": "torch.float64"}, kuiper.UnsupportedOperatorError, "dtype"),
    ],
)
def test_unsupported_or_bad_params_fail_at_build_time_naming_op_and_param(tmp_path, op_type, params, error, message):
    with pytest.raises(error, match=message) as info:
        one_op(tmp_path, op_type, [np.zeros((1, 2), np.float32)], params)
    assert "op 'op'" in str(info.value) and op_type in str(info.value)


# -- fused and unfused against float64 on edge inputs -----------------------------------------------

# Tiny negatives (where exp(x) - 1 loses every digit and expm1 does not), signed zeros,
# magnitudes where exp overflows float32, infinities and NaN.
EDGE_POINTS = np.array(
    [-3e-8, -1e-6, -1e-3, -0.0, 0.0, 1e-7, 0.3, -0.7, 2.5, -20.0, 20.0, -88.0, 88.0, -1000.0, 1000.0,
     -np.inf, np.inf],
    dtype=np.float32,
)


# x - tanh(x) cancels near 0: in float32 (as PyTorch computes it too) the error is a few ulps of x.
CANCELLATION = {"nn.Tanhshrink": 2.4e-7}


def _chain_model(tmp_path, op_type, params, fuse, name):
    """``op_type`` followed by an expression, so that fusion has a chain to merge."""
    items = " ".join(f"{k}={param_value(v)}" for k, v in (params or {}).items())
    text = (
        "7767517\n4 3\npnnx.Input in0 0 1 x\n"
        f"{op_type} op 1 1 x a {items}\n"
        "pnnx.Expression e 1 1 a y expr=mul(@0,1.0)\npnnx.Output out 1 0 y\n"
    )
    return kuiper.load(write_model(tmp_path, text, name=name), fuse=fuse)


def _reference(function, values):
    """float64 reference rounded to float32, element by element."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = []
        for v in values.astype(np.float64):
            try:
                out.append(function(float(v)))
            except OverflowError:  # math.exp(1000): the limit is what float32 rounds to
                out.append(math.inf)
        return np.array(out, dtype=np.float64).astype(np.float32)


# 1: the NumPy evaluation; 100 (1,700 elements): the compiled interpreter where numba is on
# (kuiper/numba_kernels/elementwise.py takes float32 calls from 1,024 elements).
@pytest.mark.parametrize("repeats", [1, 100], ids=["small", "large"])
@pytest.mark.parametrize("case", ACTIVATIONS, ids=case_id)
def test_fused_and_unfused_agree_with_float64_on_edge_inputs(tmp_path, case, repeats):
    op_type, params, reference = case
    x = np.tile(EDGE_POINTS, repeats).reshape(1, -1)
    fused = _chain_model(tmp_path, op_type, params, True, "fused")
    unfused = _chain_model(tmp_path, op_type, params, False, "unfused")
    assert [s.node.type for s in fused.steps] == ["kuiper.Elementwise"]
    assert len(unfused.steps) == 2
    want = np.tile(_reference(reference, EDGE_POINTS), repeats).reshape(1, -1)
    for model in (fused, unfused):
        with np.errstate(over="ignore", invalid="ignore"):
            got = model(x)
        # Relative to float32 rounding of the float64 value; exact at zeros and infinities.
        allowed = 2e-6 * np.abs(want) + CANCELLATION.get(op_type, 0.0) * np.abs(x)
        with np.errstate(invalid="ignore"):
            close = (got == want) | (np.abs(got.astype(np.float64) - want) <= allowed) | (np.isnan(got) & np.isnan(want))
        assert close.all(), f"{op_type} {params}: at x={x[~close]} got {got[~close]}, float64 says {want[~close]}"


@pytest.mark.parametrize("case", ACTIVATIONS, ids=case_id)
def test_nan_propagates_through_every_activation_fused_and_not(tmp_path, case):
    op_type, params, _ = case
    for fuse in (True, False):
        model = _chain_model(tmp_path, op_type, params, fuse, f"nan{fuse}")
        with np.errstate(invalid="ignore"):
            assert np.isnan(model(np.float32([[np.nan]]))).all(), f"{op_type} fuse={fuse}"


def test_elu_of_tiny_negatives_keeps_every_digit(tmp_path):
    # exp(x) - 1 in float32 gives 0 and -9.5367e-07 here; expm1 gives the float64 answer.
    x = np.float32([[-3e-8, -1e-6, -1e-3]])
    for fuse in (True, False):
        got = _chain_model(tmp_path, "nn.ELU", {"alpha": 1.0}, fuse, f"elu{fuse}")(x)
        np.testing.assert_allclose(got, np.expm1(x.astype(np.float64)), rtol=1e-6)


def test_invalid_params_fail_at_build_time_fused_or_not(tmp_path):
    for fuse in (True, False):
        with pytest.raises(kuiper.UnsupportedOperatorError, match="approximate"):
            _chain_model(tmp_path, "nn.GELU", {"approximate": "erf"}, fuse, f"g{fuse}")
        with pytest.raises(kuiper.OperatorParamError, match="negative_slope"):
            _chain_model(tmp_path, "nn.LeakyReLU", {"negative_slope": "x"}, fuse, f"l{fuse}")


def test_softmax_and_per_channel_prelu_are_not_elementwise():
    from kuiper.ops.activation import PReLU, Softmax

    assert Softmax.elementwise(pnnx_node("nn.Softmax", "s", ["a"], ["b"], params={"dim": 1})) is None
    per_channel = pnnx_node("nn.PReLU", "p", ["a"], ["b"], attrs={"weight": np.ones(3, np.float32)})
    assert PReLU.elementwise(per_channel) is None


def test_clamp_with_tensor_bounds_reads_them_as_further_inputs(tmp_path):
    x = np.float32([[-2.0, 0.2, 3.0]])
    low = np.float32([[-1.0, 0.5, 0.0]])
    (got,), _ = one_op(tmp_path, "torch.clamp", [low, x], {"max": 0.5}, keys=["min", "input"])
    np.testing.assert_array_equal(got, [[-1.0, 0.5, 0.5]])


@pytest.mark.parametrize(
    "op_type, want", [("aten::clamp_min", [[0.1, 0.1, 3.0]]), ("aten::clamp_max", [[-3.0, 0.0, 0.1]])]
)
def test_aten_clamp_min_and_max_take_the_bound_as_second_input(tmp_path, op_type, want):
    # pnnx leaves x.clamp_min(0.1) as aten::clamp_min(x, <constant expression 0.1>).
    x = np.array([[-3.0, 0.0, 3.0]], dtype=np.float32)
    (got,), _ = one_op(tmp_path, op_type, [x, np.array(0.1, np.float32)])
    np.testing.assert_allclose(got, want, atol=1e-7)
