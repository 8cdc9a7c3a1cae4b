"""Memory plans (kuiper/graph/memory_plan.py): a warm call takes its values' buffers from one arena made
once, so it allocates little beyond the arrays it returns, and computes what an unplanned call computes.

A model's first call specializes its steps, its second records the plan, and the calls after it run
planned: these tests call each model four times or more.
"""

import os
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kuiper
from kuiper.graph.memory_plan import ALIGNMENT, MemoryPlan, Recorder, _Request, place

from conftest import MODELS, reference_batches

FIXTURE_NAMES = sorted(p.name for p in MODELS.iterdir() if (p / "model.pnnx.param").exists())


def _outputs(result) -> list:
    return [np.asarray(value) for value in (result if isinstance(result, tuple) else (result,))]


def _plans(model) -> list:
    return [plan for plan in model.plan.memory_plans.values() if plan is not None]


def test_every_fixture_gives_the_same_bits_once_its_memory_is_planned():
    """Four calls per batch, the batches interleaved (a plan per feed shape): every call gives the first
    call's bits.  The first call is the one the fixtures' PyTorch references check (test_models.py)."""
    planned = []
    for name in FIXTURE_NAMES:
        model = kuiper.load(MODELS / name / "model.pnnx.param", backend="numpy")
        batches = reference_batches(name)
        first = {batch: _outputs(model(*data["inputs"])) for batch, data in batches.items()}
        for call in range(3):
            for batch, data in batches.items():
                for index, (got, want) in enumerate(zip(_outputs(model(*data["inputs"])), first[batch])):
                    np.testing.assert_array_equal(got, want, err_msg=f"{name} {batch} call {call + 2} output {index}")
        if _plans(model):
            planned.append(name)
    # Not a vacuous pass: the networks' values are planned (most fixtures are a few reference ops whose
    # results are the outputs: nothing to plan there).
    networks = {"resnet18_w8", "mobilenet_v2", "yolov5_style", "unet", "transformer_encoder", "vit_block",
                "swin_block_shifted", "gpt2_kv_prefill", "mobilenet_v3_small"}
    assert networks <= set(planned), sorted(networks - set(planned))


def _step_conv_net(channels: int, size: int, seed: int = 0):
    """An HLO program of constant-weight 3x3 convs, ReLUs, a residual add, a channel join and a 2x2 max pool,
    reduced to one number per channel, and its float64 reference."""
    rng = np.random.default_rng(seed)
    w1, w2 = (rng.standard_normal((channels, channels, 3, 3)) / (3 * channels ** 0.5) for _ in range(2))
    w3 = rng.standard_normal((channels, 2 * channels, 3, 3)) / (3 * (2 * channels) ** 0.5)

    def literal(array):
        if array.ndim == 0:
            return repr(float(np.float32(array)))
        return "{" + ",".join(literal(row) for row in array) + "}"

    c, s, h = channels, size, size // 2
    text = f"""HloModule planned
max_f32 {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}}
add_f32 {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] add(a, b)
}}
ENTRY main {{
  x = f32[1,{c},{s},{s}] parameter(0)
  w1 = f32[{c},{c},3,3] constant({literal(w1)})
  w2 = f32[{c},{c},3,3] constant({literal(w2)})
  w3 = f32[{c},{2 * c},3,3] constant({literal(w3)})
  zero = f32[] constant(0)
  zeros = f32[1,{c},{s},{s}] broadcast(zero), dimensions={{}}
  c1 = f32[1,{c},{s},{s}] convolution(x, w1), window={{size=3x3 pad=1_1x1_1}}, dim_labels=bf01_oi01->bf01
  r1 = f32[1,{c},{s},{s}] maximum(c1, zeros)
  c2 = f32[1,{c},{s},{s}] convolution(r1, w2), window={{size=3x3 pad=1_1x1_1}}, dim_labels=bf01_oi01->bf01
  sum = f32[1,{c},{s},{s}] add(r1, c2)
  joined = f32[1,{2 * c},{s},{s}] concatenate(sum, r1), dimensions={{1}}
  c3 = f32[1,{c},{s},{s}] convolution(joined, w3), window={{size=3x3 pad=1_1x1_1}}, dim_labels=bf01_oi01->bf01
  low = f32[] constant(-inf)
  pooled = f32[1,{c},{h},{h}] reduce-window(c3, low), window={{size=1x1x2x2 stride=1x1x2x2}}, to_apply=max_f32
  ROOT total = f32[1,{c}] reduce(pooled, zero), dimensions={{2,3}}, to_apply=add_f32
}}"""

    def conv(x, w):
        padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        return sum(np.einsum("bchw,oc->bohw", padded[:, :, i:i + x.shape[2], j:j + x.shape[3]], w[:, :, i, j])
                   for i in range(3) for j in range(3))

    def reference(x):
        x = x.astype(np.float64)
        r1 = np.maximum(conv(x, w1.astype(np.float32).astype(np.float64)), 0)
        joined = np.concatenate([r1 + conv(r1, w2.astype(np.float32).astype(np.float64)), r1], axis=1)
        c3 = conv(joined, w3.astype(np.float32).astype(np.float64))
        pooled = c3.reshape(1, c, h, 2, h, 2).max(axis=(3, 5))
        return pooled.sum(axis=(2, 3))

    return text, reference


