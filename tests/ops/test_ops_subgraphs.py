"""Reductions, sorts and control flow run alone (no HLO): named reducers, and sub-graph params that
the graph builder builds (a While body, a comparator, a reducer), against loops written here."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from single_op import expression, graph, run_op

from kuiper.model_ir import OpNode


def test_reduce_named_reducers_against_float64():
    x = np.random.default_rng(1).standard_normal((3, 4, 5)).astype(np.float32)
    got = run_op("Reduce", [x, np.float32(1.5)], {"axes": [0, 2], "reducer": "add"})
    np.testing.assert_allclose(got, x.astype(np.float64).sum(axis=(0, 2)) + 1.5, rtol=1e-6)
    got = run_op("Reduce", [x, np.float32(0.25)], {"axes": [1], "reducer": "max"})
    np.testing.assert_array_equal(got, np.maximum(x.max(axis=1), 0.25))
    bits = np.int32([[1, 2, 4], [8, 2, 16]])
    np.testing.assert_array_equal(run_op("Reduce", [bits, np.int32(32)], {"axes": [1], "reducer": "or"}), [39, 58])


def test_float16_sums_accumulate_in_float32():
    x = np.full((10000, 3), 0.1, np.float16)  # added one by one in float16, the sum stalls at 256
    got = run_op("Reduce", [x, np.float16(0)], {"axes": [0], "reducer": "add"})
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, np.float16(x.astype(np.float64).sum(axis=0)))


def test_a_sequential_sum_folds_in_row_major_order_rounding_each_step():
    # float16 steps of 2 above 2048: 2048 + 1 ties to the even 2048, so a 1 after 2048 is lost, one before is not.
    x = np.float16([[2048, 1, 1], [1, 1, 2048]])
    got = run_op("Reduce", [x, np.float16(0)], {"axes": [1], "reducer": "add", "sequential": True})
    assert got.dtype == np.float16 and got.tolist() == [2048, 2050]
    assert run_op("Reduce", [x, np.float16(0)], {"axes": [1], "reducer": "add"}).tolist() == [2050, 2050]
    # over two axes (given in any order), row-major: the 2048 at [0, 0, 0] comes first, the one at [1, 1, 2]
    # last, after 5 ones: 5 + 2048 = 2053 ties to the even 2052
    x3 = np.ones((2, 2, 3), np.float16)
    x3[0, 0, 0] = x3[1, 1, 2] = 2048
    got = run_op("Reduce", [x3, np.float16(0)], {"axes": [2, 1], "reducer": "add", "sequential": True})
    assert got.tolist() == [2048, 2052]
    # a sub-graph reducer, and window padding skipped
    add = graph([OpNode("pnnx.Expression", "s", ["a", "b"], ["s"], {"expr": "add(@0,@1)"})], ["a", "b"], ["s"])
    got = run_op("ReduceWindow", [np.float16([1, 1, 2048, 1]), np.float16(0)],
                 {"window": [3], "strides": [2], "padding": [[1, 0]], "reducer": add, "sequential": True})
    assert got.tolist() == [2, 2048]  # [pad, 1, 1] and [1, 2048, 1]: 2049 ties to 2048, and 2048 + 1 again


def test_reduce_with_a_variadic_sub_graph_reducer_is_an_argmax():
    # (acc value, acc index, value, index) -> the larger value, the lower index on ties.
    take = "or(gt(@2,@0),and(eq(@2,@0),lt(@3,@1)))"
    reducer = graph([
        OpNode("pnnx.Expression", "v", ["a0", "a1", "a2", "a3"], ["v"], {"expr": f"where({take},@2,@0)"}),
        OpNode("pnnx.Expression", "i", ["a0", "a1", "a2", "a3"], ["i"], {"expr": f"where({take},@3,@1)"}),
    ], ["a0", "a1", "a2", "a3"], ["v", "i"])
    x = np.float32([[3, 9, 1, 9, 2], [-1, -5, -1, -7, -2], [0, 0, 0, 0, 0]])
    positions = np.broadcast_to(np.arange(5, dtype=np.int32), x.shape)
    values, indices = run_op("Reduce", [x, positions, np.float32(-np.inf), np.int32(0)],
                             {"axes": [1], "reducer": reducer}, outputs=2)
    np.testing.assert_array_equal(values, [9, -1, 0])
    np.testing.assert_array_equal(indices, [1, 0, 0])


def window_reference(x, init, combine, window, strides, padding, base_dilation, window_dilation):
    """XLA's reduce-window by loops in float64: taps in padding or dilation holes are skipped."""
    dilated = [(d - 1) * b + 1 for d, b in zip(x.shape, base_dilation)]
    padded = [d + lo + hi for d, (lo, hi) in zip(dilated, padding)]
    extent = [(k - 1) * w + 1 for k, w in zip(window, window_dilation)]
    out_shape = [max(0, (p - e) // s + 1) for p, e, s in zip(padded, extent, strides)]
    out = np.empty(out_shape)
    for position in itertools.product(*map(range, out_shape)):
        value = init
        for tap in itertools.product(*map(range, window)):
            where = [o * s + t * w - lo
                     for o, s, t, w, (lo, _) in zip(position, strides, tap, window_dilation, padding)]
            if all(0 <= p < d and p % b == 0 for p, d, b in zip(where, dilated, base_dilation)):
                value = combine(value, float(x[tuple(p // b for p, b in zip(where, base_dilation))]))
        out[position] = value
    return out


WINDOWS = [
    ([2, 3], [1, 2], [[0, 0], [0, 0]], [1, 1], [1, 1]),
    ([3, 2], [2, 1], [[1, 2], [0, 1]], [1, 1], [1, 1]),
    ([2, 2], [1, 1], [[1, 0], [-1, 2]], [2, 1], [1, 2]),
    ([2, 2], [2, 2], [[0, 0], [0, 0]], [1, 1], [1, 1]),  # tiles the operand
]


@pytest.mark.parametrize("window, strides, padding, base_dilation, window_dilation", WINDOWS)
def test_reduce_window_against_loops(window, strides, padding, base_dilation, window_dilation):
    x = np.random.default_rng(2).standard_normal((4, 6)).astype(np.float32)
    params = {"window": window, "strides": strides, "padding": padding, "base_dilation": base_dilation,
              "window_dilation": window_dilation}
    for reducer, init, combine in [("add", 0.5, lambda a, b: a + b), ("max", -np.inf, max),
                                   (expression("add(@0,@1)", 2), 0.5, lambda a, b: a + b)]:
        got = run_op("ReduceWindow", [x, np.float32(init)], {**params, "reducer": reducer})
        expected = window_reference(x, init, combine, window, strides, padding, base_dilation, window_dilation)
        assert got.shape == expected.shape and got.dtype == np.float32
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


def test_select_and_scatter_is_the_gradient_of_max_pooling():
    x = np.float32([[1, 5, 2, 2], [5, 0, 3, 1], [7, 7, 0, 4]])
    source = np.float32([[10, 20, 30], [40, 50, 60]])
    params = {"window": [2, 2], "strides": [1, 1], "padding": [[0, 0], [0, 0]],
              "select": expression("ge(@0,@1)", 2), "scatter": "add"}
    got = run_op("SelectAndScatter", [x, source, np.float32(0)], params)
    expected = np.zeros_like(x, dtype=np.float64)
    for i, j in itertools.product(range(2), range(3)):
        window = x[i : i + 2, j : j + 2]
        first_max = np.argmax(window)  # the first maximum in row-major order: ge keeps the earlier one
        expected[i + first_max // 2, j + first_max % 2] += source[i, j]
    np.testing.assert_array_equal(got, expected)


def test_map_applies_a_sub_graph_elementwise():
    x, y = np.float32([1, -2, 0.5]), np.float32([3, 4, 1])
    got = run_op("Map", [x, y], {"function": expression("add(mul(@0,@0),@1)", 2)})
    np.testing.assert_allclose(got, x.astype(np.float64) ** 2 + y)


def total_order(value: float, position: int):
    """-inf < ... < -0 < +0 < ... < inf < NaN, then by position."""
    return (np.isnan(value), 0.0 if np.isnan(value) else value, not np.signbit(value), position)


def test_sort_by_a_key_operand_descending_is_stable_in_total_order():
    keys = np.float32([0.0, np.nan, -0.0, 2, 2, -np.inf])
    payload = np.arange(6, dtype=np.int32)
    got_payload, got_keys = run_op("Sort", [payload, keys], {"axis": 0, "key": 1, "descending": True}, outputs=2)
    ascending = sorted(range(6), key=lambda p: total_order(keys[p], 0))
    groups = [list(g) for _, g in itertools.groupby(ascending, key=lambda p: total_order(keys[p], 0))]
    expected = [p for group in reversed(groups) for p in group]  # descending, ties in their first order
    np.testing.assert_array_equal(got_payload, expected)
    np.testing.assert_array_equal(got_keys.view(np.int32), keys[expected].view(np.int32))


def test_sort_with_a_comparator_sub_graph_orders_by_absolute_value():
    x = np.float32([[3, -1, 2, -3, 0.5, 1, -2], [-4, 4, 0, -0.5, 0.5, 8, -8]])
    got = run_op("Sort", [x], {"axis": 1, "comparator": expression("lt(abs(@0),abs(@1))", 2)})
    expected = [sorted(row, key=abs) for row in x.tolist()]  # Python's sort is stable
    np.testing.assert_array_equal(got, expected)


def test_topk_orders_nan_largest_and_ties_by_position():
    x = np.float32([[1, np.nan, 3, 3, -0.0, 0.0]])
    values, indices = run_op("TopK", [x], {"k": 4, "largest": True}, outputs=2)
    np.testing.assert_array_equal(indices, [[1, 2, 3, 0]])
    np.testing.assert_array_equal(values, [[np.nan, 3, 3, 1]])
    assert indices.dtype == np.int32
    _, indices = run_op("TopK", [x], {"k": 2, "largest": False}, outputs=2)
    np.testing.assert_array_equal(indices, [[4, 5]])  # -0 before +0


def test_while_runs_its_body_sub_graph_until_the_condition_fails():
    condition = graph([OpNode("Compare", "c", ["i"], ["c"], {"comparison": "lt", "other": 5})], ["i", "x"], ["c"])
    body = graph([OpNode("pnnx.Expression", "n", ["i"], ["n"], {"expr": "add(@0,1)"}),
                  OpNode("pnnx.Expression", "d", ["x"], ["d"], {"expr": "mul(@0,2.0)"})], ["i", "x"], ["n", "d"])
    i, x = run_op("While", [np.int32(1), np.float64([1.5, -3])], {"condition": condition, "body": body}, outputs=2)
    assert i == 5
    np.testing.assert_array_equal(x, [1.5 * 16, -3 * 16])


def test_if_picks_a_branch_by_index_or_predicate():
    negate, double = expression("neg(@0)", 1), expression("add(@0,@0)", 1)
    params = {"selector": "index", "branches": [negate, double], "branch_input_counts": [1, 1]}
    for index, expected in [(0, -3), (1, 8), (7, 8), (-1, 8)]:  # out of range: the last branch
        assert run_op("If", [np.int32(index), np.float32(3), np.float32(4)], params) == expected
    params["selector"] = "pred"
    assert run_op("If", [np.bool_(True), np.float32(3), np.float32(4)], params) == -3
    assert run_op("If", [np.bool_(False), np.float32(3), np.float32(4)], params) == 8


def test_scan_carries_a_state_over_slices_in_either_direction_with_an_extra_input():
    """Scan's body (state, x_t, extra) -> (state + x_t * extra, the running state): a cumulative sum by loops."""
    body = graph([
        OpNode("pnnx.Expression", "next", ["s", "x", "k"], ["next"], {"expr": "add(@0,mul(@1,@2))"}),
        OpNode("Identity", "out", ["next"], ["out"]),
    ], ["s", "x", "k"], ["next", "out"])
    x = np.random.default_rng(3).standard_normal((4, 5)).astype(np.float32)
    start, extra = np.zeros(4, np.float32), np.float32(2.0)
    for reverse in (0, 1):
        params = {"body": body, "state_count": 1, "sequence_count": 1, "input_axes": [1], "input_reverse": [reverse],
                  "output_axes": [1], "output_reverse": [reverse]}
        final, stacked = run_op("Scan", [start, x, extra], params, outputs=2)
        steps = x[:, ::-1] if reverse else x
        running = np.cumsum(steps.astype(np.float64) * 2.0, axis=1)
        np.testing.assert_allclose(stacked, running[:, ::-1] if reverse else running, rtol=1e-6, atol=1e-6)  # float32 sums
        np.testing.assert_allclose(final, running[:, -1], rtol=1e-6, atol=1e-6)
