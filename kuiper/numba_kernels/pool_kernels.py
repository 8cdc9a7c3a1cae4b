"""Multi-threaded max pooling: one (image, channel) plane per task, columns then rows.

A max over a box is a max over each axis in turn.  For each output row, the
vertical maxima of its ``kh`` input rows go into a buffer padded with -inf on both
sides (PyTorch pads with -inf), then each output takes the maximum of ``kw``
buffer entries.  Both inner loops are branch-free over contiguous memory, so they
vectorise.  NaN wins, as in PyTorch and np.maximum.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange, uintp

from .runtime import kernel


@njit(inline="always")
def _max(best, value):
    """max that keeps a NaN from either side (np.maximum's rule)."""
    return value if (value > best or math.isnan(value)) else best


@kernel()
def max_pool2d(x, kernel_h, kernel_w, stride_h, stride_w, dilation_h, dilation_w, top, left, out):
    """x (P, H, W) planes, out (P, Ho, Wo): out[p, oy, ox] = max of the window at (oy*sh - top, ox*sw - left)."""
    planes, height, width = x.shape
    out_h, out_w = out.shape[1], out.shape[2]
    span_w = (out_w - 1) * stride_w + dilation_w * (kernel_w - 1) + 1  # padded width the windows cover
    for p in prange(planes):
        column_max = np.empty(max(span_w, left + width), dtype=x.dtype)
        for oy in range(out_h):
            for ix in range(column_max.shape[0]):
                column_max[ix] = -np.inf
            inner = column_max[left : left + width]
            for i in range(kernel_h):
                iy = oy * stride_h + i * dilation_h - top
                if 0 <= iy < height:
                    source = x[p, iy]
                    for ix in range(width):
                        inner[ix] = _max(inner[ix], source[ix])
            row = out[p, oy]
            for ox in range(out_w):
                start = uintp(ox * stride_w)
                best = column_max[start]
                for j in range(1, kernel_w):
                    best = _max(best, column_max[start + uintp(j * dilation_w)])
                row[ox] = best


@kernel()
def avg_pool2d(x, kernel_h, kernel_w, stride_h, stride_w, top, left, reciprocals, out):
    """x (P, H, W) planes, out (P, Ho, Wo): out[p, oy, ox] = the window's sum (zeros outside x)
    times reciprocals[oy, ox] (PyTorch's divisor rules, worked out by the reference op).

    Separable like max_pool2d: the column sums of an output row's ``kh`` input rows, then
    each output adds ``kw`` of them; the same order as the reference (height, then width).
    """
    planes, height, width = x.shape
    out_h, out_w = out.shape[1], out.shape[2]
    span_w = (out_w - 1) * stride_w + kernel_w  # padded width the windows cover
    for p in prange(planes):
        column_sum = np.empty(max(span_w, left + width), dtype=x.dtype)
        for oy in range(out_h):
            for ix in range(column_sum.shape[0]):
                column_sum[ix] = 0.0
            inner = column_sum[left : left + width]
            for i in range(kernel_h):
                iy = oy * stride_h + i - top
                if 0 <= iy < height:
                    source = x[p, iy]
                    for ix in range(width):
                        inner[ix] += source[ix]
            row = out[p, oy]
            scale = reciprocals[oy]
            for ox in range(out_w):
                start = uintp(ox * stride_w)
                total = column_sum[start]
                for j in range(1, kernel_w):
                    total += column_sum[start + uintp(j)]
                row[ox] = total * scale[ox]
