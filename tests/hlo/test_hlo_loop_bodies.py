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
    """An LSTM over STEPS steps, the state (step, h, c, xs, w_h, w_x, b, hs) carried through a while loop;
    each step's h is written into hs, the program's result, as ``nn.RNN`` writes its outputs."""
    h, g, four = f"f32[1,{HIDDEN}]", f"f32[1,{4 * HIDDEN}]", 4 * HIDDEN
    hs = f"f32[{STEPS},1,{HIDDEN}]"
    state = f"(s32[], {h}, {h}, f32[{STEPS},1,{INPUT}], f32[{HIDDEN},{four}], f32[{INPUT},{four}], f32[1,{four}], {hs})"

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
  ys = {hs} get-tuple-element(s), index=7
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
  hn3 = f32[1,1,{HIDDEN}] reshape(hn)
  yn = {hs} dynamic-update-slice(ys, hn3, t, zero, zero)
  step = s32[] constant(1)
  tn = s32[] add(t, step)
  ROOT r = {state} tuple(tn, hn, c, xs, wh, wx, b, yn)
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
  ys0 = {hs} broadcast(z), dimensions={{}}
  init = {state} tuple(t0, h0, h0, xs, wh, wx, b, ys0)
  loop = {state} while(init), condition=condition, body=body
  ROOT hs = {hs} get-tuple-element(loop), index=7
}}
"""


def _lstm64(xs, wh, wx, b):
    xs, wh, wx, b = (v.astype(np.float64) for v in (xs, wh, wx, b))
    sigmoid = lambda v: 1.0 / (1.0 + np.exp(-v))
    h = c = np.zeros((1, HIDDEN))
    hs = np.zeros((STEPS, 1, HIDDEN))
    for t in range(STEPS):
        z = h @ wh + b + xs[t] @ wx
        i, f, g, o = (z[:, k * HIDDEN:(k + 1) * HIDDEN] for k in range(4))
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
        hs[t] = h
    return hs


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
    from kuiper.numba_kernels import runtime

    if not runtime.available():
        pytest.skip(f"the compiled kernels are off: {runtime.availability()[1]}")
    model = kuiper.load_hlo(_lstm_hlo(), backend="numpy")
    model(*_inputs())
    body = _body(model)
    small = [step.node.name for step, entry in zip(body.plan.steps, body.plan.entries)
             if getattr(entry[0], "__qualname__", "").endswith("specialized.<locals>.small")]
    inputs = {step.node.name: len(step.input_slots) for step in body.plan.steps}
    assert small and max(inputs[name] for name in small) > 4, (small, inputs)


COUNTED_THEN_WHILE = """HloModule loops

max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}

