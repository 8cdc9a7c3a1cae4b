"""Multi-threaded loops for 2-D convolution: the parts that are not a GEMM.

Each kernel gives every output element to exactly one thread (``prange`` over
planes or rows) and sums in a fixed order, so results do not depend on the
thread count.  Inputs are C-contiguous float32; zero padding is read as zeros by
clipping the loop ranges instead of being copied in.  The GEMMs stay with BLAS.

Why the loops look as they do: numba adds a negative-index wrap-around check to
every signed array index, which stops LLVM from vectorising a loop.  So the hot
loops index with a plain ``range(count)`` counter (known non-negative) or with
``uintp`` offsets.  They also take one view per task rather than one per row or
tap: a view costs tens of nanoseconds (reference counting), more than copying a
short row, and the loops over 7-56 elements here are that short.  Slice
assignments (which numba turns into nested parallel loops) are avoided inside
``prange`` bodies.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange, uintp

from .elementwise_kernels import CHUNK, run_chunks, workspace
from .runtime import kernel

# Tasks a kernel that runs an epilogue splits its planes into: each makes the epilogue's registers
# once (planes can be 7x7, too small to pay for a workspace each), and a few per thread balance them.
PLANE_BLOCKS = 16
# The epilogue runs once per this many output elements (whole planes, consecutive in memory), not
# once per plane: a run costs ~50 ns per program row in views and calls, as much as a 7x7 plane's
# math.  One register's width (16 KiB) stays in L1/L2 until the epilogue reads it.
EPILOGUE_SPAN = CHUNK


@njit(inline="always")
def _block_of_planes(block, blocks, planes, plane_size, epilogue):
    """Task ``block`` of ``blocks``: its planes [first, stop) and the epilogue's registers for them."""
    first_plane, stop_plane = block * planes // blocks, (block + 1) * planes // blocks
    _, constant_registers, constant_values, registers = epilogue[:4]
    regs, scratch = workspace(constant_registers, constant_values, registers, (stop_plane - first_plane) * plane_size)
    return first_plane, stop_plane, regs, scratch


@njit(inline="always")
def _epilogue_due(pending, plane, stop_plane, size):
    """Whether the planes [pending, plane] are worth one epilogue run now (see EPILOGUE_SPAN)."""
    return (plane + 1 - pending) * size >= EPILOGUE_SPAN or plane + 1 == stop_plane


@njit(inline="always")
def _run_epilogue(epilogue, regs, scratch, first_plane, stop_plane, size, flat):
    """The epilogue program over output planes [first_plane, stop_plane) (``size`` elements each
    of ``flat``), in place."""
    code, _, _, _, x0, x1, x2, x3 = epilogue
    if code.shape[0] > 0:
        run_chunks(code, regs, scratch, first_plane * size, stop_plane * size, x0, x1, x2, x3, flat)


@njit(inline="always")
def _first_inside(pad_before, tap_offset, stride):
    """Smallest output index o >= 0 with o * stride + tap_offset - pad_before >= 0."""
    need = pad_before - tap_offset
    return 0 if need <= 0 else (need + stride - 1) // stride


