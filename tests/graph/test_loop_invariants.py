"""Loop-invariant work leaves the loop (kuiper/graph/loop_invariants.py): what moves, what stays,
and that the results are the loop's, checked against the same loop written out in NumPy."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import kuiper

build_module = importlib.import_module("kuiper.graph.build")

# h <- tanh(h @ concat(w1, w2) + broadcast(b)) for n steps; the weights ride in the state unchanged,
# as JAX threads them through a fori_loop.
LOOP = """HloModule loop
body {
  s = (s32[], f32[2,6], f32[6,3], f32[6,3], f32[6]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  h = f32[2,6] get-tuple-element(s), index=1
  w1 = f32[6,3] get-tuple-element(s), index=2
  w2 = f32[6,3] get-tuple-element(s), index=3
  b = f32[6] get-tuple-element(s), index=4
  one = s32[] constant(1)
  next = s32[] add(i, one)
  w = f32[6,6] concatenate(w1, w2), dimensions={1}
  half = f32[] constant(0.5)
  halves = f32[6,6] broadcast(half), dimensions={}
  scaled = f32[6,6] multiply(w, halves)
  product = f32[2,6] dot(h, scaled), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bias = f32[2,6] broadcast(b), dimensions={1}
  sum = f32[2,6] add(product, bias)
  new = f32[2,6] tanh(sum)
  ROOT out = (s32[], f32[2,6], f32[6,3], f32[6,3], f32[6]) tuple(next, new, w1, w2, b)
}
condition {
  s = (s32[], f32[2,6], f32[6,3], f32[6,3], f32[6]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(STEPS)
  ROOT less = pred[] compare(i, n), direction=LT
}
ENTRY main {
  h0 = f32[2,6] parameter(0)
  w1 = f32[6,3] parameter(1)
  w2 = f32[6,3] parameter(2)
  b = f32[6] parameter(3)
  zero = s32[] constant(0)
  start = (s32[], f32[2,6], f32[6,3], f32[6,3], f32[6]) tuple(zero, h0, w1, w2, b)
  loop = (s32[], f32[2,6], f32[6,3], f32[6,3], f32[6]) while(start), condition=condition, body=body
  ROOT h = f32[2,6] get-tuple-element(loop), index=1
}
"""


def inputs():
    rng = np.random.default_rng(0)
    return [rng.standard_normal(shape).astype(np.float32) for shape in ((2, 6), (6, 3), (6, 3), (6,))]


def numpy_loop(h, w1, w2, b, steps):
    w = np.concatenate([w1, w2], axis=1).astype(np.float64) * 0.5
    h = h.astype(np.float64)
    for _ in range(steps):
        h = np.tanh(h @ w + b)
    return h


def loop_op(model):
    return next(step.op for step in model.steps if step.node.type == "While")


def outer_names(model):
    return [step.node.name for step in model.steps]


def body_names(model):
    return [step.node.name for step in loop_op(model).body.steps]


@pytest.mark.parametrize("steps", [0, 1, 5])
def test_the_loop_gives_its_results_with_the_invariant_work_moved_out(steps):
    model = kuiper.load_hlo(LOOP.replace("STEPS", str(steps)))
    got = model(*inputs())
    np.testing.assert_allclose(got, numpy_loop(*inputs(), steps), rtol=1e-5, atol=1e-6)
    moved = [name for name in outer_names(model) if name.startswith("loop/")]
    assert any("w" in name for name in moved) and any("scaled" in name for name in moved)
    inside = body_names(model)
    assert not any(name.endswith(("/w", "/scaled")) or name in ("w", "scaled") for name in inside)
    # the state that changes keeps its work inside: the product, the sum, the tanh
    assert any("product" in name for name in inside)


def test_broadcasts_stay_in_the_loop_and_an_unhoisted_build_agrees(monkeypatch):
    hoisted = kuiper.load_hlo(LOOP.replace("STEPS", "4"))
    assert not any("bias" in name for name in outer_names(hoisted))  # a broadcast would hold 2x6 for 6 values
    monkeypatch.setattr(build_module, "hoist_loop_invariants", lambda order, operands: order)
    plain = kuiper.load_hlo(LOOP.replace("STEPS", "4"))
    assert not any(name.startswith("loop/") for name in outer_names(plain))
    np.testing.assert_array_equal(hoisted(*inputs()), plain(*inputs()))


def test_weights_bound_at_load_are_joined_once_before_the_loop():
    w1, w2, b = inputs()[1:]
    model = kuiper.load_hlo(LOOP.replace("STEPS", "3"), constants={1: w1, 2: w2, 3: b})
    assert [name for name in outer_names(model) if name.startswith("loop/")] == ["loop/w", "loop/scaled"]
    np.testing.assert_allclose(model(inputs()[0]), numpy_loop(*inputs(), 3), rtol=1e-5, atol=1e-6)


def test_random_numbers_are_drawn_at_every_iteration():
    # a draw of two from two scalars: no larger than its inputs, so only its randomness keeps it in
    text = """HloModule random
body {
  s = (s32[], f32[2], f32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  total = f32[2] get-tuple-element(s), index=1
  low = f32[] get-tuple-element(s), index=2
  high = f32[] constant(1)
  draw = f32[2] rng(low, high), distribution=rng_uniform
  sum = f32[2] add(total, draw)
  one = s32[] constant(1)
  next = s32[] add(i, one)
  ROOT out = (s32[], f32[2], f32[]) tuple(next, sum, low)
}
condition {
  s = (s32[], f32[2], f32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(2)
  ROOT less = pred[] compare(i, n), direction=LT
}
ENTRY main {
  low = f32[] parameter(0)
  zero = s32[] constant(0)
  zeros = f32[2] broadcast(low), dimensions={}
  start = (s32[], f32[2], f32[]) tuple(zero, zeros, low)
  loop = (s32[], f32[2], f32[]) while(start), condition=condition, body=body
  ROOT total = f32[2] get-tuple-element(loop), index=1
}
"""
    model = kuiper.load_hlo(text)
    assert not any(name.startswith("loop/") for name in outer_names(model))
    assert any("draw" in name for name in body_names(model))



# ys[i] = 2 * xs[i] for i < 3: jax's ``xs[i]`` and ``ys.at[i].set(...)`` slice at (i, 0) with a constant 0.
SLICES = """HloModule slices
body {
  s = (s32[], f32[3,4], f32[3,4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  xs = f32[3,4] get-tuple-element(s), index=1
  ys = f32[3,4] get-tuple-element(s), index=2
  zero = s32[] constant(0)
  x = f32[1,4] dynamic-slice(xs, i, zero), dynamic_slice_sizes={1,4}
  two = f32[] constant(2)
  twos = f32[1,4] broadcast(two), dimensions={}
  y = f32[1,4] multiply(x, twos)
  origin = s32[] constant(0)
  written = f32[3,4] dynamic-update-slice(ys, y, i, origin)
  one = s32[] constant(1)
  next = s32[] add(i, one)
  ROOT out = (s32[], f32[3,4], f32[3,4]) tuple(next, xs, written)
}
condition {
  s = (s32[], f32[3,4], f32[3,4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT less = pred[] compare(i, n), direction=LT
}
ENTRY main {
  xs = f32[3,4] parameter(0)
  zero = s32[] constant(0)
  zeros = f32[3,4] broadcast(f32[] constant(0)), dimensions={}
  start = (s32[], f32[3,4], f32[3,4]) tuple(zero, xs, zeros)
  loop = (s32[], f32[3,4], f32[3,4]) while(start), condition=condition, body=body
  ROOT ys = f32[3,4] get-tuple-element(loop), index=2
}
"""


def test_constant_start_indexes_leave_the_loop_and_other_constants_stay():
    model = kuiper.load_hlo(SLICES)
    xs = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5
    for _ in range(2):  # the first call and a specialized one
        np.testing.assert_array_equal(model(xs), xs.astype(np.float64) * 2)
    moved = [name for name in outer_names(model) if name.startswith("loop/")]
    assert sorted(moved) == ["loop/origin", "loop/zero"]
    body = loop_op(model).body
    assert not [step for step in body.steps if step.node.type == "Constant"]
    # the counter's 1 and the factor 2 stay in the math that reads them: nothing else grew the state
    assert len(body.inputs) == 5