def _warm_call_peak(model, x) -> int:
    """The most traced memory a call holds at once beyond what it started with."""
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        model(x)
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def test_a_warm_call_holds_no_activation_beyond_its_output(monkeypatch):
    """16 channels of 48 x 48: planned, a warm call's peak is Python's objects and the (16-float) output;
    unplanned, it holds the pooled map too.  Both compute the float64 reference."""
    text, reference = _step_conv_net(16, 48)
    x = np.random.default_rng(1).standard_normal((1, 16, 48, 48)).astype(np.float32)
    planned = kuiper.load_hlo(text, backend="numpy")
    monkeypatch.setenv("KUIPER_MEMORY_PLAN", "0")
    unplanned = kuiper.load_hlo(text, backend="numpy")
    expected = reference(x)
    for _ in range(4):
        for model in (planned, unplanned):
            np.testing.assert_allclose(np.asarray(model(x)), expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())
    assert _plans(planned) and not _plans(unplanned)
    # oneDNN runs the convs to the pool as one partition, whose inner values live in its own arena
    # (onednn/sequence.py); what leaves it, the pooled map, is the plan's.
    pooled = 16 * 24 * 24 * 4
    assert _warm_call_peak(unplanned, x) > pooled  # the measure sees what a plan removes
    assert _warm_call_peak(planned, x) < pooled // 4


