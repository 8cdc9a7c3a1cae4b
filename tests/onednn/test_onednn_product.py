"""kuiper.onednn.Product: oneDNN's a @ b of two run-time arrays against float64 NumPy, whatever their
strides and batch broadcasting, and the operands it refuses."""

from __future__ import annotations

import numpy as np
import pytest

from kuiper import onednn
from kuiper.onednn.product import GEMM_MAX_ROWS, RELU, element_strides, product_shape

pytestmark = pytest.mark.skipif(not onednn.available(), reason=onednn.describe())

RNG = np.random.default_rng(11)
TOLERANCE = 1e-5  # float32 sums of at most a few hundred unit-scale products, relative to the output's scale


def array(*shape):
    return (RNG.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)


def check(a, b, threads=None):
    got = onednn.Product(onednn.library())(a, b, threads)
    expected = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert got.dtype == np.float32 and got.shape == expected.shape and got.flags.c_contiguous
    np.testing.assert_allclose(got, expected, rtol=0, atol=TOLERANCE * max(1.0, np.abs(expected).max()))


@pytest.mark.parametrize("a_shape, b_shape", [
    ((1, 1), (1, 1)),
    ((5, 17), (17, 9)),
    ((197, 192), (192, 96)),
    ((3, 20, 16), (3, 16, 20)),  # a batch of heads
    ((2, 3, 7, 8), (2, 3, 8, 5)),
])
@pytest.mark.parametrize("threads", [1, 2])
def test_the_product_is_numpys_matmul(a_shape, b_shape, threads):
    check(array(*a_shape), array(*b_shape), threads)


@pytest.mark.parametrize("a_shape, b_shape", [((1, 6, 8), (4, 8, 3)), ((4, 6, 8), (1, 8, 3)), ((2, 1, 5, 8), (1, 3, 8, 4))])
def test_batch_dims_of_one_broadcast_on_either_side(a_shape, b_shape):
    check(array(*a_shape), array(*b_shape))


def test_transposed_and_sliced_views_are_read_where_they_lie():
    projection = array(40, 3 * 16)
    keys = array(40, 16)
    check(projection[:, 16:32], keys.T)  # a column block of a projection, by a transposed matrix
    heads = array(2, 40, 3, 16).transpose(0, 2, 1, 3)  # (batch, heads, tokens, width) over a (.., tokens, heads, width) array
    check(heads, array(2, 3, 16, 40))


def test_a_dim_of_one_may_have_any_stride():
    a = array(9, 8)[3:4]  # one row of a larger array: NumPy keeps the row stride on a dim of size 1
    b = array(8, 5)[None]  # a new axis: stride 0
    assert element_strides(b)[0] == 40  # the extent of the dims inside it
    check(a[None], b)


@pytest.mark.parametrize("a, b, why", [
    (np.ones((4, 6), np.float64), np.ones((6, 2), np.float32), "float64"),
    (np.ones((4, 6), np.float32), np.ones((5, 2), np.float32), "inner dims differ"),
    (np.ones((2, 4, 6), np.float32), np.ones((3, 6, 2), np.float32), "batch dims 2 and 3"),
    (np.broadcast_to(np.ones((1, 6), np.float32), (4, 6)), np.ones((6, 2), np.float32), "a broadcast view"),
    (np.ones((4, 0), np.float32), np.ones((0, 2), np.float32), "empty"),
])
def test_operands_oneDNN_does_not_take_as_they_lie_are_refused(a, b, why):
    with pytest.raises(onednn.OneDnnError):
        onednn.Product(onednn.library())(a, b)


def test_a_layout_with_only_a_reference_loop_is_refused_and_stays_refused():
    product = onednn.Product(onednn.library())
    every_other_column = array(64, 400)[:, ::2]  # neither inner stride is 1
    for _ in range(2):
        with pytest.raises(onednn.OneDnnError, match="reference loop"):
            product(every_other_column, array(200, 8))
    assert len(product.plans.refused) == 1 and not product.plans


def test_the_product_shape_broadcasts_batch_dims_like_numpy():
    assert product_shape(np.ones((2, 1, 3, 4)), np.ones((1, 5, 4, 6))) == (2, 5, 3, 6)
    assert product_shape(np.ones((3, 4)), np.ones((2, 4, 6))) is None  # ranks differ: the caller pads


def _product_and_path(a, b, threads=1, bias=None, post_ops=()):
    product = onednn.Product(onednn.library())
    return product(a, b, threads, bias, post_ops), "gemm" if product.ran_gemm else "matmul" if product.plans else None


@pytest.mark.parametrize("rows, path", [(1, "gemm"), (8, "gemm"), (GEMM_MAX_ROWS, "gemm"),
                                        (GEMM_MAX_ROWS + 1, "matmul")])
@pytest.mark.parametrize("threads", [1, 2])
def test_few_rows_take_onednns_gemm_with_the_bias_and_relu_after_it(rows, path, threads):
    """Up to GEMM_MAX_ROWS rows, dnnl_sgemm computes the product; the bias is added and the ReLU applied to its
    result, for row-major operands and transposed views alike."""
    a, b, bias = array(rows, 96), array(96, 40), array(40)
    for left, right in ((a, b), (np.asfortranarray(a), b), (a, np.asfortranarray(b)), (a, array(40, 96).T)):
        want = np.maximum(left.astype(np.float64) @ right.astype(np.float64) + bias, 0)
        got, ran = _product_and_path(left, right, threads, bias, (RELU,))
        assert ran == path
        np.testing.assert_allclose(got, want, rtol=0, atol=TOLERANCE * max(1.0, np.abs(want).max()))
    plain, _ = _product_and_path(a, b, threads)  # the bias added after the product: the same float32 sums
    np.testing.assert_array_equal(_product_and_path(a, b, threads, bias)[0], plain + bias)


@pytest.mark.parametrize("special", [np.nan, np.inf, -np.inf])
def test_the_gemm_spreads_nan_and_infinities_as_float64_does(special):
    a, b = array(6, 50), array(50, 30)
    a[2, 7] = special
    b[9, 4] = special
    a[4] = 0.0  # 0 * inf is NaN
    with np.errstate(invalid="ignore"):
        expected = a.astype(np.float64) @ b.astype(np.float64)
    got, ran = _product_and_path(a, b)
    assert ran == "gemm"
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(expected))
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(expected))
