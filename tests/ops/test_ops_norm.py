"""Normalisation ops (kuiper/ops/norm_*.py): hand-computed values, properties, and errors.

The comparison with PyTorch comes from the fixtures in tests/end_to_end/test_models.py; the values
here follow the definitions (biased variance, eps inside the square root).
"""


import numpy as np
import pytest

import kuiper
from kuiper.errors import OperatorParamError, ShapeError, UnsupportedOperatorError
from kuiper.graph import build
from kuiper.model_ir import ModelIR, OperandInfo, OpNode

from conftest import MODELS, op_model, pnnx_file_ops
from test_ops_activation import one_op

def run(model, *arrays):
    return kuiper.to_numpy(model(*[np.asarray(a, dtype=np.float32) for a in arrays]))


def random(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# -- batch norm ------------------------------------------------------------------

# mean (1, 2), var (4, 0.25), weight (2, 1), bias (0, 1), eps 0:
#   channel 0: (3 - 1) / 2 * 2 + 0 = 2;  channel 1: (2.5 - 2) / 0.5 * 1 + 1 = 2
BN_WEIGHTS = {"running_mean": [1.0, 2.0], "running_var": [4.0, 0.25], "weight": [2.0, 1.0], "bias": [0.0, 1.0]}
BN1D = "nn.BatchNorm1d bn 1 1 x y affine=True eps=0.0 num_features=2"


def test_batch_norm1d_on_nc_by_hand(tmp_path, backend_name):
    model = op_model(tmp_path, BN1D, weights=BN_WEIGHTS, backend=backend_name)
    np.testing.assert_allclose(run(model, [[3.0, 2.5]]), [[2.0, 2.0]], rtol=1e-6)


def test_batch_norm1d_on_ncl_scales_each_channel(tmp_path, backend_name):
    model = op_model(tmp_path, BN1D, weights=BN_WEIGHTS, backend=backend_name)
    x = np.array([[[3.0, 1.0, 5.0], [2.5, 2.0, 1.5]]])
    np.testing.assert_allclose(run(model, x), [[[2.0, 0.0, 4.0], [2.0, 1.0, 0.0]]], rtol=1e-6, atol=1e-6)


def test_batch_norm_without_affine(tmp_path):
    line = "nn.BatchNorm2d bn 1 1 x y affine=False eps=0.0 num_features=2"
    weights = {key: BN_WEIGHTS[key] for key in ("running_mean", "running_var")}
    model = op_model(tmp_path, line, weights=weights)
    got = run(model, np.array([3.0, 2.5]).reshape(1, 2, 1, 1))
    np.testing.assert_allclose(got.ravel(), [1.0, 1.0], rtol=1e-6)


def test_f_batch_norm_with_statistics_and_weight_as_inputs(tmp_path, backend_name):
    line = ("F.batch_norm bn 5 1 x m v w b y eps=0.0 "
            "$input=x $running_mean=m $running_var=v $weight=w $bias=b")
    model = op_model(tmp_path, line, inputs=("x", "m", "v", "w", "b"), backend=backend_name)
    got = run(model, [[3.0, 2.5]], *(BN_WEIGHTS[k] for k in ("running_mean", "running_var", "weight", "bias")))
    np.testing.assert_allclose(got, [[2.0, 2.0]], rtol=1e-6)


def test_batch_norm_channel_mismatch_is_a_shape_error(tmp_path):
    model = op_model(tmp_path, BN1D, weights=BN_WEIGHTS)
    with pytest.raises(ShapeError, match=r"expected 2 channels"):
        model(np.zeros((1, 3), np.float32))


# -- layer norm ------------------------------------------------------------------


def test_layer_norm_by_hand(tmp_path, backend_name):
    # [1, 2, 3]: mean 2, biased variance 2/3, so (x - 2) / sqrt(2/3) = (-1.2247, 0, 1.2247)
    line = "nn.LayerNorm ln 1 1 x y elementwise_affine=True eps=0.0 normalized_shape=(3)"
    model = op_model(tmp_path, line, weights={"weight": [1.0, 2.0, 3.0], "bias": [0.0, 0.0, 1.0]},
                     backend=backend_name)
    s = np.sqrt(1.5)
    np.testing.assert_allclose(run(model, [[1.0, 2.0, 3.0]]), [[-s, 0.0, 3 * s + 1]], rtol=1e-5)


def test_layer_norm_over_two_dims_gives_zero_mean_unit_variance(tmp_path):
    line = "nn.LayerNorm ln 1 1 x y elementwise_affine=False eps=1.000000e-5 normalized_shape=(4,5)"
    got = run(op_model(tmp_path, line), random(2, 3, 4, 5) * 3 + 7)
    np.testing.assert_allclose(got.mean(axis=(-2, -1)), 0.0, atol=1e-5)
    np.testing.assert_allclose(got.var(axis=(-2, -1)), 1.0, atol=1e-4)
    # ... and the statistics really are over the last two dims only: rows differ
    assert not np.allclose(got.mean(axis=-1), 0.0, atol=1e-3)


def test_f_layer_norm_without_weight(tmp_path):
    line = "F.layer_norm ln 1 1 x y bias=None eps=0.0 normalized_shape=(2) weight=None $input=x"
    # any two different values normalise to (-1, 1)
    np.testing.assert_allclose(run(op_model(tmp_path, line), [[1.0, 3.0], [9.0, 5.0]]),
                               [[-1.0, 1.0], [1.0, -1.0]], rtol=1e-6)


def test_layer_norm_wrong_trailing_shape_is_a_shape_error(tmp_path):
    line = "nn.LayerNorm ln 1 1 x y elementwise_affine=False eps=1.000000e-5 normalized_shape=(4,5)"
    with pytest.raises(ShapeError, match=r"the last 2 dim\(s\) must be \(4, 5\)"):
        op_model(tmp_path, line)(np.zeros((2, 5, 4), np.float32))


def _fast_variance_layer_norm(dtype, width=4):
    """A canonical LayerNorm with fast_variance, its weight and bias given as inputs (how JAX passes them)."""
    node = OpNode("LayerNorm", "ln", ["x", "w", "b"], ["y"], {"normalized_shape": [width], "eps": 0.25,
                                                             "fast_variance": True},
                  input_keys=["input", "weight", "bias"])
    operands = {name: OperandInfo(name, None, dtype) for name in ("x", "w", "b", "y")}
    return build(ModelIR([node], operands, ["x", "w", "b"], ["y"], "test"))


@pytest.mark.parametrize("dtype", ["float32", "float64"])  # the compiled loop, the reference
def test_layer_norm_with_fast_variance_by_hand(dtype):
    # [1, 3, 5, 7]: mean 4, mean of squares 21, var 21 - 16 = 5, so (x - 4) / sqrt(5.25) * w + b;
    # [2, 2, 2, 2]: var 0, (x - 2) = 0, so b; a row holding NaN is NaN (max(NaN, 0) stays NaN).
    x = np.array([[1, 3, 5, 7], [2, 2, 2, 2], [1, np.nan, 0, 0]], dtype)
    w, b = np.array([1, 2, 3, 4], dtype), np.array([0, 1, 0, -1], dtype)
    got = kuiper.to_numpy(_fast_variance_layer_norm(dtype)(x, w, b))
    s = np.sqrt(5.25)
    expected = [[-3 / s, -2 / s + 1, 3 / s, 12 / s - 1], [0, 1, 0, -1], [np.nan] * 4]
    assert got.dtype == dtype
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_layer_norm_with_fast_variance_keeps_the_formulas_float32_rounding():
    # 512 + [1, 2, 2, 1, 1, 1, 1, 1] / 2: every float32 sum is exact (mean 512.6875, mean of squares
    # 262848.5), but mean^2 = 262848.47265625 rounds to 262848.4375 in float32, so the formula's variance is
    # 0.0625 where the two-pass one is 0.046875 (normalised values 15% apart).
    x = (np.float32(512) + np.array([[1, 2, 2, 1, 1, 1, 1, 1]], np.float32) / 2)
    mean = np.float32(x.astype(np.float64).sum() / 8)
    var = np.float32(np.float32((x * x).astype(np.float64).sum()) / 8) - mean * mean
    assert var == np.float32(0.0625) and x.astype(np.float64).var() == 0.046875
    node = _fast_variance_layer_norm("float32", width=8)
    ones, zeros = np.ones(8, np.float32), np.zeros(8, np.float32)
    got = kuiper.to_numpy(node(x, ones, zeros))
    np.testing.assert_allclose(got, (x - mean) / np.sqrt(0.0625 + 0.25), rtol=1e-6)


# -- group norm and instance norm ----------------------------------------------------


@pytest.mark.parametrize("group_line, same_line, shape, weights", [
    pytest.param("F.group_norm gn 1 1 x y bias=None eps=1.000000e-5 num_groups=1 weight=None $input=x",
                 "F.layer_norm ln 1 1 x y bias=None eps=1.000000e-5 normalized_shape=(4,3,5) weight=None $input=x",
                 (2, 4, 3, 5), None, id="one_group_is_layer_norm_over_c_h_w"),
    pytest.param("nn.GroupNorm gn 1 1 x y affine=True eps=1.000000e-5 num_channels=3 num_groups=3",
                 "nn.InstanceNorm2d in 1 1 x y affine=True eps=1.000000e-5 num_features=3 track_running_stats=False",
                 (2, 3, 4, 5), {"weight": [1.0, 2.0, 0.5], "bias": [0.0, -1.0, 3.0]},
                 id="a_group_per_channel_is_instance_norm"),
])
def test_group_norm_equals_its_special_cases(tmp_path, backend_name, group_line, same_line, shape, weights):
    x = random(*shape)
    group = op_model(tmp_path, group_line, weights=weights, backend=backend_name)
    same = op_model(tmp_path, same_line, weights=weights, backend=backend_name)
    np.testing.assert_allclose(run(group, x), run(same, x), atol=1e-5)


def test_group_norm_by_hand(tmp_path):
    # groups of two channels, one value each: [1, 3] -> (-1, 1), [10, 10] -> (0, 0) (eps 0 would divide 0 by 0)
    line = "nn.GroupNorm gn 1 1 x y affine=True eps=1.000000e-5 num_channels=4 num_groups=2"
    model = op_model(tmp_path, line, weights={"weight": [1.0, 2.0, 3.0, 4.0], "bias": [0.0, 0.0, 0.5, 0.5]})
    np.testing.assert_allclose(run(model, [[1.0, 3.0, 10.0, 10.0]]), [[-1.0, 2.0, 0.5, 0.5]], atol=1e-4)


def test_instance_norm1d_unbatched_equals_batched(tmp_path):
    line = "nn.InstanceNorm1d in 1 1 x y affine=False eps=1.000000e-5 num_features=3 track_running_stats=False"
    model = op_model(tmp_path, line)
    x = random(3, 7)
    np.testing.assert_allclose(run(model, x), run(model, x[None])[0], atol=1e-6)
    np.testing.assert_allclose(run(model, x).mean(axis=-1), 0.0, atol=1e-6)


def test_instance_norm_with_running_stats_is_a_per_channel_affine(tmp_path, backend_name):
    line = "nn.InstanceNorm1d in 1 1 x y affine=True eps=0.0 num_features=2 track_running_stats=True"
    model = op_model(tmp_path, line, weights=BN_WEIGHTS, backend=backend_name)
    np.testing.assert_allclose(run(model, [[[3.0], [2.5]]]), [[[2.0], [2.0]]], rtol=1e-6)


def test_f_instance_norm_weight_inputs(tmp_path):
    line = ("F.instance_norm in 3 1 x w b y eps=0.0 running_mean=None running_var=None "
            "$input=x $weight=w $bias=b")
    model = op_model(tmp_path, line, inputs=("x", "w", "b"))
    got = run(model, [[[1.0, 3.0], [0.0, 4.0]]], [2.0, 1.0], [0.0, 5.0])
    np.testing.assert_allclose(got, [[[-2.0, 2.0], [4.0, 6.0]]], rtol=1e-6)


# -- F.normalize -------------------------------------------------------------------


@pytest.mark.parametrize(
    "p, expected",
    [
        ("2.0", [0.6, -0.8]),
        ("1.0", [3 / 7, -4 / 7]),
        ("inf", [0.75, -1.0]),  # pnnx writes p=inf as a bare token
        ("3", [3 / 91 ** (1 / 3), -4 / 91 ** (1 / 3)]),  # |3|^3 + |4|^3 = 91
    ],
)
def test_normalize_by_hand(tmp_path, backend_name, p, expected):
    model = op_model(tmp_path, f"F.normalize n 1 1 x y dim=-1 eps=1.000000e-12 p={p} $input=x", backend=backend_name)
    np.testing.assert_allclose(run(model, [[3.0, -4.0]]), [expected], rtol=1e-6)


def test_normalize_clamps_small_norms_to_eps(tmp_path):
    model = op_model(tmp_path, "F.normalize n 1 1 x y dim=0 eps=0.5 p=2.0 $input=x")
    np.testing.assert_allclose(run(model, [[0.0, 0.3], [0.0, 0.0]]), [[0.0, 0.6], [0.0, 0.0]], rtol=1e-6)


def test_normalize_dim_out_of_range_names_the_op(tmp_path):
    model = op_model(tmp_path, "F.normalize n 1 1 x y dim=2 eps=1.000000e-12 p=2.0 $input=x")
    with pytest.raises(OperatorParamError, match=r"op 'n'.*dim 2 is out of range for a tensor of rank 2"):
        model(np.zeros((2, 2), np.float32))


# -- RMS norm and local response norm: brute-force float64 references from the PyTorch docs --


def test_rms_norm_with_and_without_weight_and_default_eps(tmp_path):
    x = random(2, 3, 4, 5, seed=3)
    weight = np.random.default_rng(4).uniform(0.5, 1.5, (4, 5)).astype(np.float32)
    (got,), _ = one_op(tmp_path, "nn.RMSNorm", [x], {"elementwise_affine": True, "eps": None,
                                                      "normalized_shape": (4, 5)}, weights={"weight": weight})
    x64 = x.astype(np.float64)
    eps = float(np.finfo(np.float32).eps)
    want = x64 / np.sqrt((x64 ** 2).mean(axis=(-2, -1), keepdims=True) + eps) * weight
    np.testing.assert_allclose(got, want, atol=1e-5)
    (plain,), _ = one_op(tmp_path, "nn.RMSNorm", [x], {"elementwise_affine": False, "eps": 0.5,
                                                        "normalized_shape": (5,)})
    np.testing.assert_allclose(plain, x64 / np.sqrt((x64 ** 2).mean(axis=-1, keepdims=True) + 0.5), atol=1e-5)
    gain = weight[0]
    (functional,), _ = one_op(tmp_path, "F.rms_norm", [x, gain], {"eps": 1e-4, "normalized_shape": (5,)},
                              keys=["input", "weight"])
    np.testing.assert_allclose(functional, x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-4) * gain, atol=1e-5)
    with pytest.raises(kuiper.KuiperError, match="last 1 dim"):
        one_op(tmp_path, "nn.RMSNorm", [random(2, 4)], {"normalized_shape": (5,)})


