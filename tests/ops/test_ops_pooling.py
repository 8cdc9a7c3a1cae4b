"""Pooling ops (kuiper/ops/pooling_*.py): PyTorch's border rules by hand, adaptive bins, errors.

The comparison with PyTorch comes from the fixtures in tests/end_to_end/test_models.py; the values
here are worked out by hand from PyTorch's documented rules.
"""


import numpy as np
import pytest
from conftest import MODELS, op_model, pnnx_file_ops
from single_op import run_op

import kuiper
from kuiper.errors import OperatorParamError, ShapeError


def run(model, x):
    result = model(np.asarray(x, dtype=np.float32))
    return tuple(kuiper.to_numpy(r) for r in result) if isinstance(result, tuple) else kuiper.to_numpy(result)


# -- average pooling: PyTorch's divisors at the borders ---------------------------------

# x = [1, 2, 3, 4], kernel 3, stride 2, padding 1, ceil_mode: three windows
#   [-1, 2): real 1, 2          sum 3
#   [ 1, 4): real 2, 3, 4       sum 9
#   [ 3, 6): clipped to the padded end 5 -> [3, 5): real 4   sum 4
# count_include_pad divides by the clipped window (3, 3, 2); without it by the real count (2, 3, 1).
AVG1D = "nn.AvgPool1d p 1 1 x y ceil_mode=True kernel_size=(3) padding=(1) stride=(2) "


@pytest.mark.parametrize(
    "params, expected",
    [
        ("count_include_pad=True", [3 / 3, 9 / 3, 4 / 2]),
        ("count_include_pad=False", [3 / 2, 9 / 3, 4 / 1]),
    ],
)
def test_avg_pool1d_ceil_mode_divisors_by_hand(tmp_path, backend_name, params, expected):
    model = op_model(tmp_path, AVG1D + params, backend=backend_name)
    np.testing.assert_allclose(run(model, [[[1, 2, 3, 4]]]), [[expected]], rtol=1e-6)


def test_avg_pool1d_floor_mode_drops_the_partial_window(tmp_path):
    model = op_model(tmp_path, AVG1D.replace("ceil_mode=True", "ceil_mode=False") + "count_include_pad=True")
    np.testing.assert_allclose(run(model, [[[1, 2, 3, 4]]]), [[[1.0, 3.0]]], rtol=1e-6)


def test_avg_pool2d_divisor_override_divides_every_window_by_it(tmp_path, backend_name):
    # ones(4, 4) with the windows above on both axes: real counts per axis (2, 3, 1), so the
    # sums are their outer product, all divided by 4.
    line = ("nn.AvgPool2d p 1 1 x y ceil_mode=True count_include_pad=True divisor_override=4 "
            "kernel_size=(3,3) padding=(1,1) stride=(2,2)")
    model = op_model(tmp_path, line, backend=backend_name)
    expected = np.outer([2, 3, 1], [2, 3, 1]) / 4
    np.testing.assert_allclose(run(model, np.ones((1, 1, 4, 4)))[0, 0], expected, rtol=1e-6)


def test_avg_pool2d_count_include_pad_false_averages_only_real_elements(tmp_path):
    # A constant input stays constant when padding is not counted, however the windows fall.
    line = ("F.avg_pool2d p 1 1 x y ceil_mode=True count_include_pad=False divisor_override=None "
            "kernel_size=(3,2) padding=(1,1) stride=(2,3) $input=x")
    model = op_model(tmp_path, line)
    got = run(model, np.full((2, 3, 5, 7), 2.5))
    assert got.shape == (2, 3, 3, 3)
    np.testing.assert_allclose(got, 2.5, rtol=1e-6)


def test_avg_pool_accepts_an_unbatched_input(tmp_path):
    model = op_model(tmp_path, AVG1D + "count_include_pad=False")
    np.testing.assert_allclose(run(model, [[1, 2, 3, 4]]), [[1.5, 3.0, 4.0]], rtol=1e-6)


def test_avg_pool_without_stride_uses_the_kernel(tmp_path):
    line = "F.avg_pool1d p 1 1 x y ceil_mode=False count_include_pad=True kernel_size=(2) padding=(0) stride=None"
    model = op_model(tmp_path, line)
    np.testing.assert_allclose(run(model, [[[1, 3, 5, 7, 9]]]), [[[2.0, 6.0]]])


def test_an_axis_of_kernel_one_keeps_its_values_and_the_result_is_a_fresh_array(tmp_path):
    """A window of one value along an axis (M5's global pool once the signal is one step long): that
    axis is left as it is; the other axis is still averaged, and the input is never returned itself."""
    model = op_model(tmp_path, "F.avg_pool2d p 1 1 x y ceil_mode=False count_include_pad=True kernel_size=(1,2) "
                     "padding=(0,0) stride=(1,2) $input=x")
    x = np.arange(12, dtype=np.float32).reshape(1, 1, 3, 4)
    np.testing.assert_array_equal(run(model, x), [[[[0.5, 2.5], [4.5, 6.5], [8.5, 10.5]]]])
    identity = op_model(tmp_path, "F.avg_pool1d q 1 1 x y ceil_mode=False count_include_pad=True kernel_size=(1) "
                        "padding=(0) stride=None $input=x")
    column = np.array([[[-1.5], [2.25]]], np.float32)
    got = identity(column)
    np.testing.assert_array_equal(got, column)
    assert got is not column and not np.shares_memory(got, column)


