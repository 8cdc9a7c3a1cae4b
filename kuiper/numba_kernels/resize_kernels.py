"""Nearest 2x upsampling in one compiled pass (resize_native.py), of a plain map or a channel-blocked one."""

from __future__ import annotations

from numba import prange

from .runtime import kernel


@kernel()
def nearest_2x(x, out):
    """out[n, c, i, j, k] = x[n, c, i // 2, j // 2, k] for C-contiguous x (N, C, H, W, B) and out
    (N, C, 2H, 2W, B): B is 1 for a plain map, the block width for oneDNN's channel blocks."""
    n, c, h, w, b = x.shape
    for task in prange(n * c * h):
        m, rest = task // (c * h), task % (c * h)
        d, i = rest // h, rest % h
        for j in range(w):
            for k in range(b):
                value = x[m, d, i, j, k]
                out[m, d, 2 * i, 2 * j, k] = value
                out[m, d, 2 * i, 2 * j + 1, k] = value
        for j in range(2 * w):
            for k in range(b):
                out[m, d, 2 * i + 1, j, k] = out[m, d, 2 * i, j, k]
