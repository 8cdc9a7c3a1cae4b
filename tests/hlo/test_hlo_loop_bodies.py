"""Loop bodies as JAX writes them (a Flax LSTM: ``nn.RNN`` over ``OptimizedLSTMCell``): what they compute,
checked against a float64 loop, and their specialized steps against the ops' own forwards, bit for bit.

The body reads its weights from the loop's state, multiplies the hidden state and the step's input by
them, and its gates (sigmoid and tanh of sums of the two products' slices, with the old cell state) fuse
into elementwise programs of up to seven inputs on 1 x H: small calls, where what a step costs is its
Python (kuiper/numba_kernels/elementwise.py, ``_small_call``).
"""

from __future__ import annotations

import numpy as np
import pytest

import kuiper

STEPS, INPUT, HIDDEN = 6, 8, 16


def _lstm_hlo() -> str:
    """An LSTM over STEPS steps, the state (step, h, c, xs, w_h, w_x, b) carried through a while loop."""
    h, g, four = f"f32[1,{HIDDEN}]", f"f32[1,{4 * HIDDEN}]", 4 * HIDDEN
    state = f"(s32[], {h}, {h}, f32[{STEPS},1,{INPUT}], f32[{HIDDEN},{four}], f32[{INPUT},{four}], f32[1,{four}])"

    def gate(name, k):
        return (f"  {name}.h = {h} slice(zh), slice={{[0:1], [{k * HIDDEN}:{(k + 1) * HIDDEN}]}}\n"
                f"  {name}.x = {h} slice(zx), slice={{[0:1], [{k * HIDDEN}:{(k + 1) * HIDDEN}]}}\n"
                f"  {name} = {h} add({name}.h, {name}.x)\n")

    def sigmoid(name, of):
        return (f"  {name}.neg = {h} negate({of})\n  {name}.exp = {h} exponential({name}.neg)\n"
                f"  {name}.den = {h} add({name}.exp, one)\n  {name} = {h} divide(one, {name}.den)\n")

    return f"""HloModule lstm

body {{
  s = {state} parameter(0)
  t = s32[] get-tuple-element(s), index=0
  hp = {h} get-tuple-element(s), index=1
  cp = {h} get-tuple-element(s), index=2
  xs = f32[{STEPS},1,{INPUT}] get-tuple-element(s), index=3
  wh = f32[{HIDDEN},{four}] get-tuple-element(s), index=4
  wx = f32[{INPUT},{four}] get-tuple-element(s), index=5
  b = f32[1,{four}] get-tuple-element(s), index=6
  zero = s32[] constant(0)
  x3 = f32[1,1,{INPUT}] dynamic-slice(xs, t, zero, zero), dynamic_slice_sizes={{1,1,{INPUT}}}
  x = f32[1,{INPUT}] reshape(x3)
  dh = {g} dot(hp, wh), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  zh = {g} add(dh, b)
  zx = {g} dot(x, wx), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  c1 = f32[] constant(1)
  one = {h} broadcast(c1), dimensions={{}}
{gate("i", 0)}{gate("f", 1)}{gate("g", 2)}{gate("o", 3)}{sigmoid("si", "i")}{sigmoid("sf", "f")}{sigmoid("so", "o")}  tg = {h} tanh(g)
  keep = {h} multiply(sf, cp)
  new = {h} multiply(si, tg)
  c = {h} add(keep, new)
  tc = {h} tanh(c)
  hn = {h} multiply(so, tc)
  step = s32[] constant(1)
  tn = s32[] add(t, step)
  ROOT r = {state} tuple(tn, hn, c, xs, wh, wx, b)
}}

condition {{
  s = {state} parameter(0)
  t = s32[] get-tuple-element(s), index=0
  n = s32[] constant({STEPS})
  ROOT lt = pred[] compare(t, n), direction=LT
}}

ENTRY main {{
  xs = f32[{STEPS},1,{INPUT}] parameter(0)
  wh = f32[{HIDDEN},{four}] parameter(1)
  wx = f32[{INPUT},{four}] parameter(2)
  b = f32[1,{four}] parameter(3)
  t0 = s32[] constant(0)
  z = f32[] constant(0)
  h0 = {h} broadcast(z), dimensions={{}}
  init = {state} tuple(t0, h0, h0, xs, wh, wx, b)
  loop = {state} while(init), condition=condition, body=body
  ROOT h = {h} get-tuple-element(loop), index=1
}}
"""


def _lstm64(xs, wh, wx, b):
    xs, wh, wx, b = (v.astype(np.float64) for v in (xs, wh, wx, b))
    sigmoid = lambda v: 1.0 / (1.0 + np.exp(-v))
    h = c = np.zeros((1, HIDDEN))
    for t in range(STEPS):
        z = h @ wh + b + xs[t] @ wx
        i, f, g, o = (z[:, k * HIDDEN:(k + 1) * HIDDEN] for k in range(4))
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
    return h


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(np.float32) * scale for shape, scale in
            (((STEPS, 1, INPUT), 1.0), ((HIDDEN, 4 * HIDDEN), 0.3), ((INPUT, 4 * HIDDEN), 0.3), ((1, 4 * HIDDEN), 0.1))]


def _body(model):
    (loop,) = [step.op for step in model.steps if step.node.type == "While"]
    return loop.body


def test_an_lstm_loop_computes_what_a_float64_loop_computes():
    model = kuiper.load_hlo(_lstm_hlo(), backend="numpy")
    inputs = _inputs()
    for _ in range(2):  # the first call specializes the body's steps, the second runs them
        np.testing.assert_allclose(model(*inputs), _lstm64(*inputs), rtol=2e-5, atol=2e-6)


def test_an_lstm_bodys_steps_match_a_build_that_never_specializes(monkeypatch):
    fast = kuiper.load_hlo(_lstm_hlo(), backend="numpy")
    monkeypatch.setenv("KUIPER_SPECIALIZE", "0")
    plain = kuiper.load_hlo(_lstm_hlo(), backend="numpy")
    for seed in (0, 1, 0):
        inputs = _inputs(seed)
        np.testing.assert_array_equal(fast(*inputs), plain(*inputs))
    assert _body(plain).plan.specialized_count() == 0
    assert _body(fast).plan.specialized_count() >= 8


def test_the_gates_of_an_lstm_body_run_as_small_interpreter_calls():
    pytest.importorskip("numba")
    model = kuiper.load_hlo(_lstm_hlo(), backend="numpy")
    model(*_inputs())
    body = _body(model)
    small = [step.node.name for step, entry in zip(body.plan.steps, body.plan.entries)
             if getattr(entry[0], "__qualname__", "").endswith("specialized.<locals>.small")]
    inputs = {step.node.name: len(step.input_slots) for step in body.plan.steps}
    assert small and max(inputs[name] for name in small) > 4, (small, inputs)
