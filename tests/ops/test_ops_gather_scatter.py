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


def loop_gather(operand, indices, params):
    """XLA's gather without batching dims, one output element at a time."""
    vector_dim, index_map = params["index_vector_dim"], params["start_index_map"]
    sizes, collapsed, offset_dims = params["slice_sizes"], params["collapsed_slice_dims"], params["offset_dims"]
    vectors = indices[..., None] if vector_dim == indices.ndim else np.moveaxis(indices, vector_dim, -1)
    kept = [d for d in range(operand.ndim) if d not in collapsed]
    out_rank = vectors.ndim - 1 + len(offset_dims)
    batch_positions = [p for p in range(out_rank) if p not in offset_dims]
    out_shape = [0] * out_rank
    for position, size in zip(batch_positions, vectors.shape[:-1]):
        out_shape[position] = size
    for position, dim in zip(offset_dims, kept):
        out_shape[position] = sizes[dim]
    out = np.empty(out_shape, operand.dtype)
    for where in itertools.product(*(range(n) for n in out_shape)):
        vector = vectors[tuple(where[p] for p in batch_positions)]
        start = [0] * operand.ndim
        for k, dim in enumerate(index_map):
            start[dim] = min(max(int(vector[k]), 0), operand.shape[dim] - sizes[dim])
        element = list(start)
        for position, dim in zip(offset_dims, kept):
            element[dim] += where[position]
        out[where] = operand[tuple(element)]
    return out


@pytest.mark.parametrize("params", [
    # w[i] of a stack of expert weights, indices (tokens, k): the MoE form JAX writes
    {"offset_dims": [2, 3], "collapsed_slice_dims": [0], "start_index_map": [0], "index_vector_dim": 2,
     "slice_sizes": [1, 3, 4]},
    # two indexed dims named out of order, one kept as a size-1 window, the whole dim between them
    {"offset_dims": [1, 2], "collapsed_slice_dims": [2], "start_index_map": [2, 0], "index_vector_dim": 1,
     "slice_sizes": [1, 3, 1]},
    # the index vector first, and the output's window dims around the batch dim
    {"offset_dims": [0, 2], "collapsed_slice_dims": [1], "start_index_map": [1], "index_vector_dim": 0,
     "slice_sizes": [5, 1, 2]},
], ids=["experts", "two dims out of order", "vector dim first"])
def test_gathers_of_whole_rows_match_a_loop(params):
    rng = np.random.default_rng(1)
    shape = (5, 3, 4) if params["slice_sizes"] == [1, 3, 4] else (5, 3, 2) if params["index_vector_dim"] == 0 \
        else (4, 3, 6)
    operand = rng.standard_normal(shape).astype(np.float32)
    count = len(params["start_index_map"])
    if params["index_vector_dim"] == 2:
        indices = rng.integers(-2, 7, (6, 2, count))
    elif params["index_vector_dim"] == 0:
        indices = rng.integers(-2, 7, (count, 7))
    else:
        indices = rng.integers(-2, 7, (7, count))  # some out of range: clamped
    got = run_op("Gather", [operand, indices.astype(np.int32)], params)
    np.testing.assert_array_equal(got, loop_gather(operand, indices, params))


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
