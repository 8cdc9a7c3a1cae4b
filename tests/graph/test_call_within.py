"""How loops, branches and scans run their sub-graphs (``Model.call_within``)."""

from __future__ import annotations

import numpy as np
import pytest

import kuiper


def test_a_sub_graph_call_takes_arrays_of_its_dtype_as_they_are_and_checks_the_rest():
    """Model.call_within, how loops and branches run their sub-graphs: feeds that are arrays of the declared
    dtype go in unchecked (the outer call checked the model's inputs); anything else takes the full check."""
    from kuiper.errors import InputError

    text = "HloModule m\nENTRY main {\n  x = f32[3] parameter(0)\n  ROOT y = f32[3] abs(x)\n}\n"
    model = kuiper.load_hlo(text)
    x = np.float32([-1, 2, -3])
    (y,) = model.call_within([x])
    np.testing.assert_array_equal(y, [1, 2, 3])
    (y,) = model.call_within([np.float64([-1, 2, -3])])  # another float dtype: converted, as a call would
    assert y.dtype == np.float32
    with pytest.raises(InputError, match="must be an array"):
        model.call_within(["not an array"])


SWAPPING_LOOP = """HloModule swaps

body {
  s = (s32[], f32[3], f32[3], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  a = f32[3] get-tuple-element(s), index=1
  b = f32[3] get-tuple-element(s), index=2
  w = f32[3] get-tuple-element(s), index=3
  one = s32[] constant(1)
  next = s32[] add(i, one)
  scaled = f32[3] multiply(a, w)
  ROOT r = (s32[], f32[3], f32[3], f32[3]) tuple(next, b, scaled, w)
}

condition {
  s = (s32[], f32[3], f32[3], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}

ENTRY main {
  a = f32[3] parameter(0)
  b = f32[3] parameter(1)
  w = f32[3] parameter(2)
  zero = s32[] constant(0)
  init = (s32[], f32[3], f32[3], f32[3]) tuple(zero, a, b, w)
  loop = (s32[], f32[3], f32[3], f32[3]) while(init), condition=condition, body=body
  first = f32[3] get-tuple-element(loop), index=1
  second = f32[3] get-tuple-element(loop), index=2
  ROOT out = (f32[3], f32[3]) tuple(first, second)
}
"""


def test_a_loops_later_iterations_move_only_what_its_body_and_condition_read():
    """Model.loop_step: after the first iteration a loop feeds its body and condition only the values
    some step reads, passes an untouched value through, and still swaps and computes the others."""
    model = kuiper.load_hlo(SWAPPING_LOOP, backend="numpy")
    a, b, w = np.float32([1, 2, 3]), np.float32([-1, 0.5, 4]), np.float32([2, 3, 0.5])
    want_a, want_b = a.copy(), b.copy()
    for _ in range(5):
        want_a, want_b = want_b, want_a * w
    for _ in range(2):
        got_a, got_b = model(a, b, w)
        np.testing.assert_array_equal(got_a, want_a)
        np.testing.assert_array_equal(got_b, want_b)
    (loop,) = [step.op for step in model.steps if step.node.type == "While"]
    fed = {}
    for name, sub_graph in (("condition", loop.condition), ("body", loop.body)):
        run = sub_graph.plan.run

        def recording(slots, name=name, run=run):
            fed.setdefault(name, []).append(sum(value is not None for value in slots))
            run(slots)

        sub_graph.plan.run = recording
    model(a, b, w)
    # The first call of each is checked (call_within); later ones take the state as one copy of the list,
    # the sub-graph's inputs being its first slots in order.  The condition (i < 5) runs once: later
    # checks compare the counter as a Python int (While.bound).
    assert loop.body.input_slots == [0, 1, 2, 3]
    assert fed["condition"] == [4]
    assert fed["body"][0] == 4 and set(fed["body"][1:]) == {4}
    # Without that comparison, the condition's later runs take the state the same way.
    loop.bound = None
    vars(loop).pop("_condition_holds", None)
    fed.clear()
    got_a, got_b = model(a, b, w)
    np.testing.assert_array_equal(got_a, want_a)
    assert fed["condition"][0] == 4 and set(fed["condition"][1:]) == {4}
    # Inputs in other slots are fed one by one, only those a step reads: the counter, a and w (b passes
    # through to another position). Slots listed with a and the counter swapped, for the state swapped.
    body = loop.body
    swapped = [body.input_slots[1], body.input_slots[0], *body.input_slots[2:]]
    one_by_one = body.plan.state_step(swapped, body.output_slots, body.slot_count)
    fed.clear()
    state = [np.int32(2).reshape(()), a, b, w]
    got = one_by_one([state[1], state[0], *state[2:]])
    assert fed["body"] == [3]
    want = body.loop_step()(state)
    assert len(got) == len(want) == 4
    for mine, theirs in zip(got, want):
        np.testing.assert_array_equal(mine, theirs)


VIEWED_LOOP = """HloModule viewed

body {
  s = (s32[], f32[2048], f32[2,1024]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  a = f32[2048] get-tuple-element(s), index=1
  two = f32[] constant(2)
  twos = f32[2048] broadcast(two), dimensions={}
  n = f32[2048] multiply(a, twos)
  view = f32[2,1024] reshape(n)
  one = s32[] constant(1)
  next = s32[] add(i, one)
  ROOT r = (s32[], f32[2048], f32[2,1024]) tuple(next, n, view)
}

condition {
  s = (s32[], f32[2048], f32[2,1024]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}

ENTRY main {
  a = f32[2048] parameter(0)
  zero = s32[] constant(0)
  v = f32[2,1024] reshape(a)
  init = (s32[], f32[2048], f32[2,1024]) tuple(zero, a, v)
  loop = (s32[], f32[2048], f32[2,1024]) while(init), condition=condition, body=body
  ROOT out = f32[2,1024] get-tuple-element(loop), index=2
}
"""


def test_a_loop_whose_outputs_view_each_other_lends_its_body_no_state():
    """kuiper/graph/build.py, _owned_state: a body output that is a view of another (a reshape) would
    change with it if an op overwrote that one in place at the next iteration: no input is owned then."""
    model = kuiper.load_hlo(VIEWED_LOOP, backend="numpy")
    (loop,) = [step.op for step in model.steps if step.node.type == "While"]
    assert loop.body.owned_inputs == ()
    a = np.linspace(-1, 1, 2048, dtype=np.float32)
    kept = a.copy()
    np.testing.assert_array_equal(model(a), (a * 8).reshape(2, 1024))
    np.testing.assert_array_equal(a, kept)
    swapping = kuiper.load_hlo(SWAPPING_LOOP, backend="numpy")
    (loop,) = [step.op for step in swapping.steps if step.node.type == "While"]
    assert loop.body.owned_inputs == (0,)  # the counter; a becomes b, which passes through: not fresh
