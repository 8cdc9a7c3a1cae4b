"""Convolution ops (kuiper/ops/conv.py): hand-computed values, properties, and build-time errors.

The comparison with PyTorch comes from the fixtures in tests/end_to_end/test_models.py; this file
checks what a fixture cannot: exact small cases worked out by hand, the adjoint
relation between Conv and ConvTranspose, and that unsupported params fail at load time.
"""


import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kuiper
from kuiper.errors import OperatorParamError, ShapeError, UnsupportedOperatorError

from conftest import MODELS, op_model, pnnx_file_ops


def run(model, *arrays):
    return kuiper.to_numpy(model(*[np.asarray(a, dtype=np.float32) for a in arrays]))


# -- transposed convolution by hand ------------------------------------------------

# x = [1, 2], w = [1, 10, 100], stride 2: x0 writes [1, 10, 100] at 0..2 and x1 writes
# [2, 20, 200] at 2..4, overlapping at position 2: [1, 10, 102, 20, 200].
CONVT1D_X = [[[1.0, 2.0]]]
CONVT1D_W = np.array([[[1.0, 10.0, 100.0]]])


@pytest.mark.parametrize(
    "params, expected",
    [
        ("padding=(0) output_padding=(0)", [1, 10, 102, 20, 200]),
        ("padding=(1) output_padding=(0)", [10, 102, 20]),  # one cropped from each end
        ("padding=(1) output_padding=(1)", [10, 102, 20, 200]),  # one more on the right
        ("padding=(2) output_padding=(0)", [102]),
    ],
)
def test_conv_transpose1d_by_hand(tmp_path, backend_name, params, expected):
    line = f"nn.ConvTranspose1d ct 1 1 x y bias=False dilation=(1) groups=1 kernel_size=(3) stride=(2) {params}"
    model = op_model(tmp_path, line, weights={"weight": CONVT1D_W}, backend=backend_name)
    np.testing.assert_allclose(run(model, CONVT1D_X), [[expected]])


def test_conv_transpose1d_dilation_and_bias_by_hand(tmp_path):
    # dilation 2 spreads the taps to 0, 2, 4; stride 1 overlaps x0 and x1 shifted by one.
    line = "nn.ConvTranspose1d ct 1 1 x y bias=True dilation=(2) groups=1 kernel_size=(3) output_padding=(0) " \
           "padding=(0) stride=(1)"
    model = op_model(tmp_path, line, weights={"weight": CONVT1D_W, "bias": [0.5]})
    got = run(model, CONVT1D_X)
    np.testing.assert_allclose(got, [[[1.5, 2.5, 10.5, 20.5, 100.5, 200.5]]])


def test_conv_transpose_padding_beyond_the_kernel_leaves_bias_between_windows(tmp_path):
    # kernel 1, stride 3: the inputs land 3 apart with zeros (then bias) in between; padding 1 crops
    line = "nn.ConvTranspose1d ct 1 1 x y bias=True dilation=(1) groups=1 kernel_size=(1) output_padding=(0) " \
           "padding=(1) stride=(3)"
    model = op_model(tmp_path, line, weights={"weight": [[[2.0]]], "bias": [1.0]})
    # uncropped: [2, 0, 0, 4, 0, 0, 6] + 1; cropped by one each side
    np.testing.assert_allclose(run(model, [[[1.0, 2.0, 3.0]]]), [[[1, 1, 5, 1, 1]]])


def test_conv_transpose2d_groups_keep_channels_apart(tmp_path, backend_name):
    # 1x1 kernel, 2 groups of one channel: output channel g only sees input channel g.
    line = "nn.ConvTranspose2d ct 1 1 x y bias=False dilation=(1,1) groups=2 kernel_size=(1,1) " \
           "output_padding=(0,0) padding=(0,0) stride=(1,1)"
    model = op_model(tmp_path, line, weights={"weight": np.array([2.0, 3.0]).reshape(2, 1, 1, 1)},
                     backend=backend_name)
    x = np.arange(8, dtype=np.float32).reshape(1, 2, 2, 2)
    got = run(model, x)
    np.testing.assert_allclose(got[0, 0], 2 * x[0, 0])
    np.testing.assert_allclose(got[0, 1], 3 * x[0, 1])