@njit(inline="always")
def _end_inside(size, pad_before, tap_offset, stride, out_size):
    """One past the largest output index o < out_size with o * stride + tap_offset - pad_before < size."""
    last = size - 1 + pad_before - tap_offset
    if last < 0:
        return 0
    return min(out_size, last // stride + 1)


@kernel()
def depthwise_conv2d(x, taps, bias, stride_h, stride_w, top, left, out, epilogue):
    """out[n, c] = bias[c] + sum_ij taps[c, i, j] * x[n, c, oy*sh + i - top, ox*sw + j - left] (zeros outside),
    then ``epilogue`` (see kuiper/ops/epilogue.py) over the planes while they are in cache.

    x (N, C, H, W), taps (C, kh, kw), bias (C,), out (N, C, Ho, Wo); blocks of (image, channel)
    planes per task.  Each tap adds into a whole output row.  The columns a tap reaches inside the
    input depend on its column only, so they are worked out once; the loops index rows with
    unsigned offsets instead of taking a view per tap (1.3-1.7x faster than with views).
    """
    batch, channels, height, width = x.shape
    kernel_h, kernel_w = taps.shape[1], taps.shape[2]
    out_h, out_w = out.shape[2], out.shape[3]
    firsts = np.empty(kernel_w, np.int64)
    counts = np.empty(kernel_w, np.int64)
    for j in range(kernel_w):
        firsts[j] = _first_inside(left, j, stride_w)
        counts[j] = _end_inside(width, left, j, stride_w, out_w) - firsts[j]
    flat = out.reshape(out.size)
    planes = batch * channels
    blocks = min(planes, PLANE_BLOCKS)
    for block in prange(blocks):
        first_plane, stop_plane, regs, scratch = _block_of_planes(block, blocks, planes, out_h * out_w, epilogue)
        pending = first_plane
        for plane in range(first_plane, stop_plane):
            n = plane // channels
            c = plane % channels
            plane_taps = taps[c]
            shift = bias[c]
            for oy in range(out_h):
                row = out[n, c, oy]
                for ox in range(out_w):
                    row[ox] = shift
                for i in range(kernel_h):
                    iy = oy * stride_h + i - top
                    if iy < 0 or iy >= height:
                        continue
                    source = x[n, c, iy]
                    for j in range(kernel_w):
                        weight = plane_taps[i, j]
                        first = firsts[j]
                        offset = first * stride_w + j - left
                        if stride_w == 1:
                            for t in range(counts[j]):
                                row[uintp(first + t)] += weight * source[uintp(offset + t)]
                        else:
                            for t in range(counts[j]):
                                row[uintp(first + t)] += weight * source[uintp(offset + t * stride_w)]
            if _epilogue_due(pending, plane, stop_plane, out_h * out_w):
                _run_epilogue(epilogue, regs, scratch, pending, plane + 1, out_h * out_w, flat)
                pending = plane + 1


@kernel()
def im2col(x, kernel_h, kernel_w, stride_h, stride_w, dilation_h, dilation_w, top, left, out_w, columns):
    """columns[n, (c, i, j), oy * Wo + ox] = x[n, c, oy*sh + i*dh - top, ox*sw + j*dw - left] (zeros outside).

    x (N, C, H, W); columns (N, C * kh * kw, Ho * Wo) with Wo given.  One row per task, indexed
    with unsigned offsets rather than a view per output row (1.4-3.3x faster than with views).
    """
    batch, channels, height, width = x.shape
    taps = kernel_h * kernel_w
    rows = channels * taps
    out_h = columns.shape[2] // out_w
    for task in prange(batch * rows):
        n = task // rows
        row = task % rows
        c = row // taps
        i = (row // kernel_w) % kernel_h
        j = row % kernel_w
        first = _first_inside(left, j * dilation_w, stride_w)
        end = max(first, _end_inside(width, left, j * dilation_w, stride_w, out_w))
        offset = first * stride_w + j * dilation_w - left
        dest = columns[n, row]
        plane = x[n, c]
        for oy in range(out_h):
            base = oy * out_w
            iy = oy * stride_h + i * dilation_h - top
            if iy < 0 or iy >= height:
                for ox in range(out_w):
                    dest[uintp(base + ox)] = 0.0
                continue
            source = plane[iy]
            for ox in range(first):
                dest[uintp(base + ox)] = 0.0
            if stride_w == 1:
                for t in range(end - first):
                    dest[uintp(base + first + t)] = source[uintp(offset + t)]
            else:
                for t in range(end - first):
                    dest[uintp(base + first + t)] = source[uintp(offset + t * stride_w)]
            for ox in range(end, out_w):
                dest[uintp(base + ox)] = 0.0


@kernel()
def winograd_gather(x, alpha, m, top, left, tiles_h, tiles_w, out):
    """out[a * alpha + b, c, tile] = x[n, c, ty*m + a - top, tx*m + b - left] (zeros outside x).

    x (N, C, H, W); out (alpha^2, C, N * th * tw), tile = (n * th + ty) * tw + tx: every
    (alpha x alpha) input tile, laid out so that one matmul applies the input transform
    (B^T kron B^T) to all of them.  One (tile position, channel) row per task; rows are
    indexed with unsigned offsets, not a view per tile row (2-3x faster than with views).
    """
    batch, channels, height, width = x.shape
    for task in prange(alpha * alpha * channels):
        k = task // channels
        c = task % channels
        a = k // alpha
        b = k % alpha
        first = _first_inside(left, b, m)
        end = max(first, _end_inside(width, left, b, m, tiles_w))
        offset = first * m + b - left
        dest = out[k, c]
        for n in range(batch):
            plane = x[n, c]
            for ty in range(tiles_h):
                base = (n * tiles_h + ty) * tiles_w
                iy = ty * m + a - top
                if iy < 0 or iy >= height:
                    for tx in range(tiles_w):
                        dest[uintp(base + tx)] = 0.0
                    continue
                source = plane[iy]
                for tx in range(first):
                    dest[uintp(base + tx)] = 0.0
                for t in range(end - first):
                    dest[uintp(base + first + t)] = source[uintp(offset + t * m)]
                for tx in range(end, tiles_w):
                    dest[uintp(base + tx)] = 0.0


@kernel()
def winograd_scatter(tiles, bias, m, tiles_h, tiles_w, out, epilogue):
    """out[n, o, ty*m + a, tx*m + b] = tiles[a * m + b, o, tile] + bias[o], cropped to out's size,
    then ``epilogue`` (see kuiper/ops/epilogue.py) over the planes while they are in cache.

    tiles (m^2, O, N * th * tw) are the output-transformed tiles; out (N, O, Ho, Wo) with
    Ho <= th * m, Wo <= tw * m.  Blocks of (image, output channel) planes per task.
    """
    batch, out_channels, out_h, out_w = out.shape
    flat = out.reshape(out.size)
    planes = batch * out_channels
    blocks = min(planes, PLANE_BLOCKS)
    for block in prange(blocks):
        first_plane, stop_plane, regs, scratch = _block_of_planes(block, blocks, planes, out_h * out_w, epilogue)
        pending = first_plane
        for task in range(first_plane, stop_plane):
            n = task // out_channels
            o = task % out_channels
            shift = bias[o]
            for y in range(out_h):
                ty = y // m
                a = y % m
                base = (n * tiles_h + ty) * tiles_w
                row = out[n, o, y]
                for b in range(m):
                    values = tiles[a * m + b, o, base : base + tiles_w]
                    count = (out_w - b + m - 1) // m  # columns b, b + m, ... inside the row
                    for t in range(count):
                        row[uintp(t * m + b)] = values[t] + shift
            if _epilogue_due(pending, task, stop_plane, out_h * out_w):
                _run_epilogue(epilogue, regs, scratch, pending, task + 1, out_h * out_w, flat)
                pending = task + 1


@kernel()
def bias_epilogue(out, bias, epilogue):
    """out[n, c] += bias[c] (when bias has C elements; an empty bias adds nothing), then ``epilogue``
    over the planes while they are in cache: one pass after a GEMM instead of two or more.

    out (N, C, H, W), C-contiguous; blocks of (image, channel) planes per task.
    """
    batch, channels, out_h, out_w = out.shape
    size = out_h * out_w
    flat = out.reshape(out.size)
    planes = batch * channels
    blocks = min(planes, PLANE_BLOCKS)
    for block in prange(blocks):
        first_plane, stop_plane, regs, scratch = _block_of_planes(block, blocks, planes, size, epilogue)
        pending = first_plane
        for plane in range(first_plane, stop_plane):
            if bias.size > 0:
                shift = bias[plane % channels]
                start = plane * size
                for t in range(size):
                    flat[uintp(start + t)] += shift
            if _epilogue_due(pending, plane, stop_plane, size):
                _run_epilogue(epilogue, regs, scratch, pending, plane + 1, size, flat)
                pending = plane + 1
