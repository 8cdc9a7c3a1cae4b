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
