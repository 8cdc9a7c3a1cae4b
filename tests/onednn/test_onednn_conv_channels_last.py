"""``Convolution(..., channels_last=True)``: the same output, as a view of an (N, *spatial, C) array.

Every value is the one the row-major call gives, bit for bit (the same convolution; only the reorder out
of its own layout writes elsewhere), for a conv run on plain layouts, one on channels in blocks, a grouped
one, 1-D and 3-D ones, a sum post-op, and the one-call sequence a specialized step runs.
"""

from __future__ import annotations

import numpy as np
import pytest

from kuiper import onednn

pytestmark = pytest.mark.skipif(not onednn.available(), reason=onednn.describe())

RNG = np.random.default_rng(7)


def _conv(out_channels, in_channels, kernel, groups=1, post_ops=()):
    library = onednn.library()
    weight = (RNG.standard_normal((out_channels, in_channels // groups, *kernel)) / 4).astype(np.float32)
    bias = RNG.standard_normal(out_channels).astype(np.float32)
    pads = [(k // 2, k // 2) for k in kernel]
    ones = (1,) * len(kernel)
    return onednn.Convolution(library, weight, bias, ones, ones, pads, groups, post_ops)


def _assert_channels_last(got, want):
    order = (0, *range(2, got.ndim), 1)
    assert got.shape == want.shape and not got.flags.c_contiguous
    assert got.transpose(order).flags.c_contiguous  # (N, *spatial, C) row-major underneath
    assert np.array_equal(got, want)


@pytest.mark.parametrize("case", [
    ((4, 3, (3, 3)), (1, 3, 6, 7)),  # small: plain layouts
    ((24, 24, (3, 3), 24), (2, 24, 12, 13)),  # depthwise, channels in blocks of 16
    ((32, 16, (1, 1)), (1, 16, 20, 20)),
    ((12, 8, (3,)), (2, 8, 30)),  # 1-D
    ((16, 4, (3, 3, 3)), (1, 4, 5, 6, 7)),  # 3-D
])
@pytest.mark.parametrize("threads", [1, 2])
def test_channels_last_output_equals_the_row_major_one(case, threads):
    arguments, shape = case
    conv = _conv(*arguments)
    x = RNG.standard_normal(shape).astype(np.float32)
    want = conv(x, threads)
    assert want.flags.c_contiguous
    _assert_channels_last(conv(x, threads, channels_last=True), want)
    sequence = conv.sequence_for(x, threads, channels_last=True)
    assert sequence is not None
    for _ in range(2):
        _assert_channels_last(sequence(x), want)


def test_a_sum_post_op_and_a_blocked_input_keep_their_values():
    first = _conv(16, 8, (3, 3))
    conv = _conv(16, 16, (3, 3), post_ops=(("sum",),))
    x = RNG.standard_normal((1, 8, 14, 15)).astype(np.float32)
    residual = RNG.standard_normal((1, 16, 14, 15)).astype(np.float32)
    blocked = first(x, 1, blocked=True)
    want = conv(blocked, 1, residual=residual)
    _assert_channels_last(conv(blocked, 1, residual=residual, channels_last=True), want)


def _depthwise64(x, weight, bias):
    """A depthwise 3x3 conv, zero padding 1, in float64."""
    x64 = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    height, width = x.shape[2:]
    return sum(weight[None, :, 0, i, j, None, None].astype(np.float64) * x64[:, :, i:i + height, j:j + width]
               for i in range(3) for j in range(3)) + bias.astype(np.float64)[None, :, None, None]


@pytest.mark.parametrize("threads", [1, 2])
def test_an_input_lying_channels_last_is_read_where_it_lies(threads):
    """A transposed view of (N, H, W, C) rows (PVT-v2's Mix-FFN) goes straight into a kernel for that layout:
    no reorder on either side, the sums in another order than the blocked kernel's."""
    library = onednn.library()
    weight = (RNG.standard_normal((32, 1, 3, 3)) / 3).astype(np.float32)
    bias = RNG.standard_normal(32).astype(np.float32)
    conv = onednn.Convolution(library, weight, bias, (1, 1), (1, 1), [(1, 1), (1, 1)], 32)
    rows = RNG.standard_normal((2, 12, 13, 32)).astype(np.float32)
    x = rows.transpose(0, 3, 1, 2)
    got = conv(x, threads, channels_last=True)
    plan = conv.calls.get((x.shape, library.threads(threads), "channels-last"))
    assert plan is not None and plan.to_plain.step is None  # the kernel wrote the layout handed over
    assert got.transpose(0, 2, 3, 1).flags.c_contiguous
    np.testing.assert_allclose(got, _depthwise64(x, weight, bias), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, conv(x, threads), rtol=1e-5, atol=1e-6)  # the blocked plan's
    assert conv(np.ascontiguousarray(x), threads, channels_last=True).flags.c_contiguous is False
    sequence = conv.sequence_for(x, threads, channels_last=True)  # what a specialized step runs
    assert sequence is not None and conv.sequence_for(x, threads) is None  # (a row-major output: no sequence)
    for _ in range(2):
        again = sequence(x)
        assert again.transpose(0, 2, 3, 1).flags.c_contiguous and np.array_equal(again, got)


@pytest.mark.parametrize("lies_channels_last", [False, True])
def test_a_transposed_convolution_writes_channels_last_with_the_same_values(lies_channels_last):
    library = onednn.library()
    weight = (RNG.standard_normal((16, 8, 3, 3)) / 4).astype(np.float32)  # (out, in, kh, kw), as Convolution takes it
    deconv = onednn.Convolution(library, weight, None, (2, 2), (1, 1), [(1, 1), (1, 1)], 1, output_padding=(1, 1))
    x = RNG.standard_normal((1, 8, 9, 10)).astype(np.float32)
    if lies_channels_last:
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    want = deconv(x, 1)
    got = deconv(x, 1, channels_last=True)
    assert got.shape == want.shape == (1, 16, 18, 20) and got.transpose(0, 2, 3, 1).flags.c_contiguous
    if lies_channels_last:  # a kernel for that layout may sum in another order
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    else:
        assert np.array_equal(got, want)
