"""Multi-threaded row-wise normalisations: layer norm, and softmax over the last axis.

Each row (the normalised axis, contiguous) is one task: its statistics are summed
in float64 in a fixed order, so results do not depend on the thread count, and two
passes over a row replace NumPy's chain of whole-tensor temporaries.
"""

from __future__ import annotations

import math

import numpy as np
from numba import prange

from .elementwise_kernels import vector_exp
from .runtime import kernel


@kernel()
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


@kernel(error_model="numpy")
def softmax_rows(x, blocks, out):
    """out[r] = softmax(x[r]); x and out (R, K) float32, out may be x.  ``blocks`` tasks of whole rows.

    exp is the elementwise kernel's vectorised float32 one, once per element; each row's sum
    is accumulated in float64 in four interleaved partial sums (a single chain waits on the
    adder's latency), always in the same order.
    """
    rows, width = x.shape
    per_block = (rows + blocks - 1) // blocks
    for block in prange(blocks):
        shifted = np.empty(width, np.float32)
        scratch = np.empty((3, width), np.int32)
        for r in range(block * per_block, min(rows, (block + 1) * per_block)):
            row = x[r]
            target = out[r]
            peak = row[0]
            has_nan = False
            for k in range(width):
                peak = row[k] if row[k] > peak else peak  # a select, not a branch
                has_nan |= row[k] != row[k]
            if has_nan:
                peak = np.float32(np.nan)  # the whole row is NaN, as in NumPy and PyTorch
            for k in range(width):
                shifted[k] = row[k] - peak
            vector_exp(target, shifted, width, scratch)
            sum0 = sum1 = sum2 = sum3 = 0.0
            quads = width // 4
            for q in range(quads):
                sum0 += target[4 * q]
                sum1 += target[4 * q + 1]
                sum2 += target[4 * q + 2]
                sum3 += target[4 * q + 3]
            total = (sum0 + sum1) + (sum2 + sum3)
            for k in range(4 * quads, width):
                total += target[k]
            scale = np.float32(1.0 / total)
            for k in range(width):
                target[k] = target[k] * scale
