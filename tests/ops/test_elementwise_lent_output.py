"""ElementwiseOp writes into an input buffer the graph lent only when it fits the result (issue 27).

The buffers here are ``wide``: their values repeated along the last dim up to LEND_MIN_BYTES,
since smaller ones are never reused (a fresh array costs less than the checks).
"""

from __future__ import annotations

import numpy as np

from kuiper.backends import get_backend
from kuiper.model_ir import OpNode
from kuiper.ops.elementwise import LEND_MIN_BYTES, ElementwiseMath, ElementwiseOp
from kuiper.ir import make


class AddOp(ElementwiseOp):
    types = ("Test.add",)

    @classmethod
    def elementwise(cls, node):
        return ElementwiseMath(make.add, 2)


def add_op(donated):
    op = AddOp(OpNode("Test.add", "add", ["a", "b"], ["c"]), get_backend("numpy"))
    op.donated_inputs = frozenset(donated)
    return op


def wide(values, dtype=np.float32):
    """``values`` repeated along the last dim until the array holds LEND_MIN_BYTES."""
    array = np.asarray(values, dtype=dtype)
    repeats = -(-LEND_MIN_BYTES // array.nbytes)
    return np.ascontiguousarray(np.tile(array, (1,) * (array.ndim - 1) + (repeats,)))


def test_a_lent_buffer_of_the_result_shape_and_dtype_receives_the_result():
    a, b = wide([[1.0, 2.0]]), wide([[0.5, -4.0]])
    assert b.nbytes >= LEND_MIN_BYTES
    result = add_op([1]).forward(a, b)
    assert result is b
    np.testing.assert_array_equal(result, wide([[1.5, -2.0]]))


def test_a_small_lent_buffer_is_not_reused():
    a, b = np.float32([[1.0, 2.0]]), np.float32([[0.5, -4.0]])
    result = add_op([1]).forward(a, b)
    assert result is not b
    np.testing.assert_array_equal(b, np.float32([[0.5, -4.0]]))
    np.testing.assert_array_equal(result, np.float32([[1.5, -2.0]]))


def test_a_lent_buffer_smaller_than_the_broadcast_result_is_left_alone():
    a = np.float32([[1.0], [2.0]])  # (2, 1) + (1, 2n) -> (2, 2n)
    b = wide([[10.0, 20.0]])
    kept = b.copy()
    result = add_op([1]).forward(a, b)
    assert result is not b and result.shape == (2, b.shape[1])
    np.testing.assert_array_equal(b, kept)
    np.testing.assert_array_equal(result, np.concatenate([wide([[11.0, 21.0]]), wide([[12.0, 22.0]])]))


def test_a_lent_buffer_of_another_dtype_is_left_alone():
    counts, scale = wide([1, 2], np.int32), wide([0.5, 0.25])  # int32 + float32 -> float32
    result = add_op([0]).forward(counts, scale)
    assert result is not counts and result.dtype == np.float32
    np.testing.assert_array_equal(counts, wide([1, 2], np.int32))
    np.testing.assert_array_equal(result, wide([1.5, 2.25]))


def test_a_read_only_lent_buffer_is_left_alone():
    a, b = wide([1.0, 2.0]), wide([3.0, 4.0])
    b.flags.writeable = False
    result = add_op([1]).forward(a, b)
    assert result is not b
    np.testing.assert_array_equal(result, wide([4.0, 6.0]))


def test_without_a_lent_buffer_the_result_is_fresh():
    a, b = wide([1.0]), wide([2.0])
    result = add_op([]).forward(a, b)
    assert result is not a and result is not b
    np.testing.assert_array_equal(result, wide([3.0]))


# -- the specialized forward (ElementwiseOp.specialized) lends as forward does ----------------------------


def _specialized(op, *inputs):
    direct = op.specialized(list(inputs))
    assert direct is not None
    return direct


def test_the_specialized_forward_writes_into_the_lent_buffer():
    a, b = wide([[1.0, 2.0]]), wide([[0.5, -4.0]])
    op = add_op([1])
    forwarded = []
    op.forward = lambda *xs: forwarded.append(xs) or AddOp.forward(op, *xs)
    direct = _specialized(op, a, b)
    later_a, later_b = wide([[3.0, 1.0]]), wide([[1.0, 1.0]])
    result = direct(later_a, later_b)
    assert result is later_b and not forwarded  # the direct form lent it, not forward
    np.testing.assert_array_equal(result, wide([[4.0, 2.0]]))


def test_the_specialized_forward_leaves_a_read_only_or_strided_lent_buffer_alone():
    a, b = wide([[1.0, 2.0]]), wide([[0.5, -4.0]])
    direct = _specialized(add_op([0]), a, b)
    frozen = wide([[1.0, 2.0]])
    frozen.flags.writeable = False
    result = direct(frozen, b)
    assert result is not frozen and result is not b
    np.testing.assert_array_equal(result, wide([[1.5, -2.0]]))
    strided = np.asfortranarray(np.tile(wide([[1.0, 2.0]]), (3, 1)))
    other = np.ascontiguousarray(np.tile(b, (3, 1)))
    kept = strided.copy()
    result = direct(strided, other)  # another shape: forward decides, and a Fortran-ordered buffer is not lent
    np.testing.assert_array_equal(strided, kept)
    np.testing.assert_array_equal(result, kept + other)


def test_the_specialized_forward_gives_forward_results_for_other_shapes_and_dtypes():
    a, b = wide([[1.0, 2.0]]), wide([[0.5, -4.0]])
    direct = _specialized(add_op([1]), a, b)
    small_a, small_b = np.float32([[1.0]]), np.float32([[2.0]])
    assert direct(small_a, small_b) is not small_b  # below LEND_MIN_BYTES: fresh
    doubles = wide([[1.0, 2.0]], np.float64)
    result = direct(doubles, wide([[1.0, 1.0]], np.float64))
    assert result.dtype == np.float64
    np.testing.assert_array_equal(result, wide([[2.0, 3.0]], np.float64))