def test_avg_pool_input_smaller_than_the_kernel_is_a_shape_error(tmp_path):
    model = op_model(tmp_path, "nn.AvgPool1d p 1 1 x y kernel_size=(5) padding=(0) stride=(1)")
    with pytest.raises(ShapeError, match="too small"):
        model(np.zeros((1, 1, 3), np.float32))


# -- adaptive max pooling ----------------------------------------------------------

# x[r, c] = 4r + c on 3x4, output 2x2: row bins [0,2) [1,3), column bins [0,2) [2,4).
# The maximum of each bin is its bottom-right element, and its flat index equals its value.
ARANGE_3x4 = np.arange(12, dtype=np.float32).reshape(1, 1, 3, 4)


def test_adaptive_max_pool2d_by_hand(tmp_path, backend_name):
    model = op_model(tmp_path, "nn.AdaptiveMaxPool2d p 1 1 x y output_size=(2,2) return_indices=False",
                     backend=backend_name)
    np.testing.assert_array_equal(run(model, ARANGE_3x4), [[[[5, 7], [9, 11]]]])


def test_adaptive_max_pool2d_indices_by_hand(tmp_path, backend_name):
    line = "F.adaptive_max_pool2d p 1 2 x y i output_size=(2,2) return_indices=True $input=x"
    model = op_model(tmp_path, line, outputs=("y", "i"), backend=backend_name)
    values, indices = run(model, ARANGE_3x4)
    np.testing.assert_array_equal(values, [[[[5, 7], [9, 11]]]])
    np.testing.assert_array_equal(indices, [[[[5, 7], [9, 11]]]])
    assert indices.dtype == np.int64


def test_adaptive_max_pool2d_ties_pick_the_first_element_of_the_bin(tmp_path):
    # All equal: PyTorch keeps the first maximum in row-major order, i.e. each bin's top-left.
    line = "F.adaptive_max_pool2d p 1 2 x y i output_size=(2,2) return_indices=True $input=x"
    model = op_model(tmp_path, line, outputs=("y", "i"))
    _, indices = run(model, np.zeros((1, 1, 3, 4)))
    np.testing.assert_array_equal(indices, [[[[0, 2], [4, 6]]]])


def test_adaptive_max_pool_zero_output_size_keeps_that_dim(tmp_path):
    # pnnx writes output_size=(None, 2) as (0,2)
    model = op_model(tmp_path, "nn.AdaptiveMaxPool2d p 1 1 x y output_size=(0,2) return_indices=False")
    got = run(model, ARANGE_3x4)
    np.testing.assert_array_equal(got, [[[[1, 3], [5, 7], [9, 11]]]])


def test_adaptive_max_pool1d_unbatched_and_larger_output(tmp_path):
    # 3 -> 5: bins [0,1) [0,2) [1,2) [1,3) [2,3)
    model = op_model(tmp_path, "nn.AdaptiveMaxPool1d p 1 1 x y output_size=(5) return_indices=False")
    np.testing.assert_array_equal(run(model, [[3, 1, 2]]), [[3, 3, 1, 2, 2]])


def test_adaptive_avg_pool_zero_output_size_keeps_that_dim(tmp_path):
    model = op_model(tmp_path, "nn.AdaptiveAvgPool2d p 1 1 x y output_size=(1,0)")
    got = run(model, ARANGE_3x4)
    np.testing.assert_allclose(got, [[[[4, 5, 6, 7]]]])


