"""Fast 2-D convolution algorithms, kept apart from the op's param parsing (conv.py).

Every function here computes exactly what the reference im2col path in
``ConvNd.compute_im2col`` computes (within float32 rounding; tests/ops/test_conv_fast_paths.py
compares each against it), with the backend's ``xp`` only, so the same code runs
on NumPy and CuPy.  They take an NCHW input with the dtype of the weight, and
explicit ``pads = ((top, bottom), (left, right))`` of zeros.

Which path an nn.Conv2d takes is decided once, by ``ConvNd.choose_algorithm``
at build time, from the weight and the params alone (the same rule on every
backend):

* ``pointwise``: kernel 1x1 with padding 0 (any stride, any groups).  A plain
  batched matmul of the (strided) input, no im2col; stride 1 needs no copy at all.
* ``depthwise``: groups == in_channels == out_channels, dilation 1 (any kernel,
  stride, padding).  im2col per channel, but each tap's shifted view is a contiguous
  slice of the channel's plane flattened with its padding ("wide" rows: the few
  padding columns are computed and cropped), so the columns are copied as long
  rows; a stride s is first split into s*s phase planes (rows/columns congruent
  mod s), which makes every tap a stride-1 slice.  A batched (1 x k*k) @ (k*k x P)
  matmul per channel then sums the taps.
* ``winograd``: kernel 3x3, stride 1, dilation 1, groups 1, at least
  ``WINOGRAD_MIN_CHANNELS`` input and output channels.  Winograd F(m x m, 3x3):
  (m+2)^2 matmuls over m x m output tiles instead of one 9x larger matmul, i.e.
  4x (m=4) or 2.25x (m=2) fewer multiplications.  The tile size is chosen per call
  from the output size (``winograd_tile_size``): F(4x4) when the call has at least
  ``WINOGRAD_MIN_TILES`` tiles of 4x4 (batch * ceil(H/4) * ceil(W/4)), else F(2x2)
  when it has that many 2x2 tiles, else im2col.  A transformed weight is 4x (m=4)
  or 1.8x (m=2) the weight, and it is read once per call: with few tiles that read
  costs more than the multiplications it saves (ResNet's 7x7 maps at batch 1 use
  im2col, its 14x14 maps F(2x2)).  The weight is transformed once per tile size, on
  the first call that needs it, and kept: the spatial size is not known at build
  time, and a model never pays memory for a variant its inputs do not use.  The
  transforms are matmuls with small constant matrices (Kronecker products of the
  1-D ones) over all tiles at once.
* ``im2col``: everything else (and any input whose dtype differs from the weight's).

Accuracy of F(4x4, 3x3) in float32: the interpolation points (0, 1, -1, 1/2, -2, inf)
keep the transform coefficients small; with the classic (0, +-1, +-2) the error is
2-3x larger.  What remains is the float32 rounding of the transformed products,
which the output transform (coefficients up to 8) amplifies: the error against
float64 is about 3-4e-6 of the output's magnitude, for 64..512 channels (3e-5 on
outputs of ~8, the size of batch-normalised activations; 7e-5 in YOLOv5's neck
where outputs reach ~37; beyond outputs of ~30 it can pass 1e-4 absolute).  im2col
and F(2x2, 3x3) stay within about 5e-7 of the output's magnitude.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np  # only to build the small constant Winograd matrices once

from ..ir import dtypes

# Depthwise columns per chunk of images (kept in cache), and per block of channels of one
# image (only bounds the workspace: smaller blocks were no faster, and with glibc's default
# malloc settings the smaller allocations made it return memory and fault it in again).
DEPTHWISE_IMAGES_CHUNK_BYTES = 4 << 20
DEPTHWISE_CHANNELS_CHUNK_BYTES = 16 << 20
WINOGRAD_TILE_SIZES = (4, 2)  # output tile edges m of F(m x m, 3 x 3), largest first
WINOGRAD_MIN_CHANNELS = 16  # below this the transforms cost more than the smaller matmuls save
WINOGRAD_MIN_TILES = 32  # fewer tiles per call: each transformed weight is read too few times
WINOGRAD_CHUNK_TILES = 128  # a batch goes through in chunks of whole images with about this many tiles


# ---------------------------------------------------------------- pointwise (1x1)


def pointwise_conv2d(xp, x, matrix, stride: tuple[int, int]):
    """1x1 convolution, padding 0: ``matrix`` is (groups, out/groups, in/groups)."""
    if stride != (1, 1):
        x = x[:, :, :: stride[0], :: stride[1]]
    batch, _, height, width = x.shape
    groups, group_out, group_in = matrix.shape
    columns = xp.reshape(x, (batch, groups, group_in, height * width))  # a view when x is contiguous
    out = xp.matmul(matrix, columns)  # (N, G, out/G, H*W)
    return xp.reshape(out, (batch, groups * group_out, height, width))


# ---------------------------------------------------------------- depthwise


def _phase_planes(xp, x, pads, stride: tuple[int, int], kernel: tuple[int, int], out_size: tuple[int, int]):
    """The zero-padded input split into stride*stride phase planes, each flattened with one spare row.

    Phase (a, b) holds padded[s*q1 + a, s*q2 + b].  Returns (planes of shape
    (sh, sw, N, C, (Hq + 1) * Wq), Wq), where Hq = Ho + (kh-1)//sh and Wq = Wo + (kw-1)//sw,
    enough for every tap's shifted slice of length Ho * Wq (the spare row keeps the
    last taps' flat slices inside the plane).
    """
    batch, channels, height, width = x.shape
    (sh, sw), (kh, kw), (ho, wo) = stride, kernel, out_size
    hq, wq = ho + (kh - 1) // sh, wo + (kw - 1) // sw
    planes = xp.zeros((sh, sw, batch, channels, hq + 1, wq), dtype=x.dtype)
    (top, _), (left, _) = pads
    for a in range(sh):
        rows = _phase_range(a, sh, top, height, hq)
        for b in range(sw):
            cols = _phase_range(b, sw, left, width, wq)
            if rows is None or cols is None:
                continue
            (q1, q1_end, r0, r1), (q2, q2_end, c0, c1) = rows, cols
            planes[a, b, :, :, q1:q1_end, q2:q2_end] = x[:, :, r0:r1:sh, c0:c1:sw]
    return xp.reshape(planes, (sh, sw, batch, channels, (hq + 1) * wq)), wq


def _phase_range(phase: int, stride: int, pad_before: int, size: int, plane_size: int):
    """Which plane positions q of phase ``phase`` hold input elements: (q, q_end, first, end) or None.

    Plane position q is padded index stride*q + phase, i.e. input index
    stride*q + phase - pad_before.
    """
    q = max(0, -(-(pad_before - phase) // stride))  # first q whose input index is >= 0
    first = stride * q + phase - pad_before
    count = min(plane_size - q, len(range(first, size, stride)))
    if count <= 0:
        return None
    return q, q + count, first, first + stride * (count - 1) + 1


def depthwise_conv2d(xp, x, matrix, kernel: tuple[int, int], stride: tuple[int, int], pads, chunked: bool = True):
    """Depthwise convolution (one filter per channel, dilation 1); ``matrix`` is (C, 1, kh * kw).

    The kh * kw taps of a channel are contiguous slices of its flattened phase planes;
    they are copied side by side (im2col with long contiguous rows) and each channel's
    row of taps is multiplied in by a batched matmul.  A batch whose columns would take
    more than ``DEPTHWISE_IMAGES_CHUNK_BYTES`` goes through in chunks of images, and an
    image whose columns take more than ``DEPTHWISE_CHANNELS_CHUNK_BYTES`` in blocks of channels;
    ``chunked=False`` (a GPU backend) takes the whole batch and every channel at once.
    """
    batch, channels, height, width = x.shape
    (kh, kw), (sh, sw) = kernel, stride
    ho = (height + sum(pads[0]) - kh) // sh + 1
    wo = (width + sum(pads[1]) - kw) // sw + 1
    wq = wo + (kw - 1) // sw
    image_bytes = channels * kh * kw * ho * wq * dtypes.itemsize(x.dtype)  # one image's columns
    images = max(1, DEPTHWISE_IMAGES_CHUNK_BYTES // image_bytes) if chunked else batch
    if batch <= images:
        out = _depthwise_chunk(xp, x, matrix, kernel, stride, pads, (ho, wo), chunked)
    else:
        out = xp.empty((batch, channels, ho, wq), dtype=x.dtype)
        for first in range(0, batch, images):
            last = min(batch, first + images)
            out[first:last, ...] = _depthwise_chunk(xp, x[first:last, ...], matrix, kernel, stride, pads, (ho, wo), chunked)
    return out[:, :, :, :wo] if wq != wo else out


def _depthwise_chunk(xp, x, matrix, kernel, stride, pads, out_size, chunked: bool):
    """Depthwise convolution of a few images, on the wide grid: (N, C, Ho, Wq)."""
    batch, channels = x.shape[:2]
    (kh, kw), (sh, sw), (ho, wo) = kernel, stride, out_size
    planes, wq = _phase_planes(xp, x, pads, stride, kernel, (ho, wo))
    length = ho * wq
    block = channels
    if chunked:
        block = max(1, DEPTHWISE_CHANNELS_CHUNK_BYTES // (batch * kh * kw * length * dtypes.itemsize(x.dtype)))
    columns = xp.empty((batch, min(block, channels), kh * kw, length), dtype=x.dtype)
    out = None
    for first in range(0, channels, block):
        last = min(channels, first + block)
        part = columns[:, : last - first, ...]
        for i in range(kh):
            for j in range(kw):
                start = (i // sh) * wq + j // sw
                part[:, :, i * kw + j, :] = planes[i % sh, j % sw, :, first:last, start : start + length]
        products = xp.matmul(matrix[first:last, ...], part)  # (N, block, 1, length)
        if last - first == channels:
            out = products
        else:
            if out is None:
                out = xp.empty((batch, channels, 1, length), dtype=products.dtype)
            out[:, first:last, ...] = products
    return xp.reshape(out, (batch, channels, ho, wq))


# ---------------------------------------------------------------- Winograd F(m x m, 3 x 3)

# Toom-Cook matrices: y = A^T [(G g G^T) * (B^T d B)] A is the 3x3 correlation of the
# (m+2)x(m+2) tile d with the filter g.  Interpolation points (0, 1, -1, [1/2, -2,] inf);
# A^T[i, j] = p_j^i, G[j, k] = p_j^k / prod_{l != j}(p_j - p_l), and B^T solves the
# identity exactly (tests check it in exact arithmetic).
_WINOGRAD_FRACTIONS = {
    2: (
        [["-1", "0", "1", "0"], ["0", "1", "1", "0"], ["0", "-1", "1", "0"], ["0", "-1", "0", "1"]],
        [["-1", "0", "0"], ["1/2", "1/2", "1/2"], ["1/2", "-1/2", "1/2"], ["0", "0", "1"]],
        [["1", "1", "1", "0"], ["0", "1", "-1", "1"]],
    ),
    4: (
        [
            ["1", "-3/2", "-2", "3/2", "1", "0"],
            ["0", "-1", "1/2", "5/2", "1", "0"],
            ["0", "1", "-5/2", "1/2", "1", "0"],
            ["0", "-2", "-1", "2", "1", "0"],
            ["0", "1/2", "-1", "-1/2", "1", "0"],
            ["0", "1", "-3/2", "-2", "3/2", "1"],
        ],
        [
            ["1", "0", "0"],
            ["1/3", "1/3", "1/3"],
            ["-1/3", "1/3", "-1/3"],
            ["-16/15", "-8/15", "-4/15"],
            ["1/15", "-2/15", "4/15"],
            ["0", "0", "1"],
        ],
        [
            ["1", "1", "1", "1", "1", "0"],
            ["0", "1", "-1", "1/2", "-2", "0"],
            ["0", "1", "1", "1/4", "4", "0"],
            ["0", "1", "-1", "1/8", "-8", "1"],
        ],
    ),
}
# The column of A^T for the point 1 is all ones: adding the bias there adds it to every output.
_WINOGRAD_POINT_ONE = 1


def winograd_fractions(m: int) -> tuple[list[list[Fraction]], list[list[Fraction]], list[list[Fraction]]]:
    """(B^T, G, A^T) of F(m x m, 3 x 3) as exact fractions."""
    if m not in _WINOGRAD_FRACTIONS:
        raise ValueError(f"Winograd F({m}x{m}, 3x3) is not available (have {sorted(_WINOGRAD_FRACTIONS)})")
    return tuple([[Fraction(v) for v in row] for row in matrix] for matrix in _WINOGRAD_FRACTIONS[m])


def winograd_matrices(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(B^T, G, A^T) of F(m x m, 3 x 3) as float64 arrays."""
    return tuple(np.array([[float(v) for v in row] for row in matrix]) for matrix in winograd_fractions(m))