def test_a_plan_per_feed_shape_and_threads_each_their_arena():
    import threading

    name = "resnet18_w8"
    model = kuiper.load(MODELS / name / "model.pnnx.param", backend="numpy")
    batches = {batch: data["inputs"] for batch, data in reference_batches(name).items()}
    wanted = {batch: _outputs(model(*inputs)) for batch, inputs in batches.items()}
    failures = []

    def run(batch):
        for _ in range(6):
            for got, want in zip(_outputs(model(*batches[batch])), wanted[batch]):
                if not np.array_equal(got, want):
                    failures.append(batch)

    threads = [threading.Thread(target=run, args=(batch,)) for batch in batches for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
    assert len(model.plan.memory_plans) == len(batches)


def test_outputs_a_caller_keeps_are_not_overwritten_by_the_next_call():
    name = "yolov5_style"
    model = kuiper.load(MODELS / name / "model.pnnx.param", backend="numpy")
    (x,) = next(iter(reference_batches(name).values()))["inputs"]
    kept = [_outputs(model(x)) for _ in range(4)]
    model(np.random.default_rng(3).standard_normal(x.shape).astype(np.float32))
    for outputs in kept[1:]:
        for got, first in zip(outputs, kept[0]):
            np.testing.assert_array_equal(got, first)
    assert _plans(model)


def test_the_switch_turns_planning_off(monkeypatch):
    monkeypatch.setenv("KUIPER_MEMORY_PLAN", "0")
    model = kuiper.load(MODELS / "resnet18_w8" / "model.pnnx.param", backend="numpy")
    x = next(iter(reference_batches("resnet18_w8").values()))["inputs"]
    for _ in range(4):
        model(*x)
    assert not model.plan.memory_plans


# -- the placement and the recording, on their own ----------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 6), st.integers(1, 5000)), min_size=1, max_size=30))
def test_requests_living_at_once_never_share_bytes(spans):
    requests = [_Request(step=start, position=i, shape=(size,), dtype=np.dtype(np.uint8), nbytes=size,
                         last_use=start + length) for i, (start, length, size) in enumerate(spans)]
    size = place(requests)
    for request in requests:
        assert request.offset % ALIGNMENT == 0
        assert request.offset + request.nbytes <= size
    for a in requests:
        for b in requests:
            if a is not b and a.step <= b.last_use and b.step <= a.last_use:
                assert a.offset + a.nbytes <= b.offset or b.offset + b.nbytes <= a.offset, (a, b)
    # Never more than every request side by side, aligned.
    assert size <= sum(-(-r.nbytes // ALIGNMENT) * ALIGNMENT for r in requests)


def test_requests_that_never_meet_share_one_place():
    requests = [_Request(step=i, position=0, shape=(1000,), dtype=np.dtype(np.float32), nbytes=4000, last_use=i)
                for i in range(5)]
    assert place(requests) == 4000
    assert {r.offset for r in requests} == {0}


def test_a_view_keeps_its_buffer_alive_and_an_output_is_never_planned():
    """Slots: 0 the feed; step 0 makes 1 (a request), step 1 reshapes it into 2 (a view), step 2 reads 2
    into 3 (a request), step 3 makes the model output 4 from 3 (returned as it is)."""
    recorder = Recorder(slot_count=5, step_count=4)
    feed = np.ones((4, 4), np.float32)
    made = np.empty((4, 4), np.float32)
    recorder.after_step(0, (0,), (1,), [feed], (made,), [made], plannable=True)
    view = made.reshape(16)
    recorder.after_step(1, (1,), (2,), [made], (view,), [], plannable=True)
    second = np.empty(16, np.float32)
    recorder.after_step(2, (2,), (3,), [view], (second,), [second], plannable=True)
    recorder.after_step(3, (3,), (4,), [second], (second,), [], plannable=True)  # returns its input
    plan = recorder.finish(output_slots=(4,))
    assert [request.step for request in plan.requests] == [0]  # step 2's array is the model's output

    recorder = Recorder(slot_count=5, step_count=4)
    recorder.after_step(0, (0,), (1,), [feed], (made,), [made], plannable=True)
    recorder.after_step(1, (1,), (2,), [made], (view,), [], plannable=True)
    recorder.after_step(2, (2,), (3,), [view], (second,), [second], plannable=True)
    fresh = np.empty(16, np.float32)
    recorder.after_step(3, (3,), (4,), [second], (fresh,), [], plannable=True)
    plan = recorder.finish(output_slots=(4,))
    by_step = {request.step: request for request in plan.requests}
    assert by_step[0].last_use == 2  # read through its view by step 2
    assert by_step[2].last_use == 3
    assert by_step[0].offset + by_step[0].nbytes <= by_step[2].offset or \
        by_step[2].offset + by_step[2].nbytes <= by_step[0].offset


def test_scratch_and_sub_graph_steps_are_not_planned():
    recorder = Recorder(slot_count=3, step_count=2)
    feed = np.ones(8, np.float32)
    scratch, out = np.empty(8, np.float32), np.empty(8, np.float32)
    recorder.after_step(0, (0,), (1,), [feed], (out,), [scratch, out], plannable=True)
    looped = np.empty(8, np.float32)
    recorder.after_step(1, (1,), (2,), [out], (looped,), [looped], plannable=False)
    plan = recorder.finish(output_slots=())
    assert [(r.step, r.position) for r in plan.requests] == [(0, 1)]
    assert plan.offers()[0] == (None, plan.offers()[0][1]) and plan.offers()[1] is None


def test_holds_tells_an_arena_view_from_an_array_of_its_own():
    plan = MemoryPlan([_Request(step=0, position=0, shape=(8,), dtype=np.dtype(np.float32), nbytes=32)], 1)
    (buffer,) = plan.offers()[0]
    assert plan.holds(buffer[2:]) and not plan.holds(np.empty(8, np.float32))


@pytest.mark.skipif(os.environ.get("KUIPER_MEMORY_PLAN") == "0", reason="planning is switched off here")
def test_a_model_called_inside_another_models_op_runs_unplanned():
    """A custom reduction's computation is a Model called from inside an op: it must not take the outer
    step's offer, nor record into the outer recording (output_buffers.offer_state().busy)."""
    from kuiper import output_buffers

    state = output_buffers.offer_state()
    model = kuiper.load(MODELS / "resnet18_w8" / "model.pnnx.param", backend="numpy")
    x = next(iter(reference_batches("resnet18_w8").values()))["inputs"]
    for _ in range(3):
        model(*x)
    state.busy = True
    try:
        want = _outputs(model(*x))
        # A planned call would have run and then cleared the marker (and its offers) on the way out.
        assert state.busy and state.buffers is None and state.recorded is None
    finally:
        state.busy = False
    np.testing.assert_array_equal(_outputs(model(*x))[0], want[0])


def test_a_reshape_that_must_copy_copies_into_the_plan_and_a_view_stays_a_view():
    """(2, 3, 64) moved to (3, 64, 2) and flattened to (3, 128): no view does that, so the specialized
    reshape copies, into the memory plan's buffer; an input laid out otherwise is reshaped by NumPy."""
    text = """HloModule r
ENTRY main {
  x = f32[2,3,64] parameter(0)
  w = f32[128,4] parameter(1)
  t = f32[3,64,2] transpose(x), dimensions={1,2,0}
  r = f32[3,128] reshape(t)
  ROOT d = f32[3,4] dot(r, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"""
    model = kuiper.load_hlo(text, backend="numpy")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 64)).astype(np.float32)
    w = rng.standard_normal((128, 4)).astype(np.float32)
    expected = np.transpose(x, (1, 2, 0)).astype(np.float64).reshape(3, 128) @ w.astype(np.float64)
    for _ in range(4):
        np.testing.assert_allclose(model(x, w), expected, rtol=1e-5, atol=1e-5)
    (plan,) = _plans(model)
    reshape_step = next(i for i, step in enumerate(model.plan.steps) if step.node.type == "Reshape")
    assert [request.step for request in plan.requests] == [reshape_step]
    reshape = model.plan.entries[reshape_step][0]
    contiguous = np.ascontiguousarray(np.transpose(x, (1, 2, 0)))
    assert np.shares_memory(reshape(contiguous), contiguous)  # a layout a view reshapes: a view


def test_a_large_ufunc_step_writes_into_the_plan_and_a_small_one_lets_numpy_allocate():
    """An add whose result has PLANNED_MIN_ELEMENTS or more takes the plan's buffer (the same ufunc, with
    ``out=``); the same add on a small array keeps NumPy's own allocation (a loop body's steps)."""
    from kuiper.output_buffers import PLANNED_MIN_ELEMENTS

    def program(rows):
        return f"""HloModule a
ENTRY main {{
  x = f32[{rows},128] parameter(0)
  y = f32[{rows},128] parameter(1)
  w = f32[128,4] parameter(2)
  s = f32[{rows},128] add(x, y)
  ROOT d = f32[{rows},4] dot(s, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}"""

    rng = np.random.default_rng(0)
    for rows, planned in ((64, True), (2, False)):
        assert (rows * 128 >= PLANNED_MIN_ELEMENTS) == planned
        model = kuiper.load_hlo(program(rows), backend="numpy")
        x, y = (rng.standard_normal((rows, 128)).astype(np.float32) for _ in range(2))
        w = rng.standard_normal((128, 4)).astype(np.float32)
        expected = (x.astype(np.float64) + y) @ w
        for _ in range(4):
            np.testing.assert_allclose(model(x, y, w), expected, rtol=1e-4, atol=1e-4)
        add_step = next(i for i, step in enumerate(model.plan.steps) if step.node.type == "Elementwise")
        steps = {request.step for plan in _plans(model) for request in plan.requests}
        assert (add_step in steps) == planned, (rows, steps)
