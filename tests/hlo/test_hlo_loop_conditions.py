"""A while whose condition compares one integer of its state with a constant (a fori_loop's ``i < n``)
evaluates it, after the first iteration, as a comparison of two Python ints (kuiper/ops/calls.py,
``While.bound``; or with another integer of the state): the loops below must run exactly the iterations
a plain Python loop with the same integer arithmetic (wrapping at the dtype's width) counts, whichever
side the constant is on, and the conditions that are not such a comparison must keep the sub-graph's
own path.  The counter's own
``i + constant`` on a 0-d integer is a sum of Python ints wrapped into the dtype
(kuiper/ir/codegen_numpy.py, ``_counter_step``): the same 0-d arrays as NumPy's add."""

from __future__ import annotations

import operator

import numpy as np
import pytest

import kuiper

HLO_TYPES = {"int8": "s8", "int16": "s16", "int32": "s32", "int64": "s64", "uint8": "u8", "uint32": "u32",
             "uint64": "u64"}
PYTHON = {"LT": operator.lt, "LE": operator.le, "GT": operator.gt, "GE": operator.ge, "EQ": operator.eq,
          "NE": operator.ne}


def counted_loop(dtype: str, step: int, bound: int, direction: str, constant_first: bool = False,
                 compare_type: str = "", against: str = "n") -> str:
    """ENTRY main(start) -> how many times the body ran: the state is (i, count); the body adds ``step`` to i
    and 1 to count, while ``i <direction> bound`` (or ``bound <direction> i``; ``against="k"``: ``i
    <direction> count``, an int32 loop)."""
    operands = f"({against}, i)" if constant_first else f"(i, {against})"
    kind = f", type={compare_type}" if compare_type else ""
    dtype = HLO_TYPES[dtype]
    return f"""HloModule counted
body {{
  s = ({dtype}[], s32[]) parameter(0)
  i = {dtype}[] get-tuple-element(s), index=0
  k = s32[] get-tuple-element(s), index=1
  d = {dtype}[] constant({step})
  one = s32[] constant(1)
  i2 = {dtype}[] add(i, d)
  k2 = s32[] add(k, one)
  ROOT r = ({dtype}[], s32[]) tuple(i2, k2)
}}
condition {{
  s = ({dtype}[], s32[]) parameter(0)
  i = {dtype}[] get-tuple-element(s), index=0
  k = s32[] get-tuple-element(s), index=1
  n = {dtype}[] constant({bound})
  ROOT c = pred[] compare{operands}, direction={direction}{kind}
}}
ENTRY main {{
  start = {dtype}[] parameter(0)
  zero = s32[] constant(0)
  init = ({dtype}[], s32[]) tuple(start, zero)
  loop = ({dtype}[], s32[]) while(init), condition=condition, body=body
  ROOT count = s32[] get-tuple-element(loop), index=1
}}
"""


def python_count(dtype: str, start: int, step: int, bound: int, direction: str, constant_first: bool) -> int:
    """The iterations of the same loop in Python ints, i wrapping as the dtype wraps."""
    width = np.iinfo(dtype)
    holds = PYTHON[direction]
    i, count = start, 0
    while (holds(bound, i) if constant_first else holds(i, bound)) and count < 10_000:
        i = (i + step - width.min) % (width.max - width.min + 1) + width.min
        count += 1
    return count


def while_op(model):
    (step,) = [step for step in model.plan.steps if step.node.type == "While"]
    return step.op


CASES = [
    # dtype, start, step, bound, direction, constant first
    ("int32", 0, 1, 16, "LT", False),  # jax.lax.fori_loop(0, 16, ...)
    ("int32", 0, 1, 16, "GT", True),  # 16 > i
    ("int32", 10, -3, -2, "GE", False),
    ("int32", 10, -3, -2, "LE", True),  # -2 <= i
    ("int32", 0, 2, 9, "LE", False),
    ("int32", 0, 3, 12, "NE", False),
    ("int32", 7, 1, 7, "EQ", True),  # once: 7 == 7, then 8
    ("int32", 2**31 - 20, 7, 0, "GT", False),  # i wraps negative on the third step
    ("int64", -5, 2, 6, "LT", False),
    ("uint32", 3, -1 % 2**32, 10, "LT", False),  # 3, 2, 1, 0, then 2**32 - 1: not below 10
    ("uint8", 250, 3, 100, "GE", False),  # 250, 253, then 256 wraps to 0
]


@pytest.mark.parametrize("dtype, start, step, bound, direction, constant_first", CASES)
def test_a_counted_loop_runs_the_iterations_python_counts(dtype, start, step, bound, direction, constant_first):
    model = kuiper.load_hlo(counted_loop(dtype, step, bound, direction, constant_first))
    assert while_op(model).bound is not None  # the Python comparison, not the condition's plan
    count = model(np.array(start, dtype))
    assert int(count) == python_count(dtype, start, step, bound, direction, constant_first)


