"""``Sequence`` (kuiper/onednn/sequence.py) and ``Convolution.emit``/``sequence_for``: primitive calls over
planned buffers must give exactly what ``Convolution.__call__`` gives, for every input kind a convolution
emits (plain read as it is, plain reordered in, Blocked, a residual, a plain or Blocked output), refuse
what it does not emit, reuse dead buffers and take over a dead residual's buffer instead of copying it."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from kuiper import onednn
from kuiper.onednn import conv as onednn_conv
from kuiper.onednn import primitives
from kuiper.onednn.sequence import SequenceBuilder

pytestmark = pytest.mark.skipif(not onednn.available(), reason=onednn.describe())

RNG = np.random.default_rng(3)


def _conv(in_channels, out_channels, kernel=3, post_ops=()):
    weight = (RNG.standard_normal((out_channels, in_channels, kernel, kernel)) / 4).astype(np.float32)
    bias = RNG.standard_normal(out_channels).astype(np.float32)
    pad = kernel // 2
    return onednn.Convolution(onednn.library(), weight, bias, (1, 1), (1, 1), ((pad, pad), (pad, pad)), 1, post_ops)


def _same(got, want):
    assert type(got) is type(want)
    if isinstance(want, onednn.Blocked):
        assert got.layout is want.layout and got.shape == want.shape
        got, want = got.buffer, want.buffer
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("blocked_out", [False, True], ids=["plain out", "blocked out"])
@pytest.mark.parametrize("small", [False, True], ids=["reordered in", "plain kernel"])
def test_a_sequence_gives_what_the_call_gives_on_plain_inputs(blocked_out, small, monkeypatch):
    if not small:
        monkeypatch.setattr(onednn_conv, "PLAIN_CONV_WORK", 0)  # the blocked kernels, with a reorder in
    conv = _conv(16, 24)
    x = RNG.standard_normal((2, 16, 12, 12)).astype(np.float32)
    conv(x, 2, blocked=blocked_out)  # the plan for this input is made by a call
    call = conv.sequence_for(x, 2, blocked=blocked_out)
    assert call is not None
    for _ in range(2):
        other = RNG.standard_normal(x.shape).astype(np.float32)
        _same(call(other), conv(other, 2, blocked=blocked_out))


@pytest.mark.parametrize("case", ["plain residual, plain kernel", "blocked residual, blocked kernel"])
def test_a_sequence_adds_a_residual_without_writing_it(case, monkeypatch):
    blocked = case.startswith("blocked")
    if blocked:
        monkeypatch.setattr(onednn_conv, "PLAIN_CONV_WORK", 0)
    first = _conv(8, 16)
    add_relu = _conv(16, 16, post_ops=(("sum",), ("eltwise_relu", 0.0, 0.0)))
    x = first(RNG.standard_normal((1, 8, 10, 10)).astype(np.float32), 2, blocked=blocked)
    residual = first(RNG.standard_normal((1, 8, 10, 10)).astype(np.float32), 2, blocked=blocked)
    assert isinstance(x, onednn.Blocked) == blocked
    want = add_relu(x, 2, residual=residual, blocked=blocked)
    call = add_relu.sequence_for(x, 2, residual=residual, blocked=blocked)
    assert call is not None
    kept = np.array(residual.buffer if blocked else residual, copy=True)
    _same(call(x, residual), want)
    np.testing.assert_array_equal(residual.buffer if blocked else residual, kept)
    if blocked:  # a plain residual is reordered into the blocked output, where the sum finds it
        plain_residual = np.asarray(residual)
        call = add_relu.sequence_for(x, 2, residual=plain_residual, blocked=True)
        _same(call(x, plain_residual), add_relu(x, 2, residual=plain_residual, blocked=True))


def test_nothing_is_emitted_before_a_call_nor_for_views_and_other_dtypes(monkeypatch):
    monkeypatch.setattr(onednn_conv, "PLAIN_CONV_WORK", 0)
    conv = _conv(16, 16)
    x = RNG.standard_normal((1, 16, 12, 12)).astype(np.float32)
    assert conv.sequence_for(x, 2) is None  # no plan yet
    conv(x, 2)
    assert conv.sequence_for(x[:, :, ::-1], 2) is None  # a view with other strides: __call__ reads it
    assert conv.sequence_for(x.astype(np.float64), 2) is None


@pytest.mark.parametrize("residual_in_another_layout", [False, True])
def test_a_blocked_input_and_a_residual_in_other_layouts_are_reordered_in_the_sequence(residual_in_another_layout,
                                                                                       monkeypatch):
    monkeypatch.setattr(onednn_conv, "PLAIN_CONV_WORK", 0)
    library = onednn.library()
    conv = _conv(16, 16, post_ops=(("sum",),))
    x = RNG.standard_normal((1, 16, 12, 12)).astype(np.float32)
    residual = RNG.standard_normal((1, 16, 12, 12)).astype(np.float32)

    def plain_blocked(value):  # a Blocked tensor whose layout is plain NCHW: not the layout the kernel reads
        return onednn.Blocked(library, value.shape, primitives.Layout.plain(library, value.shape),
                              np.ascontiguousarray(value).reshape(-1))

    given_residual = plain_blocked(residual) if residual_in_another_layout else residual
    want = conv(plain_blocked(x), 2, residual=given_residual, blocked=True)
    call = conv.sequence_for(plain_blocked(x), 2, residual=given_residual, blocked=True)
    assert call is not None
    _same(call(plain_blocked(x), given_residual), want)
    np.testing.assert_array_equal(np.asarray(call(plain_blocked(x), given_residual)),
                                  np.asarray(conv(x, 2, residual=residual)))


def _chain(convs, x, threads=1):
    """Three convolutions, the last adding the first's output (a residual), as the ops would run them op by
    op and as one sequence."""
    first, second, third = convs
    a = first(x, threads, blocked=True)
    b = second(a, threads, blocked=True)
    want = third(b, threads, residual=a)
    builder = SequenceBuilder(onednn.library())
    x_value = builder.input()
    a_value, a_layout = first.emit(builder, x_value, None, x.shape, threads, blocked=True)
    b_value, b_layout = second.emit(builder, a_value, a_layout, a.shape, threads, blocked=True)
    out, _ = third.emit(builder, b_value, b_layout, b.shape, threads, a_value, a_layout)
    return builder, out, want


def test_a_sequence_of_three_convolutions_runs_as_they_run_one_by_one(monkeypatch):
    monkeypatch.setattr(onednn_conv, "PLAIN_CONV_WORK", 0)
    convs = (_conv(8, 16), _conv(16, 16), _conv(16, 16, post_ops=(("sum",), ("eltwise_relu", 0.0, 0.0))))
    x = RNG.standard_normal((1, 8, 12, 12)).astype(np.float32)
    builder, out, want = _chain(convs, x)
    sequence = builder.build([out])
    for _ in range(2):
        (got,) = sequence(x)
        np.testing.assert_array_equal(got.reshape(want.shape), want)
    # The residual (the first conv's output) is dead once the third conv's output starts as it (that output
    # is reordered to the plain one the sequence returns): the sum takes its buffer over, no copy is made.
    assert all(hasattr(step, "primitive") for step in sequence.steps)
    other = RNG.standard_normal(x.shape).astype(np.float32)
    _, _, want_other = _chain(convs, other)
    np.testing.assert_array_equal(sequence(other)[0].reshape(want_other.shape), want_other)


@pytest.mark.parametrize("channels, size, threads", [(16, 12, 1), (32, 20, 2), (64, 10, 2)])
def test_a_residual_after_an_activation_is_a_binary_operand_in_the_sequence(channels, size, threads, monkeypatch):
    """x + SiLU(conv(x)) (YOLOv5's bottleneck): the residual goes in as the binary add post-op's operand, in the
    blocked layout the chain keeps, so the sequence is three convolutions and nothing else (no reorder to
    channels-last and back, no copy), and gives exactly what the ops give one by one.  The output never shares
    the residual's buffer: oneDNN may keep partial sums in it (with it written over the residual, every element
    of the 32-channel case came out wrong)."""
    monkeypatch.setattr(onednn_conv, "PLAIN_CONV_WORK", 0)
    convs = (_conv(8, channels), _conv(channels, channels),
             _conv(channels, channels, post_ops=(("eltwise_swish", 1.0, 0.0), ("sum",))))
    x = RNG.standard_normal((2, 8, size, size)).astype(np.float32)
    builder, out, want = _chain(convs, x, threads)
    sequence = builder.build([out])
    primitives_run = [step.primitive for step in sequence.steps if hasattr(step, "primitive")]
    assert len(primitives_run) == len(sequence.steps)  # no copy step
    planned = [conv.plan(shape, threads, plain_io=False).convolution
               for conv, shape in zip(convs, [x.shape] + [(2, channels, size, size)] * 2)]
    first = primitives_run.index(planned[0])
    assert primitives_run[first:first + 3] == planned  # no reorder between them: the only others are at the ends
    assert convs[2].plan((2, channels, size, size), threads, plain_io=False).residual_argument is not None
    for _ in range(2):
        (got,) = sequence(x)
        np.testing.assert_array_equal(got.reshape(want.shape), want)


def test_a_residual_read_later_is_copied_and_kept(monkeypatch):
    monkeypatch.setattr(onednn_conv, "PLAIN_CONV_WORK", 0)
    convs = (_conv(8, 16), _conv(16, 16), _conv(16, 16, post_ops=(("sum",), ("eltwise_relu", 0.0, 0.0))))
    x = RNG.standard_normal((1, 8, 12, 12)).astype(np.float32)
    builder, out, want = _chain(convs, x)
    a_value = 1 if builder.steps[0].values.get(17) == 1 else 2  # the first conv's output
    sequence = builder.build([out, a_value])  # the caller reads the residual too
    assert [step for step in sequence.steps if not hasattr(step, "primitive")]  # a copy step
    got, residual = sequence(x)
    np.testing.assert_array_equal(got.reshape(want.shape), want)
    first = convs[0](x, 1, blocked=True)
    np.testing.assert_array_equal(residual[:first.buffer.size], first.buffer)


def test_a_dead_residual_lends_its_buffer_and_dead_values_lend_theirs(monkeypatch):
    monkeypatch.setattr(onednn_conv, "PLAIN_CONV_WORK", 0)
    convs = (_conv(8, 16), _conv(16, 16), _conv(16, 16, post_ops=(("sum",), ("eltwise_relu", 0.0, 0.0))))
    last = _conv(16, 16)
    x = RNG.standard_normal((1, 8, 12, 12)).astype(np.float32)
    # The residual sum's output stays inside (blocked), and a fourth conv reads it: now the sum's output
    # may take over the residual's buffer.
    first, second, third = convs
    a = first(x, 1, blocked=True)
    b = second(a, 1, blocked=True)
    c = third(b, 1, residual=a, blocked=True)
    want = last(c, 1)
    builder = SequenceBuilder(onednn.library())
    x_value = builder.input()
    a_value, a_layout = first.emit(builder, x_value, None, x.shape, 1, blocked=True)
    b_value, b_layout = second.emit(builder, a_value, a_layout, a.shape, 1, blocked=True)
    c_value, c_layout = third.emit(builder, b_value, b_layout, b.shape, 1, a_value, a_layout, blocked=True)
    out, _ = last.emit(builder, c_value, c_layout, c.shape, 1)
    sequence = builder.build([out])
    assert sequence.buffer_of[c_value] == sequence.buffer_of[a_value]  # c took a's buffer over: no copy
    assert all(hasattr(step, "primitive") for step in sequence.steps)
    # a (then c) and b are the only values alive at once inside: two planned buffers, not three
    assert len(sequence.sizes) == 2
    np.testing.assert_array_equal(sequence(x)[0].reshape(want.shape), want)


def test_one_sequence_runs_in_several_threads_at_once(monkeypatch):
    monkeypatch.setattr(onednn_conv, "PLAIN_CONV_WORK", 0)
    conv = _conv(16, 32)
    inputs = [RNG.standard_normal((1, 16, 20, 20)).astype(np.float32) for _ in range(4)]
    conv(inputs[0], 1)
    call = conv.sequence_for(inputs[0], 1)
    wanted = [conv(x, 1) for x in inputs]
    got: dict = {}

    def run(index):
        for _ in range(20):
            got[index] = call(inputs[index])

    threads = [threading.Thread(target=run, args=(index,)) for index in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for index, want in enumerate(wanted):
        _same(got[index], want)


def test_sequences_share_one_arena_and_follow_it_when_it_grows(monkeypatch):
    """A thread's sequences share its planned buffers (their values live only while one runs): the arena
    holds what the largest needs, not the sum, and a sequence whose buffers the arena replaced to grow
    them points its memory objects again before it runs."""
    from kuiper.onednn import sequence as sequence_module

    monkeypatch.setattr(sequence_module, "_arena", sequence_module._Arena())  # this test's own
    monkeypatch.setattr(onednn_conv, "PLAIN_CONV_WORK", 0)
    convs = (_conv(8, 16), _conv(16, 16), _conv(16, 16, post_ops=(("sum",), ("eltwise_relu", 0.0, 0.0))))
    small = RNG.standard_normal((1, 8, 8, 8)).astype(np.float32)
    large = RNG.standard_normal((2, 8, 20, 20)).astype(np.float32)
    small_builder, small_out, small_want = _chain(convs, small)
    first = small_builder.build([small_out])
    np.testing.assert_array_equal(first(small)[0].reshape(small_want.shape), small_want)
    held = sequence_module.arena_bytes()
    large_builder, large_out, large_want = _chain(convs, large)
    second = large_builder.build([large_out])
    np.testing.assert_array_equal(second(large)[0].reshape(large_want.shape), large_want)
    assert sequence_module._arena.generation >= 1  # the small sequence's buffers were replaced by larger ones
    assert sequence_module.arena_bytes() < held + second.planned_bytes  # shared, not added
    for _ in range(2):  # the small one runs on the grown buffers, and both keep giving the same numbers
        np.testing.assert_array_equal(first(small)[0].reshape(small_want.shape), small_want)
        np.testing.assert_array_equal(second(large)[0].reshape(large_want.shape), large_want)


def test_release_arena_frees_the_buffers_now_and_later_calls_plan_them_again(monkeypatch):
    """``onednn.release_arena`` (ONNX Runtime's arena shrinkage): this thread's buffers, and what its
    sequences pointed at them, are freed at once; the next call plans them again and computes the same."""
    import gc
    import weakref

    from kuiper.onednn import sequence as sequence_module

    monkeypatch.setattr(sequence_module, "_arena", sequence_module._Arena())  # this test's own
    monkeypatch.setattr(onednn_conv, "PLAIN_CONV_WORK", 0)
    # A residual the caller reads too: the sum's output starts as a copy of it, a step that holds its buffer.
    convs = (_conv(8, 16), _conv(16, 16), _conv(16, 16, post_ops=(("sum",), ("eltwise_relu", 0.0, 0.0))))
    x = RNG.standard_normal((2, 8, 12, 12)).astype(np.float32)
    builder, out, want = _chain(convs, x)
    a_value = 1 if builder.steps[0].values.get(17) == 1 else 2  # the first conv's output
    run = builder.build([out, a_value])
    assert [step for step in run.steps if not hasattr(step, "primitive")]  # a copy step
    np.testing.assert_array_equal(run(x)[0].reshape(want.shape), want)
    held = onednn.arena_bytes()
    buffers = [weakref.ref(buffer) for buffer in sequence_module._arena.buffers]
    assert held > 0 and buffers
    assert onednn.release_arena() == held
    gc.collect()
    assert onednn.arena_bytes() == 0 and all(buffer() is None for buffer in buffers)  # freed, not just unlisted
    np.testing.assert_array_equal(run(x)[0].reshape(want.shape), want)
    assert onednn.arena_bytes() == held


@pytest.mark.parametrize("with_bias", [False, True], ids=["no bias", "bias"])
@pytest.mark.parametrize("weight_kind", ["row-major", "transposed view"])
@pytest.mark.parametrize("x_kind", ["plain", "blocked"])
def test_a_weight_input_sequence_gives_what_the_call_with_that_weight_gives(x_kind, weight_kind, with_bias, monkeypatch):
    """A call's own weight (and bias), as JAX passes them: the sequence reorders the weight from its memory (a
    transposed HWIO view read by its strides) into the kernel's layout, and gives __call__'s bits."""
    monkeypatch.setattr(onednn_conv, "PLAIN_CONV_WORK", 0)  # the blocked kernels: the weight is reordered
    conv = _conv(16, 24)
    x = RNG.standard_normal((1, 16, 12, 12)).astype(np.float32)
    if x_kind == "blocked":
        x = _conv(16, 16)(x, 2, blocked=True)

    def weight_and_bias():
        hwio = (RNG.standard_normal((3, 3, 16, 24)) / 4).astype(np.float32)
        weight = hwio.transpose(3, 2, 0, 1) if weight_kind == "transposed view" else np.ascontiguousarray(
            hwio.transpose(3, 2, 0, 1))
        return weight, RNG.standard_normal(24).astype(np.float32) if with_bias else None

    weight, bias = weight_and_bias()
    conv(x, 2, weight=weight, bias=bias, blocked=True)  # the plan for this input is made by a call
    layout, memory = conv.weight_memory(weight)
    assert (layout == conv.weight_layouts.given_layout) == (weight_kind == "row-major")
    call = conv.weight_input_sequence_for(x, layout, with_bias, 2, blocked=True)
    assert call is not None
    for _ in range(2):  # new values each call: nothing of the first weight is kept
        weight, bias = weight_and_bias()
        _, memory = conv.weight_memory(weight)
        got = call(x, memory) if bias is None else call(x, memory, bias)
        _same(got, conv(x, 2, weight=weight, bias=bias, blocked=True))
