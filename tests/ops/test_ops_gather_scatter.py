"""Gather and Scatter run alone (no HLO), checked against loops written here (XLA's semantics)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from single_op import expression, run_op

from kuiper.errors import UnsupportedOperatorError

ROWS = {"offset_dims": [1], "collapsed_slice_dims": [0], "start_index_map": [0], "index_vector_dim": 1,
        "slice_sizes": [1, 4]}


def test_gather_rows_clamps_starts_that_do_not_fit():
    operand = np.arange(20, dtype=np.float32).reshape(5, 4)
    indices = np.array([[3], [-2], [9]], np.int32)
    got = run_op("Gather", [operand, indices], ROWS)
    np.testing.assert_array_equal(got, operand[[3, 0, 4]])  # -2 clamps to 0, 9 to 4


def test_gather_two_dim_windows_against_a_loop():
    rng = np.random.default_rng(0)
    operand = rng.standard_normal((6, 7))
    indices = np.array([[0, 0], [5, 1], [2, 6], [-1, 3]], np.int64)
    params = {"offset_dims": [1, 2], "collapsed_slice_dims": [], "start_index_map": [0, 1], "index_vector_dim": 1,
              "slice_sizes": [3, 2]}
    got = run_op("Gather", [operand, indices], params)
    expected = np.empty((4, 3, 2))
    for b, (s0, s1) in enumerate(indices):
        s0, s1 = min(max(s0, 0), 6 - 3), min(max(s1, 0), 7 - 2)
        for i, j in itertools.product(range(3), range(2)):
            expected[b, i, j] = operand[s0 + i, s1 + j]
    np.testing.assert_array_equal(got, expected)


def test_gather_with_batching_dims_takes_one_row_per_batch():
    operand = np.arange(30, dtype=np.int32).reshape(2, 5, 3)
    indices = np.array([[4], [1]], np.int32)
    params = {"offset_dims": [1], "collapsed_slice_dims": [1], "start_index_map": [1], "index_vector_dim": 1,
              "slice_sizes": [1, 1, 3], "operand_batching_dims": [0], "start_indices_batching_dims": [0]}
    got = run_op("Gather", [operand, indices], params)
    np.testing.assert_array_equal(got, [operand[0, 4], operand[1, 1]])


POINTS = {"update_window_dims": [], "inserted_window_dims": [0], "scatter_dims_to_operand_dims": [0],
          "index_vector_dim": 1}


def test_scatter_add_accumulates_repeats_and_skips_out_of_range():
    indices = np.array([[1], [3], [1], [7], [-1]], np.int32)
    updates = np.float32([1, 2, 3, 4, 5])
    got = run_op("Scatter", [np.zeros(5, np.float32), indices, updates], {**POINTS, "combiner": "add"})
    np.testing.assert_array_equal(got, [0, 4, 0, 2, 0])


def test_scatter_replace_keeps_the_last_update():
    indices = np.array([[2], [0], [2]], np.int32)
    got = run_op("Scatter", [np.full(3, 9, np.int32), indices, np.int32([5, 6, 7])], {**POINTS, "combiner": "replace"})
    np.testing.assert_array_equal(got, [6, 9, 7])


def test_scatter_with_a_sub_graph_combiner_applies_updates_in_order():
    combiner = expression("add(mul(@0,2.0),@1)", 2)  # old * 2 + new: order matters
    indices = np.array([[1], [0], [1], [1]], np.int32)
    updates = np.float64([3, 1, 5, 7])
    operand = np.float64([10, 0, 4])
    got = run_op("Scatter", [operand, indices, updates], {**POINTS, "combiner": combiner})
    expected = operand.copy()
    for (target,), update in zip(indices, updates):
        expected[target] = expected[target] * 2 + update
    np.testing.assert_array_equal(got, expected)


def test_scatter_windows_that_do_not_fit_are_skipped():
    operand = np.zeros((4, 5), np.float32)
    indices = np.array([[0, 1], [3, 4], [2, 3]], np.int32)  # the second 2x2 window leaves the operand
    updates = np.arange(12, dtype=np.float32).reshape(3, 2, 2)
    params = {"update_window_dims": [1, 2], "inserted_window_dims": [], "scatter_dims_to_operand_dims": [0, 1],
              "index_vector_dim": 1, "combiner": "add"}
    got = run_op("Scatter", [operand, indices, updates], params)
    expected = operand.copy()
    for (s0, s1), window in zip(indices, updates):
        if s0 + 2 <= 4 and s1 + 2 <= 5:
            expected[s0 : s0 + 2, s1 : s1 + 2] += window
    np.testing.assert_array_equal(got, expected)


def test_scatter_names_an_unknown_combiner():
    with pytest.raises(UnsupportedOperatorError, match="combiner='xor'"):
        run_op("Scatter", [np.zeros(2), np.zeros((1, 1), np.int32), np.ones(1)], {**POINTS, "combiner": "xor"})
