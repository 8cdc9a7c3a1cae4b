"""Inference batch norm as one pass over each (image, channel) plane, or over each row of an (N, C)
input, with a clamp after it."""

from __future__ import annotations

from numba import njit, prange

from .runtime import kernel


@njit(inline="always")
def _normalised(value, scale, shift, low, high):
    """clamp(value * scale + shift, low, high); a NaN stays NaN, as in PyTorch's ReLU (neither
    comparison holds for it)."""
    value = value * scale + shift
    if value < low:
        value = low
    if value > high:
        value = high
    return value


@kernel()
def scale_shift_planes(x, scale, shift, low, high, out):
    """out[p] = clamp(x[p] * scale[c] + shift[c], low, high) for each plane p of x (N * C, S), c = p % C.

    ``low``/``high`` of -inf/inf clamp nothing, 0/inf is a ReLU, 0/6 a ReLU6.
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
            target[s] = _normalised(source[s], a, b, low, high)


@kernel()
def scale_shift_rows(x, scale, shift, low, high, out):
    """out[n, c] = clamp(x[n, c] * scale[c] + shift[c], low, high) for x (N, C): a BatchNorm1d after a
    Linear, whose planes are single values (a loop per plane took 5-6 ns an element)."""
    rows, channels = x.shape
    for n in prange(rows):
        source = x[n]
        target = out[n]
        for c in range(channels):
            target[c] = _normalised(source[c], scale[c], shift[c], low, high)
