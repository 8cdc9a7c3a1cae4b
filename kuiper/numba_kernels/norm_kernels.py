"""Multi-threaded row-wise normalisations: layer norm and softmax over the last axis.

Each row (the normalised axis, contiguous) is one task: its statistics are summed
in float64 in a fixed order, so results do not depend on the thread count, and two
passes over a row replace NumPy's chain of whole-tensor temporaries.
"""

from __future__ import annotations

import math

from numba import njit, prange


@njit(parallel=True, cache=True, nogil=True)
def layer_norm_rows(x, weight, bias, eps, out):
    """out[r] = (x[r] - mean) / sqrt(var + eps) * weight + bias, biased variance; x and out (R, K)."""
    rows, width = x.shape
    for r in prange(rows):
        row = x[r]
        total = 0.0
        for k in range(width):
            total += row[k]
        mean = total / width
        squares = 0.0
        for k in range(width):
            centered = row[k] - mean
            squares += centered * centered
        scale = 1.0 / math.sqrt(squares / width + eps)
        target = out[r]
        for k in range(width):
            target[k] = (row[k] - mean) * scale * weight[k] + bias[k]


@njit(parallel=True, cache=True, nogil=True)
def softmax_rows(x, log, out):
    """out[r] = softmax(x[r]) (or log_softmax when ``log``); x and out (R, K)."""
    rows, width = x.shape
    for r in prange(rows):
        row = x[r]
        target = out[r]
        peak = -math.inf
        for k in range(width):
            if row[k] > peak or row[k] != row[k]:
                peak = row[k]
        total = 0.0
        for k in range(width):
            total += math.exp(row[k] - peak)
        if log:
            shift = peak + math.log(total)
            for k in range(width):
                target[k] = row[k] - shift
        else:
            scale = 1.0 / total
            for k in range(width):
                target[k] = math.exp(row[k] - peak) * scale