def test_a_counted_loop_gives_what_its_condition_graph_gives():
    model = kuiper.load_hlo(counted_loop("int32", 1, 40, "LT"))
    fast = [int(model(np.array(start, np.int32))) for start in (-3, 0, 39, 40, 41)]
    while_op(model).bound = None
    vars(while_op(model)).pop("_condition_holds", None)  # made again, from the condition's plan
    assert [int(model(np.array(start, np.int32))) for start in (-3, 0, 39, 40, 41)] == fast == [43, 40, 1, 0, 0]


def test_an_unsigned_view_of_signed_counters_keeps_the_condition_graph():
    # s32 compared as unsigned: 0 <u 5, then -1 is 2**32 - 1, not below 5. Compared as Python ints it would
    # be -1 < 5 for ever (until the loop budget).
    model = kuiper.load_hlo(counted_loop("int32", -1, 5, "LT", compare_type="UNSIGNED"))
    assert while_op(model).bound is None
    assert int(model(np.array(0, np.int32))) == 1


FLOAT_CONDITION = """HloModule halving
body {
  s = (f32[], s32[]) parameter(0)
  x = f32[] get-tuple-element(s), index=0
  k = s32[] get-tuple-element(s), index=1
  half = f32[] constant(0.5)
  one = s32[] constant(1)
  x2 = f32[] multiply(x, half)
  k2 = s32[] add(k, one)
  ROOT r = (f32[], s32[]) tuple(x2, k2)
}
condition {
  s = (f32[], s32[]) parameter(0)
  x = f32[] get-tuple-element(s), index=0
  k = s32[] get-tuple-element(s), index=1
  eps = f32[] constant(0.01)
  ROOT c = pred[] compare(x, eps), direction=GT
}
ENTRY main {
  x = f32[] parameter(0)
  zero = s32[] constant(0)
  init = (f32[], s32[]) tuple(x, zero)
  loop = (f32[], s32[]) while(init), condition=condition, body=body
  ROOT count = s32[] get-tuple-element(loop), index=1
}
"""


def test_other_conditions_run_their_own_graph():
    model = kuiper.load_hlo(FLOAT_CONDITION)
    assert while_op(model).bound is None  # a float comparison
    assert int(model(np.array(1.0, np.float32))) == 7  # 1 / 2**7 < 0.01 < 1 / 2**6


@pytest.mark.parametrize("direction, constant_first", [("LT", False), ("GT", True), ("NE", False)])
def test_a_loop_whose_bound_is_carried_in_its_state_compares_two_python_ints(direction, constant_first):
    # i against the count k, both of the state (a while_loop's i < n with n carried): (-3, 0), (-1, 1),
    # (1, 2), then (3, 3); k > i runs as long.
    model = kuiper.load_hlo(counted_loop("int32", 2, 5, direction, constant_first, against="k"))
    assert while_op(model).bound is not None
    fast = int(model(np.array(-3, np.int32)))
    assert fast == 3
    while_op(model).bound = None
    vars(while_op(model)).pop("_condition_holds", None)
    assert int(model(np.array(-3, np.int32))) == fast


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8"])  # (u32, u64: exact ops, not fused)
def test_a_specialized_counter_add_gives_numpys_wrapped_sums(dtype):
    info = np.iinfo(dtype)
    for constant in (1, -1, 7, int(info.max), int(info.min)):
        if constant < 0 and info.min == 0:
            continue
        text = f"""HloModule add
ENTRY main {{
  x = {HLO_TYPES[dtype]}[] parameter(0)
  c = {HLO_TYPES[dtype]}[] constant({constant})
  ROOT y = {HLO_TYPES[dtype]}[] add(x, c)
}}
"""
        model = kuiper.load_hlo(text, backend="numpy")
        model(np.array(0, dtype))
        (entry,), (step,) = model.plan.entries, model.plan.steps
        assert getattr(entry[0], "__name__", None) == "one"  # a specialized forward (guarded), not the op's
        for value in (0, 1, -1, 5, int(info.max), int(info.max) - 3, int(info.min), int(info.min) + 2):
            x = np.array(value, dtype) if info.min <= value <= info.max else np.array(0, dtype)
            got = entry[0](x)
            want = np.add(x, np.array(constant, dtype))  # NumPy's wrapped sum (a scalar)
            assert type(got) is np.ndarray and got.shape == () and got.dtype == np.dtype(dtype)
            assert int(got) == int(want), (value, constant)
            assert int(model(x)) == int(want)