@pytest.mark.parametrize("line, shape", [
    ("nn.AdaptiveAvgPool1d p 1 1 x y output_size=(1)", (2, 3, 1000)),
    ("nn.AdaptiveAvgPool2d p 1 1 x y output_size=(1,1)", (2, 5, 112, 112)),
    ("F.adaptive_avg_pool2d p 1 1 x y output_size=(1,1)", (7, 9, 3)),  # unbatched (C, H, W)
    ("nn.AdaptiveAvgPool3d p 1 1 x y output_size=(1,1,1)", (1, 4, 3, 5, 6)),
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_global_adaptive_avg_pool_is_the_float64_mean(tmp_path, line, shape, dtype):
    x = np.random.default_rng(0).normal(1.0, 1.0, shape).astype(dtype)  # offset: a sum that grows
    spatial = 1 if "1d" in line else 3 if "3d" in line else 2
    want = x.astype(np.float64).mean(axis=tuple(range(-spatial, 0)), keepdims=True)
    got = kuiper.to_numpy(op_model(tmp_path, line)(x))
    assert got.shape == want.shape and got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=2e-6 if dtype == np.float32 else 1e-13)


# -- build-time errors ------------------------------------------------------------


@pytest.mark.parametrize(
    "line, outputs, error, message",
    [
        ("nn.AvgPool2d p 1 1 x y kernel_size=(3,3) padding=(2,0) stride=(1,1)", ("y",),
         OperatorParamError, r"padding \(2, 0\) must be between 0 and half of kernel_size"),
        ("nn.AvgPool2d p 1 1 x y divisor_override=0 kernel_size=(3,3) padding=(0,0) stride=(1,1)", ("y",),
         OperatorParamError, r"'divisor_override' must be positive"),
        ("nn.AvgPool1d p 1 1 x y kernel_size=(0) padding=(0) stride=(1)", ("y",),
         OperatorParamError, r"must be positive"),
        ("nn.AdaptiveMaxPool2d p 1 2 x y i output_size=(2,2) return_indices=False", ("y", "i"),
         OperatorParamError, r"return_indices=False gives 1 output\(s\), the file declares 2"),
        ("nn.AdaptiveMaxPool2d p 1 1 x y output_size=(2,-1) return_indices=False", ("y",),
         OperatorParamError, r"'output_size' must be 2 positive integer"),
        ("nn.AdaptiveMaxPool2d p 1 1 x y output_size=(2,2,2) return_indices=False", ("y",),
         OperatorParamError, r"'output_size' must be 2 positive integer"),
        ("nn.MaxPool2d p 1 3 x y i j kernel_size=(2,2) return_indices=True", ("y", "i", "j"),
         OperatorParamError, r"return_indices=True gives 1 or 2 output\(s\), the file declares 3"),
    ],
)
def test_unsupported_or_invalid_params_fail_at_load_time(tmp_path, line, outputs, error, message):
    with pytest.raises(error, match=message) as info:
        op_model(tmp_path, line, outputs=outputs)
    assert "op 'p'" in str(info.value)


# -- the fixtures cover what they claim ----------------------------------------------


@pytest.mark.parametrize(
    "fixture, op_type, params",
    [
        ("avgpool2d_ceil_pad", "nn.AvgPool2d", {"ceil_mode": True, "count_include_pad": True, "padding": [1, 1]}),
        ("avgpool2d_exclude_pad", "nn.AvgPool2d", {"ceil_mode": True, "count_include_pad": False}),
        ("avgpool2d_divisor", "nn.AvgPool2d", {"divisor_override": 4}),
        ("f_avg_pool2d", "F.avg_pool2d", {"count_include_pad": False}),
        ("f_avg_pool1d_exclude_pad", "F.avg_pool1d", {"count_include_pad": False, "ceil_mode": True}),
        ("adaptive_maxpool2d_none", "nn.AdaptiveMaxPool2d", {"output_size": [0, 4]}),
        ("adaptive_avgpool2d_none", "nn.AdaptiveAvgPool2d", {"output_size": [4, 0]}),
        ("f_adaptive_max_pool2d", "F.adaptive_max_pool2d", {"return_indices": True}),
        ("f_adaptive_max_pool1d", "F.adaptive_max_pool1d", {"return_indices": True}),
    ],
)
def test_pooling_fixtures_contain_the_op_they_cover(fixture, op_type, params):
    ops = [op for op in pnnx_file_ops(MODELS / fixture / "model.pnnx.param") if op.type == op_type]
    assert len(ops) == 1
    for key, value in params.items():
        assert ops[0].params[key] == value


# -- average pooling with dilated taps and pads of any size (ONNX's AveragePool) ---------

def _avg_pool1d(x, **params):
    return run_op("AvgPool1d", [np.asarray(x, dtype=np.float64).reshape(1, 1, -1)], params).reshape(-1)


def test_avg_pool_dilation_spaces_the_taps():
    # kernel 2, dilation 2: windows {0, 2}, {1, 3}, {2, 4}, {3, 5}
    got = _avg_pool1d([1, 2, 3, 4, 5, 6], kernel_size=[2], stride=[1], dilation=[2])
    np.testing.assert_allclose(got, [2, 3, 4, 5])


@pytest.mark.parametrize(("include", "want"), [
    # pads [0, 2] add 2 windows: {4, 6} and {5, 7}, where 6 and 7 are padding
    (False, [2, 3, 4, 5, 5, 6]),
    (True, [2, 3, 4, 5, 2.5, 3]),
])
def test_avg_pool_uneven_pads_count_padding_as_told(include, want):
    got = _avg_pool1d([1, 2, 3, 4, 5, 6], kernel_size=[2], stride=[1], dilation=[2], pads=[[0, 2]],
                      count_include_pad=include)
    np.testing.assert_allclose(got, want)


def test_avg_pool_pads_past_half_a_window():
    # kernel 2, pads [3, 0]: windows [-3, -2) ... the first two hold padding only
    got = _avg_pool1d([1, 2, 3], kernel_size=[2], stride=[1], pads=[[3, 0]], count_include_pad=True)
    np.testing.assert_allclose(got, [0, 0, 0.5, 1.5, 2.5])