# -- Conv and ConvTranspose are adjoint ----------------------------------------------


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    spatial=st.sampled_from([1, 2]),
    groups=st.sampled_from([1, 2]),
    kernel=st.integers(1, 3),
    stride=st.integers(1, 3),
    dilation=st.integers(1, 2),
    padding=st.integers(0, 2),
    size=st.integers(3, 7),
    seed=st.integers(0, 2**16),
)
def test_conv_transpose_is_the_adjoint_of_conv(
    tmp_path, spatial, groups, kernel, stride, dilation, padding, size, seed
):
    """<conv(x), y> == <x, conv_transpose(y)> for the same weight: the defining property of ConvTranspose."""
    span = dilation * (kernel - 1) + 1
    if size + 2 * padding < span:
        return
    out = (size + 2 * padding - span) // stride + 1
    output_padding = size - ((out - 1) * stride - 2 * padding + span)  # makes conv_transpose(y) the size of x
    rng = np.random.default_rng(seed)
    cin, cout = 2 * groups, 3 * groups
    weight = rng.standard_normal((cout, cin // groups) + (kernel,) * spatial).astype(np.float32)
    x = rng.standard_normal((2, cin) + (size,) * spatial).astype(np.float32)
    y = rng.standard_normal((2, cout) + (out,) * spatial).astype(np.float32)

    def ints(v):
        return "(" + ",".join([str(v)] * spatial) + ")"

    common = f"dilation={ints(dilation)} groups={groups} padding={ints(padding)} stride={ints(stride)}"
    conv = op_model(tmp_path, f"nn.Conv{spatial}d c 1 1 x y bias=False {common}", weights={"weight": weight})
    convt = op_model(
        tmp_path,
        f"nn.ConvTranspose{spatial}d c 1 1 x y bias=False {common} output_padding={ints(output_padding)}",
        # the same array: read as (in, out/groups, *k), the conv's out channels are the transpose's in
        weights={"weight": weight},
    )
    forward = run(conv, x)
    backward = run(convt, y)
    assert forward.shape == y.shape and backward.shape == x.shape
    left = float(np.sum(forward.astype(np.float64) * y))
    right = float(np.sum(x.astype(np.float64) * backward))
    assert abs(left - right) <= 1e-4 * max(1.0, abs(left))  # float32 sums of ~100 terms, relative


# -- F.conv* with the weight as an input -----------------------------------------


def test_f_conv2d_with_weight_and_bias_inputs_equals_nn_conv2d(tmp_path, backend_name):
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((4, 1, 3, 2)).astype(np.float32)
    bias = rng.standard_normal(4).astype(np.float32)
    x = rng.standard_normal((2, 2, 6, 5)).astype(np.float32)
    params = "dilation=(1,2) groups=2 padding=same stride=(1,1)"
    functional = op_model(tmp_path, f"F.conv2d c 3 1 x w b y {params} $input=x $weight=w $bias=b",
                          inputs=("x", "w", "b"), backend=backend_name)
    module = op_model(tmp_path, f"nn.Conv2d c 1 1 x y bias=True {params}",
                      weights={"weight": weight, "bias": bias}, backend=backend_name)
    np.testing.assert_allclose(run(functional, x, weight, bias), run(module, x), atol=1e-5)


def test_f_conv1d_keys_may_come_in_any_order(tmp_path):
    # inputs are positional in the op line's order; $keys say which is which
    line = "F.conv1d c 2 1 w x y bias=None dilation=(1) groups=1 padding=(0) stride=(1) $weight=w $input=x"
    model = op_model(tmp_path, line, inputs=("w", "x"))
    got = run(model, [[[1.0, -1.0]]], [[[1.0, 2.0, 4.0]]])
    np.testing.assert_allclose(got, [[[-1.0, -2.0]]])


def test_f_conv2d_weight_input_with_wrong_channels_is_a_shape_error(tmp_path):
    line = "F.conv2d c 2 1 x w y bias=None dilation=(1,1) groups=1 padding=(0,0) stride=(1,1) $input=x $weight=w"
    model = op_model(tmp_path, line, inputs=("x", "w"))
    with pytest.raises(ShapeError, match=r"expected input \(\[N,\] 3"):
        model(np.zeros((1, 2, 4, 4), np.float32), np.zeros((1, 3, 1, 1), np.float32))


@pytest.mark.parametrize("op_type", ["nn.Conv1d", "nn.ConvTranspose1d"])
def test_unbatched_input_equals_a_batch_of_one(tmp_path, op_type):
    line = f"{op_type} c 1 1 x y bias=True dilation=(1) groups=1 output_padding=(0) padding=(1) stride=(2)"
    model = op_model(tmp_path, line, weights={"weight": np.arange(12.0).reshape(2, 2, 3), "bias": [1.0, -1.0]})
    x = np.arange(10, dtype=np.float32).reshape(2, 5)
    np.testing.assert_array_equal(run(model, x), run(model, x[None])[0])


def test_kernel_larger_than_the_padded_input_is_a_shape_error(tmp_path):
    line = "nn.Conv1d c 1 1 x y bias=False dilation=(1) groups=1 padding=(0) stride=(1)"
    model = op_model(tmp_path, line, weights={"weight": np.ones((1, 1, 5))})
    with pytest.raises(ShapeError, match="kernel span"):
        model(np.zeros((1, 1, 3), np.float32))


# -- build-time errors ------------------------------------------------------------

CONVT = "nn.ConvTranspose2d ct 1 1 x y bias=False dilation=(1,1) groups=1 kernel_size=(3,3) stride=(2,2) "


@pytest.mark.parametrize(
    "line, weight_shape, error, message",
    [
        (CONVT + "padding=(0,0) output_padding=(0,0) padding_mode=reflect", (2, 2, 3, 3),
         UnsupportedOperatorError, r"padding_mode='reflect' is not supported \(supported: 'zeros'\)"),
        (CONVT + "padding=(0,0) output_padding=(2,0)", (2, 2, 3, 3),
         OperatorParamError, r"output_padding.*must be smaller than stride"),
        (CONVT + "padding=(-1,0) output_padding=(0,0)", (2, 2, 3, 3),
         OperatorParamError, r"'padding' must be non-negative"),
        (CONVT.replace("groups=1", "groups=2") + "padding=(0,0) output_padding=(0,0)", (3, 2, 3, 3),
         OperatorParamError, r"groups=2 does not divide in_channels=3"),
        (CONVT + "padding=(0,0) output_padding=(0,0)", (2, 2, 3),
         OperatorParamError, r"weight must have rank 4"),
        ("nn.Conv2d c 1 1 x y bias=False dilation=(1,1) groups=1 padding=same stride=(2,2)", (2, 2, 3, 3),
         UnsupportedOperatorError, r"padding='same'"),
        ("nn.Conv2d c 1 1 x y bias=False dilation=(1,1) groups=3 padding=(0,0) stride=(1,1)", (4, 1, 3, 3),
         OperatorParamError, r"groups=3 does not divide out_channels=4"),
        ("nn.Conv2d c 1 1 x y bias=False dilation=(0,1) groups=1 padding=(0,0) stride=(1,1)", (4, 1, 3, 3),
         OperatorParamError, r"'dilation' must be positive"),
        ("nn.Conv2d c 1 1 x y bias=False dilation=(1,1) groups=1 padding=(0,0) padding_mode=mirror stride=(1,1)",
         (4, 1, 3, 3), UnsupportedOperatorError, r"padding_mode='mirror'"),
    ],
)
def test_unsupported_or_invalid_params_fail_at_load_time(tmp_path, line, weight_shape, error, message):
    with pytest.raises(error, match=message) as info:
        op_model(tmp_path, line, weights={"weight": np.zeros(weight_shape)})
    assert "op 'c" in str(info.value)  # names the op


def test_f_conv2d_bias_true_without_a_bias_input_fails_at_load_time(tmp_path):
    line = "F.conv2d c 2 1 x w y bias=True dilation=(1,1) groups=1 padding=(0,0) stride=(1,1) $input=x $weight=w"
    with pytest.raises(UnsupportedOperatorError, match=r"bias=True is not supported"):
        op_model(tmp_path, line, inputs=("x", "w"))


def test_f_conv2d_without_a_weight_input_fails_at_load_time(tmp_path):
    line = "F.conv2d c 2 1 x b y dilation=(1,1) groups=1 padding=(0,0) stride=(1,1) $input=x $bias=b"
    with pytest.raises(OperatorParamError, match=r"needs a weight"):
        op_model(tmp_path, line, inputs=("x", "b"))


# -- the fixtures cover what they claim ----------------------------------------------


@pytest.mark.parametrize(
    "fixture, op_type, keys",
    [
        ("f_conv2d_weight_input", "F.conv2d", ["input", "weight", "bias"]),
        ("f_conv1d_weight_expr", "F.conv1d", ["input", "weight", "bias"]),
        ("f_conv_transpose2d_weight_expr", "F.conv_transpose2d", ["input", "weight"]),
        ("f_conv_transpose1d_weight_expr", "F.conv_transpose1d", ["input", "weight", "bias"]),
        ("convtranspose1d_groups", "nn.ConvTranspose1d", [None]),
        ("convtranspose2d_groups_dil", "nn.ConvTranspose2d", [None]),
        ("convtranspose3d", "nn.ConvTranspose3d", [None]),
        ("conv1d_groups_dil_nobias", "nn.Conv1d", [None]),
    ],
)
def test_conv_fixtures_contain_the_op_they_cover(fixture, op_type, keys):
    ops = [op for op in pnnx_file_ops(MODELS / fixture / "model.pnnx.param") if op.type == op_type]
    assert len(ops) == 1
    assert ops[0].input_keys == keys