class WinogradWeight:
    """A 3x3 weight prepared once for F(m x m, 3 x 3), with the transform matrices on the backend.

    ``filters`` is (alpha^2, out, in): G g G^T of every filter, one matmul operand per
    tile position.  ``input_transform`` is (B^T kron B^T) and ``output_transform``
    (A^T kron A^T), so the 2-D transforms of all tiles are one matmul each.
    """

    def __init__(self, backend, weight, m: int):
        xp = backend.xp
        bt, g, at = winograd_matrices(m)
        alpha = m + 2
        out_channels, in_channels = weight.shape[:2]
        dtype = weight.dtype
        # (G kron G) @ (3*3, O*C): every G g G^T at once, in float64 so the filters are rounded once.
        # The matmul result is contiguous, so each filters[k] is a plain (O, C) matrix for BLAS.
        taps = xp.reshape(xp.permute_dims(xp.astype(weight, xp.float64), (2, 3, 0, 1)), (9, -1))
        transformed = xp.matmul(backend.asarray(np.kron(g, g), dtype=xp.float64), taps)
        self.filters = xp.astype(xp.reshape(transformed, (alpha * alpha, out_channels, in_channels)), dtype)
        self.input_transform = backend.asarray(np.kron(bt, bt), dtype=dtype)
        self.output_transform = backend.asarray(np.kron(at, at), dtype=dtype)
        self.bias_position = _WINOGRAD_POINT_ONE * alpha + _WINOGRAD_POINT_ONE
        self.m = m
        self.out_channels = out_channels
        self.in_channels = in_channels


