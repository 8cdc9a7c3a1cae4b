"""Issue-18 ops beyond their PyTorch fixtures: hand-computed values, edge cases and errors.

The fixtures (tools/fixture_models/ops_rest.py, checked by tests/test_models.py) compare each
op with PyTorch; these tests pin the cases a fixture cannot reach (poles, bad params, bad
dtypes) against math or hand-written values.
"""

import math

import numpy as np
import pytest
from conftest import op_model

from kuiper.errors import InputError, KuiperError, OperatorParamError


def test_bitwise_ops_reject_float_operands(tmp_path):
    model = op_model(tmp_path, "torch.bitwise_and a 2 1 x z y $input=x $other=z", inputs=("x", "z"))
    x = np.ones((2, 3), np.float32)
    with pytest.raises(InputError, match="bool or integer"):
        model(x, x)


@pytest.mark.parametrize(
    "dtype, x, shift",
    [("int8", [5, -7, 1], [8, 11, -1]), ("int32", [5, -7, 1], [32, 40, -3]), ("int64", [5, -7, 1], [64, 99, -1]),
     ("uint8", [5, 250, 1], [8, 200, 9])],
)
def test_shifts_outside_the_bit_width_give_zero_or_the_sign_fill(tmp_path, dtype, x, shift):
    # PyTorch's CPU kernels: a shift < 0 or >= the bit width gives 0 (left) or x >> (bits - 1) (right).
    x, shift = np.array([x], dtype), np.array([shift], dtype)
    left = op_model(tmp_path, "torch.bitwise_left_shift a 2 1 x s y $input=x $other=s", inputs=("x", "s"))
    right = op_model(tmp_path, "torch.bitwise_right_shift a 2 1 x s y $input=x $other=s", inputs=("x", "s"))
    np.testing.assert_array_equal(left(x, shift), np.zeros_like(x))
    np.testing.assert_array_equal(right(x, shift), np.where(x.astype(np.int64) < 0, -1, 0).astype(dtype))


def test_lgamma_matches_math_lgamma_and_is_inf_at_poles(tmp_path):
    model = op_model(tmp_path, "torch.lgamma g 1 1 x y $input=x")
    x = np.array([-3.0, -2.5, -1.0, -0.5, 0.0, 1e-3, 0.5, 1.0, 2.0, 3.7, 30.0, 1e6], np.float32)
    got = np.asarray(model(x))
    want = np.array([math.inf if v <= 0 and v == int(v) else math.lgamma(float(v)) for v in x], np.float64)
    assert np.isinf(got[[0, 2, 4]]).all()
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=2e-7, atol=1e-6)


def test_topk_with_k_beyond_the_dim_is_a_clear_error(tmp_path):
    model = op_model(tmp_path, "torch.topk t 1 2 x v i dim=1 k=5 largest=True sorted=True $input=x", outputs=("v", "i"))
    with pytest.raises(KuiperError, match="k=5 is larger"):
        model(np.zeros((2, 3), np.float32))


def test_topk_keeps_equal_values_in_order_of_appearance(tmp_path):
    model = op_model(tmp_path, "torch.topk t 1 2 x v i dim=-1 k=3 largest=True sorted=True $input=x", outputs=("v", "i"))
    _, indices = model(np.array([[1.0, 2.0, 2.0, 0.0, 2.0]], np.float32))
    np.testing.assert_array_equal(indices, [[1, 2, 4]])
    assert indices.dtype == np.int64


def test_scatter_add_rejects_indices_outside_the_dim(tmp_path):
    model = op_model(tmp_path, "torch.scatter_add s 3 1 x i u y dim=1 $input=x $index=i $src=u", inputs=("x", "i", "u"))
    x = np.zeros((1, 3), np.float32)
    with pytest.raises(KuiperError, match=r"\[0, 3\)"):
        model(x, np.array([[3]], np.int64), x)


def test_slice_scatter_rejects_a_non_positive_step(tmp_path):
    with pytest.raises(OperatorParamError, match="'step' must be positive"):
        op_model(tmp_path, "torch.slice_scatter s 2 1 x u y dim=0 start=0 end=2 step=0 $input=x $src=u", inputs=("x", "u"))


