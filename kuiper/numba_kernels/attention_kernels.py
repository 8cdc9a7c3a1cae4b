"""Multi-head attention over small sequences in one compiled loop: every head of every batch is a task.

For a transformer of a few dozen tokens, NumPy's attention is a dozen calls (the heads split
out, two batched products over strided views, a scale, a softmax, the heads merged back), each
costing more to enter than its arithmetic.  Here one call does all of it: per (batch, head),
the head's keys are copied transposed and its values contiguous, so the two products run along
contiguous rows, and the softmax is the one of ``norm_kernels``, over all of a head's scores at once.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from .norm_kernels import softmax_of_rows
from .runtime import kernel


@kernel(error_model="numpy")
def attend_heads(q, k, v, mask, has_mask, scale, heads, out):
    """out[b, i, h*Dv:(h+1)*Dv] = softmax(q_bh[i] . k_bh^T * scale + mask) @ v_bh for every batch b and head h.

    q (B, L, H*D), k (B, S, H*D), v (B, S, H*Dv) and out (B, L, H*Dv) are float32 (any strides;
    head h holds columns h*D to (h+1)*D).  ``mask`` (Bm, Hm, Lm, S), each of Bm, Hm, Lm 1 or the
    full size, is added to the scaled scores when ``has_mask``.  Each score sums its D products in
    order; each output sums its S terms in order.
    """
    batch, length, width = q.shape
    source = k.shape[1]
    depth = width // heads
    value_depth = v.shape[2] // heads
    for task in prange(batch * heads):
        b = task // heads
        h = task - b * heads
        keys = np.empty((depth, source), np.float32)  # k_bh transposed: scores run along contiguous keys
        for j in range(source):
            for d in range(depth):
                keys[d, j] = k[b, j, h * depth + d]
        values = np.empty((source, value_depth), np.float32)
        for j in range(source):
            for d in range(value_depth):
                values[j, d] = v[b, j, h * value_depth + d]
        scores = np.zeros((length, source), np.float32)
        weights = np.empty((length, source), np.float32)
        shifted = np.empty((length, source), np.float32)
        scratch = np.empty((3, length * source), np.int32)
        row = np.empty(value_depth, np.float32)
        mask_b = b if mask.shape[0] > 1 else 0
        mask_h = h if mask.shape[1] > 1 else 0
        for i in range(length):
            line = scores[i]
            for d in range(depth):
                factor = q[b, i, h * depth + d]
                for j in range(source):
                    line[j] += factor * keys[d, j]
            if has_mask:
                mask_i = i if mask.shape[2] > 1 else 0
                for j in range(source):
                    line[j] = line[j] * scale + mask[mask_b, mask_h, mask_i, j]
            else:
                for j in range(source):
                    line[j] = line[j] * scale
        softmax_of_rows(scores, weights, shifted, scratch)
        for i in range(length):
            for d in range(value_depth):
                row[d] = 0.0
            for j in range(source):
                weight = weights[i, j]
                for d in range(value_depth):
                    row[d] += weight * values[j, d]
            for d in range(value_depth):
                out[b, i, h * value_depth + d] = row[d]
