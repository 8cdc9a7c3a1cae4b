"""``Convolution.prepared`` and ``BoundCall``: a convolution's call with everything decided once must give
exactly what ``Convolution.__call__`` gives, for every input kind it prepares (plain read as it is, plain
reordered in, Blocked, a residual, a plain or Blocked output), and refuse what it does not prepare."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from kuiper import onednn
from kuiper.onednn import conv as onednn_conv
from kuiper.onednn import primitives

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
def test_a_prepared_call_gives_what_the_call_gives_on_plain_inputs(blocked_out, small, monkeypatch):
    if not small:
        monkeypatch.setattr(onednn_conv, "PLAIN_CONV_WORK", 0)  # the blocked kernels, with a reorder in
    conv = _conv(16, 24)
    x = RNG.standard_normal((2, 16, 12, 12)).astype(np.float32)
    conv(x, 2, blocked=blocked_out)  # the plan for this input is made by a call
    call = conv.prepared(x, 2, blocked=blocked_out)
    assert call is not None
    for _ in range(2):
        other = RNG.standard_normal(x.shape).astype(np.float32)
        _same(call(other), conv(other, 2, blocked=blocked_out))


@pytest.mark.parametrize("case", ["plain residual, plain kernel", "blocked residual, blocked kernel"])
def test_a_prepared_call_adds_a_residual_without_writing_it(case, monkeypatch):
    blocked = case.startswith("blocked")
    if blocked:
        monkeypatch.setattr(onednn_conv, "PLAIN_CONV_WORK", 0)
    first = _conv(8, 16)
    add_relu = _conv(16, 16, post_ops=(("sum",), ("eltwise_relu", 0.0, 0.0)))
    x = first(RNG.standard_normal((1, 8, 10, 10)).astype(np.float32), 2, blocked=blocked)
    residual = first(RNG.standard_normal((1, 8, 10, 10)).astype(np.float32), 2, blocked=blocked)
    assert isinstance(x, onednn.Blocked) == blocked
    want = add_relu(x, 2, residual=residual, blocked=blocked)
    call = add_relu.prepared(x, 2, residual=residual, blocked=blocked)
    assert call is not None
    kept = np.array(residual.buffer if blocked else residual, copy=True)
    _same(call(x, residual), want)
    np.testing.assert_array_equal(residual.buffer if blocked else residual, kept)
    if blocked:  # a plain residual would need a reorder into the blocked output: __call__ does that
        assert add_relu.prepared(x, 2, residual=np.asarray(residual), blocked=True) is None


def test_nothing_is_prepared_before_a_call_or_for_another_layout(monkeypatch):
    monkeypatch.setattr(onednn_conv, "PLAIN_CONV_WORK", 0)
    conv = _conv(16, 16)
    x = RNG.standard_normal((1, 16, 12, 12)).astype(np.float32)
    assert conv.prepared(x, 2) is None  # no plan yet
    conv(x, 2)
    assert conv.prepared(x[:, :, ::-1], 2) is None  # a view with other strides
    assert conv.prepared(x.astype(np.float64), 2) is None
    # a Blocked input in another layout than the plan reads (a 1-D conv's) is reordered by __call__ only
    other = onednn.Convolution(onednn.library(), np.ones((16, 16, 1, 1), np.float32), None, (1, 1), (1, 1),
                               ((0, 0), (0, 0)), 1)
    plain_blocked = onednn.Blocked(onednn.library(), x.shape, primitives.Layout.plain(onednn.library(), x.shape),
                                   np.ascontiguousarray(x).reshape(-1))
    conv(plain_blocked, 2, blocked=True)
    assert conv.prepared(plain_blocked, 2, blocked=True) is None
    del other


def test_a_bound_call_follows_a_scratch_buffer_that_grew_for_another_primitive():
    # Small plain convolutions run oneDNN's GEMM kernel, whose im2col buffer is its scratchpad.
    small, large = _conv(16, 16), _conv(3, 16, kernel=7)
    x, y = (RNG.standard_normal((1, 16, 12, 12)).astype(np.float32),
            RNG.standard_normal((1, 3, 20, 20)).astype(np.float32))
    small(x, 1)
    call = small.prepared(x, 1)
    want = small(x, 1)
    _same(call(x), want)
    bound = next(cell.cell_contents for cell in call.__closure__
                 if isinstance(cell.cell_contents, primitives.BoundCall) and cell.cell_contents.scratch_bytes)
    primitives._scratch.buffer = None  # as a fresh thread starts: the next scratch buffer is a new array
    large(y, 1)
    assert primitives._scratch.buffer.nbytes > bound.scratch_bytes
    _same(call(x), want)
    # its scratchpad's memory object now points at the buffer the thread has, not at the one it had
    assert bound._local.state[2] is primitives._scratch.buffer


def test_one_prepared_call_runs_in_several_threads_at_once(monkeypatch):
    monkeypatch.setattr(onednn_conv, "PLAIN_CONV_WORK", 0)
    conv = _conv(16, 32)
    inputs = [RNG.standard_normal((1, 16, 20, 20)).astype(np.float32) for _ in range(4)]
    conv(inputs[0], 1)
    call = conv.prepared(inputs[0], 1)
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
