"""The canonical Unique op against NumPy's unique (an independent implementation of the same definition)."""

from __future__ import annotations

import numpy as np
import pytest

from single_op import run_op


def numpy_unique(x, axis, sorted_):
    values, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True, return_counts=True,
                                               axis=axis)
    inverse = inverse.reshape(-1)
    if not sorted_:  # renumber the groups by first occurrence
        order = np.argsort(first, kind="stable")
        renumber = np.argsort(order)
        values, first, counts, inverse = np.take(x if axis is not None else x.reshape(-1), first[order],
                                                 axis=axis or 0), first[order], counts[order], renumber[inverse]
    return values, first, inverse, counts


CASES = [
    (np.array([2.0, 1.0, 1.0, 3.0, 4.0, 3.0], np.float32), None),
    (np.array([[1, 0, 0], [1, 0, 0], [2, 3, 4]], np.int64), 0),
    (np.array([[1, 0, 0], [1, 0, 0], [2, 3, 4]], np.int64), -1),
    (np.random.default_rng(0).integers(0, 3, (3, 4, 2)).astype(np.int32), 1),
    (np.random.default_rng(1).integers(0, 4, (20,)).astype(np.uint8), None),
    (np.array([True, False, True]), None),
]


@pytest.mark.parametrize("sorted_", [True, False])
@pytest.mark.parametrize("x, axis", CASES)
def test_unique_matches_numpy(x, axis, sorted_):
    got = run_op("Unique", [x], {"dim": axis, "sorted": sorted_}, outputs=4)
    for name, have, want in zip(("values", "first", "inverse", "counts"), got, numpy_unique(x, axis, sorted_)):
        np.testing.assert_array_equal(have, want, err_msg=name)
        assert have.dtype == want.dtype or name != "values", name


def test_nans_are_one_value_and_negative_zero_is_zero():
    x = np.array([np.nan, 0.0, -0.0, 1.0, np.nan, -np.nan], np.float32)
    values, first, inverse, counts = run_op("Unique", [x], {"sorted": True}, outputs=4)
    np.testing.assert_array_equal(values, [0.0, 1.0, np.nan])
    np.testing.assert_array_equal(first, [1, 3, 0])
    np.testing.assert_array_equal(inverse, [2, 0, 0, 1, 2, 2])
    np.testing.assert_array_equal(counts, [2, 1, 3])


def test_one_output_is_the_values_and_an_empty_input_gives_empty_outputs():
    np.testing.assert_array_equal(run_op("Unique", [np.array([3, 1, 3], np.int64)], {"sorted": False}), [3, 1])
    values, first, inverse, counts = run_op("Unique", [np.zeros((0,), np.float32)], {}, outputs=4)
    assert values.shape == first.shape == inverse.shape == counts.shape == (0,)
