"""Nearest 2x upsampling of a float32 (N, C, H, W) array: one compiled pass (resize_native.py)."""

from __future__ import annotations

from numba import prange

from .runtime import kernel


@kernel()
def nearest_2x(x, out):
    """out[n, c, i, j] = x[n, c, i // 2, j // 2] for C-contiguous x (N, C, H, W) and out (N, C, 2H, 2W)."""
    n, c, h, w = x.shape
    for task in prange(n * c * h):
        b, rest = task // (c * h), task % (c * h)
        k, i = rest // h, rest % h
        for j in range(w):
            value = x[b, k, i, j]
            out[b, k, 2 * i, 2 * j] = value
            out[b, k, 2 * i, 2 * j + 1] = value
        for j in range(2 * w):
            out[b, k, 2 * i + 1, j] = out[b, k, 2 * i, j]