@pytest.mark.parametrize("shape,size", [((2, 6, 3), 3), ((1, 5, 2, 3), 2), ((1, 4, 2, 2, 2), 5)])
def test_local_response_norm(tmp_path, shape, size):
    x = random(*shape, seed=5)
    params = {"alpha": 0.3, "beta": 0.6, "k": 1.5, "size": size}
    (got,), _ = one_op(tmp_path, "nn.LocalResponseNorm", [x], params)
    x64 = x.astype(np.float64)
    channels = shape[1]
    want = np.empty_like(x64)
    for c in range(channels):
        window = range(max(0, c - size // 2), min(channels, c + (size - 1) // 2 + 1))
        total = sum(x64[:, j] ** 2 for j in window)
        want[:, c] = x64[:, c] / (1.5 + 0.3 / size * total) ** 0.6
    np.testing.assert_allclose(got, want, atol=1e-5)
    (functional,), _ = one_op(tmp_path, "F.local_response_norm", [x], params)
    np.testing.assert_array_equal(functional, got)


# -- build-time errors ------------------------------------------------------------


@pytest.mark.parametrize(
    "line, weights, error, message",
    [
        ("nn.BatchNorm2d n 1 1 x y affine=True eps=1.000000e-5 num_features=2",
         {"running_mean": [0.0, 0.0], "running_var": [1.0, 1.0]},
         OperatorParamError, r"affine=True needs the weight '@weight'"),
        ("nn.BatchNorm2d n 1 1 x y affine=False eps=1.000000e-5 num_features=3",
         {"running_mean": [0.0, 0.0], "running_var": [1.0, 1.0]},
         OperatorParamError, r"num_features=3 but the statistics have 2 channels"),
        ("F.batch_norm n 1 1 x y bias=None eps=1.000000e-5 running_mean=None running_var=None weight=None $input=x",
         {}, UnsupportedOperatorError, r"running_mean=None is not supported"),
        ("nn.GroupNorm n 1 1 x y affine=False eps=1.000000e-5 num_channels=6 num_groups=4", {},
         OperatorParamError, r"num_groups=4 does not divide num_channels=6"),
        ("nn.LayerNorm n 1 1 x y elementwise_affine=True eps=1.000000e-5 normalized_shape=(3)",
         {"weight": [1.0, 1.0], "bias": [0.0, 0.0]},
         OperatorParamError, r"weight and bias must have shape \(3,\)"),
        ("nn.LayerNorm n 1 1 x y elementwise_affine=False eps=1.000000e-5 normalized_shape=(0)", {},
         OperatorParamError, r"'normalized_shape' must be positive"),
        ("nn.InstanceNorm2d n 1 1 x y affine=False eps=1.000000e-5 num_features=2 track_running_stats=True", {},
         OperatorParamError, r"track_running_stats=True needs '@running_mean'"),
        ("F.layer_norm n 1 1 x y bias=None eps=1.000000e-5 normalized_shape=(3) weight=True $input=x", {},
         UnsupportedOperatorError, r"weight=True is not supported"),
    ],
)
def test_invalid_params_fail_at_load_time(tmp_path, line, weights, error, message):
    with pytest.raises(error, match=message) as info:
        op_model(tmp_path, line, weights=weights)
    assert "op 'n'" in str(info.value)


def test_group_norm_channels_not_divisible_at_run_time_is_a_shape_error(tmp_path):
    model = op_model(tmp_path, "F.group_norm gn 1 1 x y bias=None eps=1.000000e-5 num_groups=2 weight=None $input=x")
    with pytest.raises(ShapeError, match=r"C divisible by 2"):
        model(np.zeros((1, 3, 4), np.float32))


# -- the fixtures cover what they claim ----------------------------------------------


@pytest.mark.parametrize(
    "fixture, op_type, keys",
    [
        ("batchnorm1d_nc", "nn.BatchNorm1d", [None]),
        ("batchnorm1d_ncl", "nn.BatchNorm1d", [None]),
        ("f_batch_norm", "F.batch_norm", ["input", "running_mean", "running_var"]),
        ("f_group_norm_noaffine", "F.group_norm", ["input"]),
        ("f_layer_norm_weight_expr", "F.layer_norm", ["input", "weight", "bias"]),
        ("f_instance_norm", "F.instance_norm", ["input", "weight", "bias"]),
        ("instancenorm2d_running", "nn.InstanceNorm2d", [None]),
        ("f_normalize_p3_negdim", "F.normalize", ["input"]),
    ],
)
def test_norm_fixtures_contain_the_op_they_cover(fixture, op_type, keys):
    ops = [op for op in pnnx_file_ops(MODELS / fixture / "model.pnnx.param") if op.type == op_type]
    assert len(ops) == 1
    assert ops[0].input_keys == keys


def test_batchnorm1d_nc_fixture_runs_on_two_dims():
    (spec,) = kuiper.load(MODELS / "batchnorm1d_nc" / "model.pnnx.param").inputs
    assert len(spec.shape) == 2  # (N, C): the BN sees no length dim
