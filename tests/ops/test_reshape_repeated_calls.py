"""Reshape resolves its target once per input shape (issue 27); every call still gets its own answer."""

from __future__ import annotations

import numpy as np
import pytest

from kuiper.backends import get_backend
from kuiper.errors import ShapeError
from kuiper.model_ir import OpNode
from kuiper.ops.shape import Reshape


def reshape_op(*inputs, **params):
    keys = ["input", "shape"] if len(inputs) == 2 else []
    return Reshape(OpNode("Reshape", "r", list(inputs), ["y"], params, input_keys=keys), get_backend("numpy"))


def test_a_minus_one_follows_the_input_shape_from_call_to_call():
    op = reshape_op("x", shape=(-1, 4))
    for rows in (2, 5, 2, 3, 3):
        x = np.arange(rows * 8, dtype=np.float32).reshape(rows, 2, 4)
        got = op.forward(x)
        assert got.shape == (rows * 2, 4)
        np.testing.assert_array_equal(got.reshape(-1), np.arange(rows * 8, dtype=np.float32))


def test_a_shape_input_that_changes_between_calls_is_used_each_time():
    op = reshape_op("x", "s")
    x = np.arange(12, dtype=np.float32)
    assert op.forward(x, [3, -1]).shape == (3, 4)
    assert op.forward(x, [-1, 6]).shape == (2, 6)
    assert op.forward(x, [3, -1]).shape == (3, 4)


def test_an_impossible_call_after_a_good_one_still_fails():
    op = reshape_op("x", shape=(5, -1))
    assert op.forward(np.zeros((10, 2))).shape == (5, 4)
    with pytest.raises(ShapeError, match="cannot reshape shape \\(3, 3\\)"):
        op.forward(np.zeros((3, 3)))
    assert op.forward(np.zeros((10, 2))).shape == (5, 4)