def _graph(tmp_path, inputs, lines, outputs, name):
    from conftest import write_model

    import kuiper

    body = [f"pnnx.Input in{i} 0 1 {n}" for i, n in enumerate(inputs)] + lines
    body += [f"pnnx.Output out{i} 1 0 {n}" for i, n in enumerate(outputs)]
    operands = {token for line in body for token in line.split()[4:] if "=" not in token}
    text = f"7767517\n{len(body)} {len(operands)}\n" + "\n".join(body) + "\n"
    return kuiper.load(write_model(tmp_path, text, name=name))


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_with_an_index_tensor_on_dim_1(tmp_path, accumulate):
    # x[:, rows] = 1.0 (or +=): pnnx writes the index list as the expression [None,@0].
    model = _graph(tmp_path, ["x", "rows"], [
        "pnnx.Expression e 1 1 rows l expr=[None,@0]",
        f"Tensor.index_put p 2 1 x l y accumulate={accumulate} values=1.5 $input=x $indices=l",
    ], ["y"], name=f"ip{accumulate}")
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    rows = np.array([0, 2, 0], np.int64)
    want = x.copy()
    if accumulate:
        np.add.at(want, (slice(None), rows), 1.5)
    else:
        want[:, rows] = 1.5
    np.testing.assert_array_equal(model(x, rows), want)
    np.testing.assert_array_equal(x, np.arange(24, dtype=np.float32).reshape(2, 3, 4))  # input untouched


def test_fill_and_masked_fill_take_the_value_from_an_input(tmp_path):
    model = _graph(tmp_path, ["x", "v"], [
        "Tensor.fill f 2 1 x v a $input=x $value=v",
        "torch.gt g 1 1 x m other=0.0 $input=x",
        "Tensor.masked_fill k 3 1 x m v b $input=x $mask=m $value=v",
    ], ["a", "b"], name="fills")
    x = np.array([[-1.0, 2.0, 0.5]], np.float32)
    filled, masked = model(x, np.array(7.0, np.float32))
    np.testing.assert_array_equal(filled, np.full_like(x, 7.0))
    np.testing.assert_array_equal(masked, [[-1.0, 7.0, 7.0]])


@pytest.mark.parametrize(
    "line, inputs, message",
    [
        ("F.grid_sample g 2 1 x z y align_corners=False mode=area padding_mode=zeros $input=x $grid=z", ("x", "z"),
         r"mode='area' is not supported \(supported: 'bilinear', 'nearest', 'bicubic'\)"),
        ("torch.fft.fft f 1 1 x y dim=-1 n=None norm=unitary $input=x", ("x",),
         r"norm='unitary' is not supported"),
        ("torch.fft.fft2 f 1 1 x y dim=(-2,-1) norm=None s=(4,4,4) $input=x", ("x",),
         r"'s' \[4, 4, 4\] and 'dim' \[-2, -1\] differ in length"),
        ("torch.istft i 1 1 x y center=True n_fft=8 onesided=True return_complex=True $input=x", ("x",),
         r"return_complex=True needs a two-sided spectrum"),
        ("nn.RReLU r 1 1 x y lower=0.5 upper=0.1", ("x",), r"'lower' \(0.5\) must not exceed 'upper'"),
        ("F.unfold u 1 1 x y dilation=(1,1) kernel_size=(0,2) padding=(0,0) stride=(1,1) $input=x", ("x",),
         r"must be positive"),
    ],
)
def test_unsupported_params_fail_at_load_time_naming_op_and_param(tmp_path, line, inputs, message):
    with pytest.raises(KuiperError, match=message) as info:
        op_model(tmp_path, line, inputs=inputs)
    assert f"op '{line.split()[1]}'" in str(info.value)


def test_fold_of_unfold_counts_each_pixel_once_per_window(tmp_path):
    # fold is unfold's adjoint: fold(unfold(ones)) is how many windows cover each pixel.
    unfold = op_model(tmp_path, "nn.Unfold u 1 1 x y dilation=(1,1) kernel_size=(2,2) padding=(0,0) stride=(1,1)")
    fold = op_model(tmp_path, "nn.Fold f 1 1 x y dilation=(1,1) kernel_size=(2,2) output_size=(3,3) padding=(0,0) "
                              "stride=(1,1)")
    covered = np.asarray(fold(unfold(np.ones((1, 1, 3, 3), np.float32))))
    np.testing.assert_array_equal(covered[0, 0], [[1, 2, 1], [2, 4, 2], [1, 2, 1]])
