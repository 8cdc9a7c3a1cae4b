"""HLO instructions that call computations become canonical ops whose params are plain data:
sub-graphs are ModelIRs, never HLO objects or closures; and the values XLA gives."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

import kuiper
from kuiper.hlo import HloComputation, HloInstruction, HloModule, parse
from kuiper.hlo.lower import lower_entry
from kuiper.model_ir import ModelIR

FIXTURES = Path(__file__).parents[1] / "fixtures" / "hlo"
TEXTS = sorted(FIXTURES.glob("*.hlo.txt"))
CANONICAL = {"Reduce", "ReduceWindow", "SelectAndScatter", "Map", "Gather", "Scatter", "Sort", "TopK", "While", "If"}
RETIRED = {"hlo.reduce", "hlo.reduce-window", "hlo.select-and-scatter", "hlo.map", "hlo.gather", "hlo.scatter",
           "hlo.sort", "hlo.topk", "hlo.custom-call.TopK", "hlo.while", "hlo.conditional"}


def nodes(ir: ModelIR):
    """Every node of ``ir`` and of the sub-graphs in its params, depth first."""
    for node in ir.ops:
        yield node
        for value in node.params.values():
            for sub in value if isinstance(value, list) else [value]:
                if isinstance(sub, ModelIR):
                    yield from nodes(sub)


def frontend_objects(value) -> list:
    """HLO objects and callables anywhere inside a param value (sub-graphs are walked by ``nodes``)."""
    if isinstance(value, (HloInstruction, HloModule, HloComputation)) or callable(value):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [found for item in value for found in frontend_objects(item)]
    return []


@pytest.mark.parametrize("path", TEXTS, ids=[p.name for p in TEXTS])
def test_translated_ops_hold_plain_data(path):
    ir = lower_entry(parse(path.read_text(), source=path.name))
    for node in nodes(ir):
        assert node.type not in RETIRED and not node.type.startswith("hlo.")
        assert frontend_objects(node.params) == [], node.describe()
    assert pickle.loads(pickle.dumps(ir)).outputs == ir.outputs  # a graph of plain data pickles


def test_the_fixtures_use_every_translated_family_but_map_and_if():
    used = {node.type for path in TEXTS for node in nodes(lower_entry(parse(path.read_text())))}
    assert CANONICAL - {"Map", "If"} <= used


def test_a_loop_model_pickles_as_its_path_and_runs_the_same(tmp_path):
    path = FIXTURES / "control_flow.opt.hlo.txt"
    model = kuiper.load(path)
    data = np.load(FIXTURES / "control_flow.npz")
    inputs = [data[k] for k in sorted(data.files) if k.startswith("input")]
    again = pickle.loads(pickle.dumps(model))
    for got, want in zip(again(*inputs, to_numpy=True), model(*inputs, to_numpy=True)):
        np.testing.assert_array_equal(got, want)


def run(text: str, *inputs):
    result = kuiper.load_hlo(text, backend="numpy")(*inputs, to_numpy=True)
    return [np.asarray(r) for r in result] if isinstance(result, tuple) else np.asarray(result)


def test_a_total_order_comparator_becomes_a_key_sort():
    text = ("HloModule m\nless {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  i = s32[] parameter(2)\n"
            "  j = s32[] parameter(3)\n  ROOT lt = pred[] compare(b, a), direction=LT, type=TOTALORDER\n}\n"
            "ENTRY e {\n  x = f32[5] parameter(0)\n  i = s32[5] iota(), iota_dimension=0\n"
            "  ROOT s = (f32[5], s32[5]) sort(x, i), dimensions={0}, is_stable=true, to_apply=less\n}\n")
    (sort,) = [node for node in lower_entry(parse(text)).ops if node.type == "Sort"]
    assert (sort.params["key"], sort.params["descending"]) == (0, True)
    keys, order = run(text, np.float32([1, np.nan, 1, -np.inf, 5]))
    np.testing.assert_array_equal(order, [1, 4, 0, 2, 3])  # NaN largest, ties in their order
    np.testing.assert_array_equal(keys, [np.nan, 5, 1, 1, -np.inf])


ARGMAX = """HloModule m
argmax {
  av = f32[] parameter(0)
  ai = s32[] parameter(1)
  bv = f32[] parameter(2)
  bi = s32[] parameter(3)
  gt = pred[] compare(bv, av), direction=GT
  eq = pred[] compare(bv, av), direction=EQ
  lower = pred[] compare(bi, ai), direction=LT
  tie = pred[] and(eq, lower)
  take = pred[] or(gt, tie)
  v = f32[] select(take, bv, av)
  i = s32[] select(take, bi, ai)
  ROOT t = (f32[], s32[]) tuple(v, i)
}
ENTRY e {
  x = f32[3,7] parameter(0)
  i = s32[3,7] iota(), iota_dimension=1
  low = f32[] constant(-inf)
  zero = s32[] constant(0)
  ROOT r = (f32[3], s32[3]) reduce(x, i, low, zero), dimensions={1}, to_apply=argmax
}
"""


def test_a_variadic_reduce_gives_both_results():
    x = np.float32([[3, 9, 1, 9, 2, 0, 9], [-1, -5, -1, -7, -2, -3, -4], [0, 1, 2, 3, 4, 5, 6]])
    values, indices = run(ARGMAX, x)
    np.testing.assert_array_equal(values, x.max(axis=1))
    np.testing.assert_array_equal(indices, x.argmax(axis=1))  # NumPy's argmax: the first maximum too
    assert indices.dtype == np.int32


def test_reduce_over_pred_with_a_constant_reducer():
    text = ("HloModule m\nyes {\n  a = pred[] parameter(0)\n  b = pred[] parameter(1)\n"
            "  ROOT t = pred[] constant(true)\n}\nENTRY e {\n  x = pred[2,3] parameter(0)\n"
            "  f = pred[] constant(false)\n  ROOT r = pred[2] reduce(x, f), dimensions={1}, to_apply=yes\n}\n")
    got = run(text, np.zeros((2, 3), bool))
    assert got.shape == (2,) and got.dtype == np.bool_ and got.all()


def test_reduce_window_with_a_general_reducer_keeps_the_window_shape():
    text = ("HloModule m\nmax {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
            "  gt = pred[] compare(a, b), direction=GT\n  ROOT s = f32[] select(gt, a, b)\n}\n"
            "ENTRY e {\n  x = f32[2,17,31,7] parameter(0)\n  low = f32[] constant(-inf)\n"
            "  ROOT r = f32[2,16,30,7] reduce-window(x, low), window={size=1x2x2x1}, to_apply=max\n}\n")
    x = np.random.default_rng(3).standard_normal((2, 17, 31, 7)).astype(np.float32)
    got = run(text, x)
    expected = np.lib.stride_tricks.sliding_window_view(x, (2, 2), axis=(1, 2)).max(axis=(-2, -1))
    assert got.shape == (2, 16, 30, 7)
    np.testing.assert_array_equal(got, expected)


JAX_LESS = """HloModule m
less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  nan = f32[] constant(nan)
  zero = f32[] constant(0)
  a_nan = pred[] compare(a, a), direction=NE
  a_zero = pred[] compare(a, zero), direction=EQ
  a0 = f32[] select(a_zero, zero, a)
  a1 = f32[] select(a_nan, nan, a0)
  b_nan = pred[] compare(b, b), direction=NE
  b_zero = pred[] compare(b, zero), direction=EQ
  b0 = f32[] select(b_zero, zero, b)
  b1 = f32[] select(b_nan, nan, b0)
  ROOT lt = pred[] compare(a1, b1), direction=LT, type=TOTALORDER
}
ENTRY e {
  x = f32[7] parameter(0)
  ROOT s = f32[7] sort(x), dimensions={0}, is_stable=true, to_apply=less
}
"""


def test_jax_float_comparator_sorts_zeros_and_nans_as_equals():
    (sort,) = [node for node in lower_entry(parse(JAX_LESS)).ops if node.type == "Sort"]
    assert sort.params["canonical_nans_and_zeros"] is True and "comparator" not in sort.params
    x = np.float32([np.nan, -0.0, 0.0, -np.nan, 1, -0.0, -np.inf])
    got = run(JAX_LESS, x)
    expected = x[[6, 1, 2, 5, 4, 0, 3]]  # -0 and +0 equal, both NaNs equal and last: each kept in order
    np.testing.assert_array_equal(got.view(np.int32), expected.view(np.int32))


THREE_AT_ONCE = """HloModule m
sum_max_min {
  a = f32[] parameter(0)
  b = s32[] parameter(1)
  c = f32[] parameter(2)
  x = f32[] parameter(3)
  y = s32[] parameter(4)
  z = f32[] parameter(5)
  s = f32[] add(a, x)
  m = s32[] maximum(b, y)
  n = f32[] minimum(c, z)
  ROOT t = (f32[], s32[], f32[]) tuple(s, m, n)
}
always_one {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT one = f32[] constant(1)
}
ENTRY e {
  x = f32[2,3,5] parameter(0)
  y = s32[2,3,5] parameter(1)
  zero = f32[] constant(0)
  low = s32[] constant(-100)
  high = f32[] constant(inf)
  r = (f32[3], s32[3], f32[3]) reduce(x, y, x, zero, low, high), dimensions={0,2}, to_apply=sum_max_min
  w = f32[2,2,4] reduce-window(x, zero), window={size=1x2x2}, to_apply=always_one
  r0 = f32[3] get-tuple-element(r), index=0
  r1 = s32[3] get-tuple-element(r), index=1
  r2 = f32[3] get-tuple-element(r), index=2
  ROOT t = (f32[3], s32[3], f32[3], f32[2,2,4]) tuple(r0, r1, r2, w)
}
"""


def test_a_variadic_reduce_of_three_results_and_a_constant_window_reducer():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 5)).astype(np.float32)
    y = rng.integers(-50, 50, (2, 3, 5)).astype(np.int32)
    total, largest, smallest, ones = run(THREE_AT_ONCE, x, y)
    np.testing.assert_allclose(total, x.astype(np.float64).sum(axis=(0, 2)), rtol=1e-5)
    np.testing.assert_array_equal(largest, y.max(axis=(0, 2)))
    np.testing.assert_array_equal(smallest, x.min(axis=(0, 2)))
    assert ones.shape == (2, 2, 4) and (ones == 1).all()
