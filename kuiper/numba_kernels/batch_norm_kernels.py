"""Inference batch norm as one pass over each (image, channel) plane, with a clamp after it."""

from __future__ import annotations

from numba import prange

from .runtime import kernel


@kernel()
def scale_shift_planes(x, scale, shift, low, high, out):
    """out[p] = clamp(x[p] * scale[c] + shift[c], low, high) for each plane p of x (N * C, S), c = p % C.

    ``low``/``high`` of -inf/inf clamp nothing, 0/inf is a ReLU, 0/6 a ReLU6; a NaN stays NaN,
    as in PyTorch's ReLU (neither comparison holds for it).
    """
    planes, size = x.shape
    channels = scale.shape[0]
    for p in prange(planes):
        c = p % channels
        a = scale[c]
        b = shift[c]
        source = x[p]
        target = out[p]
        for s in range(size):
            value = source[s] * a + b
            if value < low:
                value = low
            if value > high:
                value = high
            target[s] = value