def winograd_tile_size(batch: int, out_height: int, out_width: int) -> int | None:
    """The Winograd output tile m for a call, or None when im2col is faster (see the module docstring)."""
    for m in WINOGRAD_TILE_SIZES:
        if batch * math.ceil(out_height / m) * math.ceil(out_width / m) >= WINOGRAD_MIN_TILES:
            return m
    return None


def winograd_conv2d(xp, backend, x, prepared: WinogradWeight, pads, bias=None):
    """3x3, stride 1 convolution by Winograd F(m x m, 3 x 3); ``bias`` is (out,) or None.

    A batch goes through in chunks of whole images with about ``WINOGRAD_CHUNK_TILES``
    tiles: enough to reuse each transformed weight, few enough that the passes over
    the transformed tiles stay in cache (a 56x56 map has 196 tiles of 4x4 per image).
    """
    m = prepared.m
    batch, channels, height, width = x.shape
    (top, bottom), (left, right) = pads
    out_h, out_w = height + top + bottom - 2, width + left + right - 2
    tiles_h, tiles_w = math.ceil(out_h / m), math.ceil(out_w / m)
    # Zero-padded input, large enough for whole tiles (overlapping by 2): tiles_h * m + 2 >= out_h + 2.
    padded = xp.zeros((batch, channels, tiles_h * m + 2, tiles_w * m + 2), dtype=x.dtype)
    padded[:, :, top : top + height, left : left + width] = x
    out_channels = prepared.out_channels
    out = None
    chunk = max(1, WINOGRAD_CHUNK_TILES // (tiles_h * tiles_w))
    for start in range(0, batch, chunk):
        stop = min(batch, start + chunk)
        tiles = _winograd_tiles(xp, backend, padded[start:stop, ...], prepared, bias)  # (m, m, O, n, th, tw)
        # out[n, o, i*m + a, j*m + b] = tiles[a, b, o, n, i, j].  Not written through a reshaped view
        # of ``out``: the standard's reshape may copy, and the write would be lost.
        images = xp.reshape(xp.permute_dims(tiles, (3, 2, 4, 0, 5, 1)), (stop - start, out_channels, tiles_h * m, tiles_w * m))
        if stop - start == batch:
            out = images
            break
        if out is None:
            out = xp.empty((batch, out_channels, tiles_h * m, tiles_w * m), dtype=x.dtype)
        out[start:stop, ...] = images
    if tiles_h * m != out_h or tiles_w * m != out_w:
        out = out[:, :, :out_h, :out_w]
    return out


def _winograd_tiles(xp, backend, padded, prepared: WinogradWeight, bias):
    """Output tiles (m, m, O, N, th, tw) of the padded input (N, C, th*m + 2, tw*m + 2)."""
    m = prepared.m
    alpha = m + 2
    batch, channels = padded.shape[:2]
    tiles_h, tiles_w = (padded.shape[2] - 2) // m, (padded.shape[3] - 2) // m
    tiles = batch * tiles_h * tiles_w
    windows = backend.sliding_window(padded, (alpha, alpha), (2, 3))[:, :, ::m, ::m, ...]  # (N, C, th, tw, a, a)
    # Gather the tiles tile-position-major: row k = (a, b) holds that element of every (channel, tile).
    data = xp.reshape(xp.permute_dims(windows, (4, 5, 1, 0, 2, 3)), (alpha * alpha, channels * tiles))
    transformed = xp.matmul(prepared.input_transform, data)  # (alpha^2, C * P)
    transformed = xp.reshape(transformed, (alpha * alpha, channels, tiles))
    products = xp.matmul(prepared.filters, transformed)  # (alpha^2, O, P)
    if bias is not None:
        products[prepared.bias_position, ...] += xp.reshape(bias, (-1, 1))
    out_channels = prepared.out_channels
    flat = xp.reshape(products, (alpha * alpha, out_channels * tiles))
    out = xp.matmul(prepared.output_transform, flat)  # (m^2, O * P)
    return xp.reshape(out, (m, m, out_channels, batch, tiles_h, tiles_w))
