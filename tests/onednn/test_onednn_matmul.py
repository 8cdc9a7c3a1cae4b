"""kuiper.onednn.MatMul: oneDNN's x @ W^T + b against float64 NumPy, with post-ops, row counts, threads."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kuiper import onednn
from kuiper.onednn.primitives import MAX_PLANS, ONE_THREAD_WORK

pytestmark = pytest.mark.skipif(not onednn.available(), reason=onednn.describe())

RNG = np.random.default_rng(7)
TOLERANCE = 1e-5  # float32 sums of at most a few hundred unit-scale products, relative to the output's scale


def case(rows, inputs, outputs, bias=True):
    x = RNG.standard_normal((rows, inputs)).astype(np.float32)
    weight = (RNG.standard_normal((outputs, inputs)) / math.sqrt(inputs)).astype(np.float32)
    b = RNG.standard_normal(outputs).astype(np.float32) if bias else None
    expected = x.astype(np.float64) @ weight.T.astype(np.float64)
    if b is not None:
        expected += b
    return x, weight, b, expected


def close(actual, expected):
    assert actual.dtype == np.float32 and actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=0, atol=TOLERANCE * max(1.0, np.abs(expected).max()))


@pytest.mark.parametrize("rows, inputs, outputs", [(1, 8, 3), (5, 17, 9), (197, 64, 96), (33, 300, 40)])
@pytest.mark.parametrize("bias", [True, False])
def test_the_product_is_x_times_the_transposed_weight_plus_bias(rows, inputs, outputs, bias):
    x, weight, b, expected = case(rows, inputs, outputs, bias)
    product = onednn.MatMul(onednn.library(), weight, b)
    close(product(x, threads=1), expected)


def test_the_weight_is_never_changed_and_is_packed_once_per_layout_a_kernel_reads():
    """The given weight is kept as it is (described to oneDNN as its transpose); where a plan's kernel reads
    another layout (ViT-Tiny's products: brgemm's packed one), the weight is reordered into it once, and plans
    whose kernels read the same layout share that copy."""
    x, weight, b, expected = case(197, 192, 576)
    kept = weight.copy()
    product = onednn.MatMul(onednn.library(), weight, b)
    assert np.shares_memory(product.weight_layouts.given[1], weight)
    close(product(x, threads=1), expected)
    np.testing.assert_array_equal(weight, kept)
    (packed,) = product.weight_layouts.kept
    assert packed[0] != product.weight_layouts.given_layout and packed[1].size >= weight.size
    other_rows = RNG.standard_normal((150, 192)).astype(np.float32)
    close(product(other_rows, threads=1), other_rows.astype(np.float64) @ weight.T.astype(np.float64) + b)
    assert all(plan[3] is packed for plan in product.plans.values())  # one packed copy, shared


def gelu(v):
    return 0.5 * v * (1 + np.vectorize(math.erf)(v / math.sqrt(2)))


@pytest.mark.parametrize("post_op, function", [
    (("eltwise_relu", 0.0, 0.0), lambda v: np.maximum(v, 0)),
    (("eltwise_gelu_erf", 0.0, 0.0), gelu),
])
def test_an_activation_post_op_applies_after_the_bias(post_op, function):
    x, weight, b, expected = case(12, 32, 20)
    product = onednn.MatMul(onednn.library(), weight, b, post_ops=(post_op,))
    close(product(x), function(expected))


def test_a_sum_post_op_adds_the_residual_and_leaves_it_alone():
    x, weight, b, expected = case(6, 24, 10)
    residual = RNG.standard_normal((6, 10)).astype(np.float32)
    kept = residual.copy()
    product = onednn.MatMul(onednn.library(), weight, b, post_ops=(("sum",), ("eltwise_relu", 0.0, 0.0)))
    close(product(x, residual=residual), np.maximum(expected + residual, 0))
    np.testing.assert_array_equal(residual, kept)
    with pytest.raises(onednn.OneDnnError, match="residual has shape"):
        product(x, residual=residual[:, :5])
    with pytest.raises(onednn.OneDnnError, match="only then"):
        product(x)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_multiply_post_op_multiplies_by_the_factor_after_the_activation(threads):
    x, weight, b, expected = case(70, 48, 64)
    factor = RNG.standard_normal((70, 64)).astype(np.float32)
    kept = factor.copy()
    product = onednn.MatMul(onednn.library(), weight, b, (("eltwise_relu", 0.0, 0.0), ("mul",)))
    close(product(x, threads, factor=factor), np.maximum(expected, 0) * factor)
    np.testing.assert_array_equal(factor, kept)


def test_a_multiply_post_op_wants_a_row_major_float32_factor_of_the_output_shape():
    x, weight, b, _ = case(6, 16, 10)
    product = onednn.MatMul(onednn.library(), weight, b, (("mul",),))
    factor = RNG.standard_normal((6, 10)).astype(np.float32)
    with pytest.raises(onednn.OneDnnError, match="factor is needed"):
        product(x)
    with pytest.raises(onednn.OneDnnError, match=r"shape \(6, 10\), found float32 \(10, 6\)"):
        product(x, factor=np.ascontiguousarray(factor.T))
    with pytest.raises(onednn.OneDnnError, match="row-major float32"):
        product(x, factor=factor.astype(np.float64))
    with pytest.raises(onednn.OneDnnError, match="factor is needed"):
        onednn.MatMul(onednn.library(), weight, b)(x, factor=factor)


def test_the_result_goes_into_a_buffer_given_for_it_and_only_a_fitting_one():
    x, weight, b, expected = case(9, 20, 12)
    product = onednn.MatMul(onednn.library(), weight, b)
    buffer = np.full((3, 9, 12), np.nan, np.float32)
    target = buffer[1]
    assert product(x, out=target) is target
    close(buffer[1], expected)
    assert np.isnan(buffer[0]).all() and np.isnan(buffer[2]).all()
    for wrong in (np.empty((9, 11), np.float32), np.empty((9, 12), np.float64), np.empty((12, 9), np.float32).T):
        with pytest.raises(onednn.OneDnnError, match="output buffer must be a row-major float32 array"):
            product(x, out=wrong)


def test_each_row_count_gets_its_own_plan_and_old_ones_go():
    _, weight, b, _ = case(1, 16, 8)
    product = onednn.MatMul(onednn.library(), weight, b)
    for rows in range(1, MAX_PLANS + 3):
        x = RNG.standard_normal((rows, 16)).astype(np.float32)
        close(product(x, threads=1), x.astype(np.float64) @ weight.T.astype(np.float64) + b)
    assert len(product.plans) == MAX_PLANS


def test_a_small_product_runs_on_one_thread_a_large_one_on_the_threads_asked():
    _, weight, b, _ = case(1, 64, 64)
    product = onednn.MatMul(onednn.library(), weight, b)
    small = RNG.standard_normal((2, 64)).astype(np.float32)  # 8 K multiply-adds
    large = RNG.standard_normal((ONE_THREAD_WORK // (64 * 64) + 1, 64)).astype(np.float32)
    for x in (small, large):
        close(product(x, threads=2), x.astype(np.float64) @ weight.T.astype(np.float64) + b)
    assert (2, 1, False) in product.plans and (2, 2, False) not in product.plans  # (rows, threads, column-major)
    assert (large.shape[0], 2, False) in product.plans


def test_an_input_of_the_wrong_width_is_refused_with_the_shapes():
    _, weight, b, _ = case(1, 16, 8)
    product = onednn.MatMul(onednn.library(), weight, b)
    with pytest.raises(onednn.OneDnnError, match=r"\(3, 15\).*\(rows, 16\)"):
        product(np.zeros((3, 15), np.float32))


@pytest.mark.parametrize("rows, inputs, outputs", [(196, 64, 32), (7, 33, 5)])
@pytest.mark.parametrize("threads", [1, 2])
def test_column_major_rows_are_read_where_they_lie(rows, inputs, outputs, threads, monkeypatch):
    """Rows that are the transpose of a row-major array (a conv's NCHW output seen as tokens) go to oneDNN
    as they lie, with no row-major copy first, and give what the copy gives, to the bit."""
    x, weight, b, expected = case(rows, inputs, outputs)
    columns = np.ascontiguousarray(x.T)  # (inputs, rows), row-major
    rows_view = columns.T
    assert not rows_view.flags.c_contiguous
    product = onednn.MatMul(onednn.library(), weight, b, (("eltwise_relu", 0.0, 0.0),))
    want = product(np.ascontiguousarray(rows_view), threads=threads)
    copies = []
    contiguous = np.ascontiguousarray
    monkeypatch.setattr(np, "ascontiguousarray", lambda a, *args, **kw: copies.append(a.shape) or contiguous(a, *args, **kw))
    got = product(rows_view, threads=threads)
    assert copies == []
    np.testing.assert_array_equal(got, want)
    close(got, np.maximum(expected, 0.0))
    assert "ref" not in product.plan(rows, product.library.threads(threads) if rows * inputs * outputs >= ONE_THREAD_WORK
                                     else 1, column_major=True)[0].implementation()
