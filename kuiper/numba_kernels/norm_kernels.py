"""Multi-threaded row-wise normalisations: layer norm, and softmax and log-softmax over the last axis.

Each row (the normalised axis, contiguous) is one task: its statistics are summed
in float64 in a fixed order, so results do not depend on the thread count, and two
passes over a row replace NumPy's chain of whole-tensor temporaries.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .elementwise_kernels import vector_exp
from .kernel_codes import CHUNK
from .runtime import kernel


@njit(inline="always")
def _sum(values, width, center, power):
    """sum over k < width of (values[k] - center) ** power (power 1 or 2), in float64.

    Four interleaved partial sums, combined in a fixed order: one running sum waits on the
    adder's latency at every element, four keep it busy.  The order never changes, so the
    result does not depend on threads or on which build runs.
    """
    sum0 = sum1 = sum2 = sum3 = 0.0
    quads = width // 4
    for q in range(quads):
        d0 = values[4 * q] - center
        d1 = values[4 * q + 1] - center
        d2 = values[4 * q + 2] - center
        d3 = values[4 * q + 3] - center
        if power == 2:
            d0, d1, d2, d3 = d0 * d0, d1 * d1, d2 * d2, d3 * d3
        sum0 += d0
        sum1 += d1
        sum2 += d2
        sum3 += d3
    total = (sum0 + sum1) + (sum2 + sum3)
    for k in range(4 * quads, width):
        d = values[k] - center
        total += d * d if power == 2 else d
    return total


@kernel()
def layer_norm_rows(x, weight, bias, eps, out):
    """out[r] = (x[r] - mean) / sqrt(var + eps) * weight + bias, biased variance; x and out (R, K)."""
    rows, width = x.shape
    for r in prange(rows):
        row = x[r]
        mean = _sum(row, width, 0.0, 1) / width
        scale = 1.0 / math.sqrt(_sum(row, width, mean, 2) / width + eps)
        target = out[r]
        for k in range(width):
            target[k] = (row[k] - mean) * scale * weight[k] + bias[k]


@njit(inline="always")
def _sum_of_float32_squares(values, width):
    """sum over k < width of float32(values[k] * values[k]), in float64 (four partial sums, as ``_sum``)."""
    sum0 = sum1 = sum2 = sum3 = 0.0
    quads = width // 4
    for q in range(quads):
        v0, v1, v2, v3 = values[4 * q], values[4 * q + 1], values[4 * q + 2], values[4 * q + 3]
        sum0 += v0 * v0
        sum1 += v1 * v1
        sum2 += v2 * v2
        sum3 += v3 * v3
    total = (sum0 + sum1) + (sum2 + sum3)
    for k in range(4 * quads, width):
        total += values[k] * values[k]
    return total


@kernel(error_model="numpy")
def layer_norm_rows_fast_variance(x, weight, bias, eps, out):
    """out[r] = (x[r] - mean) * (rsqrt(var + eps) * weight) + bias with var = max(mean(x * x) - mean^2, 0)
    (Flax's fast variance); x, weight, bias, out float32, eps a float32.

    Every step rounds to float32 where the formula does (x * x, the means, mean^2, the difference,
    the output's products), so a row with a large mean gets the variance the formula gives, not the
    two-pass one; only the sums are float64, more exact than any float32 order of adding.
    """
    rows, width = x.shape
    count = np.float32(width)
    zero = np.float32(0.0)
    one = np.float32(1.0)
    for r in prange(rows):
        row = x[r]
        mean = np.float32(_sum(row, width, 0.0, 1)) / count
        mean_of_squares = np.float32(_sum_of_float32_squares(row, width)) / count
        var = mean_of_squares - mean * mean
        if var < zero:  # max(var, 0), a NaN variance kept
            var = zero
        inverse = one / np.float32(math.sqrt(var + eps))
        target = out[r]
        for k in range(width):
            target[k] = (row[k] - mean) * (inverse * weight[k]) + bias[k]


@kernel(error_model="numpy")
def softmax_rows(x, blocks, out):
    """out[r] = softmax(x[r]); x and out (R, K) float32, out may be x.  ``blocks`` tasks of whole rows."""
    rows, width = x.shape
    per_block = (rows + blocks - 1) // blocks
    chunk = max(1, min(per_block, CHUNK // max(width, 1)))  # rows whose exps run as one vector loop
    for block in prange(blocks):
        shifted = np.empty((chunk, width), np.float32)
        scratch = np.empty((3, chunk * width), np.int32)
        stop = min(rows, (block + 1) * per_block)
        for first in range(block * per_block, stop, chunk):
            last = min(stop, first + chunk)
            softmax_of_rows(x[first:last], out[first:last], shifted, scratch)


@njit(inline="always")
def softmax_of_rows(x, target, shifted, scratch):
    """target[r] = softmax(x[r]) for the R rows of x (R, K), C-contiguous; target may be x.  ``shifted``
    (at least R rows of K float32) and ``scratch`` ((3, at least R * K) int32) are the caller's workspace.

    Each row is shifted by its peak (NaN for a row holding one: the whole row is NaN, as in NumPy
    and PyTorch); exp, the elementwise kernel's vectorised float32 one, then runs once over all
    R rows, and each row's sum is accumulated in float64 by ``_sum``.
    """
    count, width = x.shape
    for r in range(count):
        row = x[r]
        peak = row[0]
        has_nan = False
        for k in range(width):
            peak = row[k] if row[k] > peak else peak  # a select, not a branch
            has_nan |= row[k] != row[k]
        if has_nan:
            peak = np.float32(np.nan)
        for k in range(width):
            shifted[r, k] = row[k] - peak
    flat_target = target.reshape(count * width)
    vector_exp(flat_target, shifted[:count].reshape(count * width), count * width, scratch)
    for r in range(count):
        row = target[r]
        scale = np.float32(1.0 / _sum(row, width, 0.0, 1))
        for k in range(width):
            row[k] = row[k] * scale


@kernel(error_model="numpy")
def log_softmax_rows(x, blocks, out):
    """out[r] = (x[r] - max) - log(sum(exp(x[r] - max))); x and out (R, K) float32, out may be x.  ``blocks``
    tasks of whole rows, as ``softmax_rows``."""
    rows, width = x.shape
    per_block = (rows + blocks - 1) // blocks
    chunk = max(1, min(per_block, CHUNK // max(width, 1)))
    for block in prange(blocks):
        exps = np.empty(chunk * width, np.float32)
        scratch = np.empty((3, chunk * width), np.int32)
        stop = min(rows, (block + 1) * per_block)
        for first in range(block * per_block, stop, chunk):
            last = min(stop, first + chunk)
            log_softmax_of_rows(x[first:last], out[first:last], exps, scratch)


@njit(inline="always")
def log_softmax_of_rows(x, target, exps, scratch):
    """target[r] = log_softmax(x[r]) for the R rows of x (R, K), C-contiguous; target may be x.  ``exps``
    (at least R * K float32) and ``scratch`` ((3, at least R * K) int32) are the caller's workspace.

    The steps of jax.nn.log_softmax, each rounded to float32 as there: shifted = x - peak, the sum of
    exp(shifted) (accumulated in float64), its log, shifted - log.  A row holding NaN, or +inf (inf - inf),
    has a NaN sum, so the whole row is NaN, as there.
    """
    count, width = x.shape
    for r in range(count):
        row = x[r]
        peak = row[0]
        for k in range(width):
            peak = row[k] if row[k] > peak else peak  # a select, not a branch (a NaN makes the sum NaN)
        shifted = target[r]
        for k in range(width):
            shifted[k] = row[k] - peak
    vector_exp(exps, target.reshape(count * width), count * width, scratch)
    for r in range(count):
        log_total = np.float32(math.log(np.float32(_sum(exps[r * width:(r + 1) * width], width, 0.0, 1))))
        shifted = target[r]
        for k in range(width):
            shifted[k] = shifted[k] - log_total