count_body {
  s = (s32[], f32[4,8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  h = f32[4,8] get-tuple-element(s), index=1
  one = s32[] constant(1)
  next = s32[] add(i, one)
  k = f32[] constant(1.5)
  ks = f32[4,8] broadcast(k), dimensions={}
  scaled = f32[4,8] multiply(h, ks)
  ROOT r = (s32[], f32[4,8]) tuple(next, scaled)
}

count_condition {
  s = (s32[], f32[4,8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}

halve_body {
  h = f32[4,8] parameter(0)
  half = f32[] constant(0.5)
  halves = f32[4,8] broadcast(half), dimensions={}
  ROOT r = f32[4,8] multiply(h, halves)
}

halve_condition {
  h = f32[4,8] parameter(0)
  a = f32[4,8] abs(h)
  low = f32[] constant(-inf)
  m = f32[] reduce(a, low), dimensions={0,1}, to_apply=max
  tol = f32[] constant(0.05)
  ROOT gt = pred[] compare(m, tol), direction=GT
}

ENTRY main {
  x = f32[4,8] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[4,8]) tuple(zero, x)
  counted = (s32[], f32[4,8]) while(init), condition=count_condition, body=count_body
  h = f32[4,8] get-tuple-element(counted), index=1
  ROOT halved = f32[4,8] while(h), condition=halve_condition, body=halve_body
}
"""


def _counted_then_halved(x):
    """The program above in NumPy, exactly: products by 1.5 and 0.5 and a max of magnitudes."""
    for _ in range(5):
        x = x * np.float32(1.5)
    while np.max(np.abs(x)) > np.float32(0.05):
        x = x * np.float32(0.5)
    return x


def _loops(model):
    return [step.op for step in model.steps if step.node.type == "While"]


def test_a_counted_loop_and_a_reduce_condition_give_the_forwards_bits_from_specialized_steps(monkeypatch):
    fast = kuiper.load_hlo(COUNTED_THEN_WHILE, backend="numpy")
    monkeypatch.setenv("KUIPER_SPECIALIZE", "0")
    plain = kuiper.load_hlo(COUNTED_THEN_WHILE, backend="numpy")
    rng = np.random.default_rng(3)
    for scale in (1.0, 100.0, 1.0):
        x = rng.standard_normal((4, 8)).astype(np.float32) * np.float32(scale)
        got = fast(x)
        np.testing.assert_array_equal(got, plain(x))
        np.testing.assert_array_equal(got, _counted_then_halved(x))
    counted, halved = _loops(fast)
    # The counter's add, its compare, and the condition's reduce and compare run specialized forwards.
    for sub_graph in (counted.body, counted.condition, halved.condition):
        for step, entry in zip(sub_graph.plan.steps, sub_graph.plan.entries):
            if step.node.type in ("kuiper.Elementwise", "Elementwise", "Reduce"):
                assert getattr(entry[0], "__self__", None) is not step.op, step.node.name


def test_a_specialized_0_d_step_or_reduce_hands_other_inputs_to_the_forward():
    model = kuiper.load_hlo(COUNTED_THEN_WHILE, backend="numpy")
    model(np.ones((4, 8), np.float32))
    counted, halved = _loops(model)
    (add,) = [(entry[0], step.op) for step, entry in zip(counted.body.plan.steps, counted.body.plan.entries)
              if step.node.name.endswith("next")]
    fast, op = add
    for value in (np.int32(7).reshape(()), np.arange(3, dtype=np.int32), np.int64(7).reshape(())):
        got, want = fast(value), op.forward(value)
        assert type(got) is type(want) is np.ndarray and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    (reduce,) = [(entry[0], step.op) for step, entry in zip(halved.condition.plan.steps, halved.condition.plan.entries)
                 if step.node.type == "Reduce"]
    fast, op = reduce
    low = np.float32(-np.inf).reshape(())
    rng = np.random.default_rng(4)
    for value in (rng.standard_normal((4, 8)).astype(np.float32), rng.standard_normal((2, 3)).astype(np.float32),
                  np.full((4, 8), np.nan, np.float32), rng.standard_normal((4, 8))):
        init = low.astype(value.dtype)
        got, want = fast(value, init), op.forward(value, init)
        assert type(got) is type(want) is np.ndarray and got.dtype == want.dtype and got.shape == ()
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got, np.max(value))


def test_a_loop_started_from_a_broadcast_carries_dense_state_from_its_first_iteration():
    """JAX's zeros initial carry is a broadcast (a view with zero strides here): the loop copies it once
    into an array of its own, so the first iteration's product runs on BLAS like every later one."""
    model = kuiper.load_hlo(_lstm_hlo(), backend="numpy")
    inputs = _inputs()
    model(*inputs)
    body = _body(model)
    seen = []
    run = body.plan.run

    def recording(slots):
        seen.append([tuple(slots[slot].strides) for slot in (*body.input_slots[1:3], body.input_slots[7])])  # h, c, hs
        run(slots)

    body.plan.run = recording
    np.testing.assert_allclose(model(*inputs), _lstm64(*inputs), rtol=2e-5, atol=2e-6)
    assert len(seen) == STEPS and all(0 not in strides for strides in seen[0])


def test_specialized_dynamic_slices_clamp_and_hand_other_shapes_to_the_forward():
    model = kuiper.load_hlo(_lstm_hlo(), backend="numpy")
    model(*_inputs())
    body = _body(model)
    entries = {step.node.type: (entry[0], step.op) for step, entry in zip(body.plan.steps, body.plan.entries)}
    rng = np.random.default_rng(5)
    xs = rng.standard_normal((STEPS, 1, INPUT)).astype(np.float32)
    ys = rng.standard_normal((STEPS, 1, HIDDEN)).astype(np.float32)
    update = rng.standard_normal((1, 1, HIDDEN)).astype(np.float32)
    index = lambda i: np.int32(i).reshape(())
    read, read_op = entries["DynamicSlice"]
    write, write_op = entries["DynamicUpdateSlice"]
    assert getattr(read, "__self__", None) is not read_op and getattr(write, "__self__", None) is not write_op
    for t in (0, 3, STEPS - 1, STEPS + 4, -2):  # in range, past the end and below 0: clamped
        starts = (index(t), index(0), index(0))
        got, want = read(xs, *starts), read_op.forward(xs, *starts)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got, xs[min(max(t, 0), STEPS - 1)][None])
        expected = ys.copy()
        expected[min(max(t, 0), STEPS - 1)] = update[0]
        # The loop lent ys to the write (its loop owns it): written in place where it is writeable ...
        given = ys.copy()
        got = write(given, update, *starts)
        assert got is given
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(write_op.forward(ys.copy(), update, *starts), expected)
        # ... and copied where it is not (a weight mapped from a file, a broadcast).
        frozen = ys.copy()
        frozen.flags.writeable = False
        got = write(frozen, update, *starts)
        assert got is not frozen and not np.shares_memory(got, frozen)
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(frozen, ys)
    # Other shapes: the forward's answers.
    longer = rng.standard_normal((STEPS + 3, 1, INPUT)).astype(np.float32)
    starts = (index(STEPS + 1), index(0), index(0))
    np.testing.assert_array_equal(read(longer, *starts), longer[STEPS + 1][None])
    wider = rng.standard_normal((STEPS, 1, 2 * HIDDEN)).astype(np.float32)
    np.testing.assert_array_equal(write(wider.copy(), update, *starts), write_op.forward(wider.copy(), update, *starts))


def test_a_scans_output_buffer_is_written_in_place_and_the_callers_arrays_never():
    """The body returns hs (written by dynamic-update-slice) at its own position: the loop copies the
    initial hs once and its body overwrites that copy at every step, never the caller's array."""
    text = _lstm_hlo().replace(f"  ys0 = f32[{STEPS},1,{HIDDEN}] broadcast(z), dimensions={{}}",
                               f"  ys0 = f32[{STEPS},1,{HIDDEN}] parameter(4)")
    model = kuiper.load_hlo(text, backend="numpy")
    body = _body(model)
    assert 7 in body.owned_inputs
    (write,) = [step.op for step in body.plan.steps if step.node.type == "DynamicUpdateSlice"]
    assert write.donated_inputs == {0}
    inputs = _inputs()
    initial = np.full((STEPS, 1, HIDDEN), 7.0, np.float32)
    kept = initial.copy()
    seen = []
    run = body.plan.run

    def recording(slots):
        seen.append(slots[body.input_slots[7]])
        run(slots)

    body.plan.run = recording
    for _ in range(2):
        seen.clear()
        got = model(*inputs, initial)
        np.testing.assert_allclose(got, _lstm64(*inputs), rtol=2e-5, atol=2e-6)
        np.testing.assert_array_equal(initial, kept)  # the caller's array, untouched
        assert all(buffer is seen[0] for buffer in seen) and got is seen[0]  # one buffer, written in place
