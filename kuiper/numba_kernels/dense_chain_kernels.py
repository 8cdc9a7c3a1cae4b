"""A chain of small dense layers, y = f(x @ W^T + b) one after another, in one compiled call.

Each row of the input goes through every layer while it is in cache; the layers'
weights lie in one array, their biases in another, and a table says where each layer's are,
so one call runs the whole chain whatever its length (the kernel is compiled once, not per
model).  Each output feature is a dot product of the row with a row of W (out, in), which the compiler
vectorises by summing each output's products in SIMD lanes (in another order than one by one,
as BLAS does too), then adds the bias.

The layer table is dense_chain.py's, the activation codes chains.py's (``ACTIVATIONS``: oneDNN's
post-op names, read from a Linear's epilogue; ``alpha``/``beta`` as oneDNN defines them).  A NaN stays NaN
through each activation (comparisons with NaN are false), as in PyTorch.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .chains import ACTIVATIONS
from .dense_chain import ACTIVATION, AFTER, BIAS_AT, IN, NO_BIAS, OUT, RESIDUAL, WEIGHT_AT
from .runtime import kernel

# Each output's sum may be taken in any order (SIMD lanes of partial sums, as BLAS takes it) and with
# fused multiply-adds; no flag that lets the compiler assume there is no NaN or infinity.
SUM_IN_ANY_ORDER = {"reassoc", "contract"}
RELU, CLIP, LOGISTIC, SWISH, HARDSWISH, GELU_ERF = (ACTIVATIONS[name] for name in (
    "eltwise_relu", "eltwise_clip", "eltwise_logistic", "eltwise_swish", "eltwise_hardswish", "eltwise_gelu_erf"))


@njit(inline="always")
def activate(value, code, alpha, beta):
    if code == RELU:
        if value < 0.0:
            value = 0.0
    elif code == CLIP:  # clip(value, alpha, beta)
        if value < alpha:
            value = alpha
        if value > beta:
            value = beta
    elif code == LOGISTIC:
        value = 1.0 / (1.0 + math.exp(-value))
    elif code == SWISH:  # swish: value * logistic(alpha * value)
        value = value / (1.0 + math.exp(-alpha * value))
    elif code == HARDSWISH:  # hardswish: value * clip(alpha * value + beta, 0, 1)
        gate = alpha * value + beta
        if gate < 0.0:
            gate = 0.0
        if gate > 1.0:
            gate = 1.0
        value = value * gate
    elif code == GELU_ERF:
        value = 0.5 * value * (1.0 + math.erf(value * 0.7071067811865476))
    return value


@njit(inline="always")
def _layer(source, target, weights, biases, layers, params, layer, residual):
    """target[:n_out] = f(source[:n_in] @ W^T + b), or g(f(...) + residual) where the layer table
    says the layer adds one, for one row (W as (out, in) rows)."""
    n_in = layers[layer, IN]
    n_out = layers[layer, OUT]
    weight_at = layers[layer, WEIGHT_AT]
    bias_at = layers[layer, BIAS_AT]
    code = layers[layer, ACTIVATION]
    alpha = params[layer, 0]
    beta = params[layer, 1]
    adds = layers[layer, RESIDUAL] != 0
    after = layers[layer, AFTER]
    alpha_after = params[layer, 2]
    beta_after = params[layer, 3]
    for o in range(n_out):
        # A slice per row, indexed from 0 by the loop: an index the compiler cannot prove non-negative
        # (``row + k``) is checked for wrapping around at each element, which kept the loop from
        # vectorising (10x slower).
        row = weights[weight_at + o * n_in: weight_at + (o + 1) * n_in]
        total = np.float32(0.0)
        for k in range(n_in):
            total += source[k] * row[k]
        if bias_at != NO_BIAS:
            total += biases[bias_at + o]
        if code != 0:
            total = activate(total, code, alpha, beta)
        if adds:
            total += residual[o]
            if after != 0:
                total = activate(total, after, alpha_after, beta_after)
        target[o] = total


@kernel(fastmath=SUM_IN_ANY_ORDER)  # the caller's flags hold for what numba inlines into it
def dense_chain(x, weights, biases, layers, params, residual, first, second, out):
    """out = the chain of ``layers`` over each row of x (rows, in); ``first``/``second`` (rows, widest)
    hold the values between layers, layer l writing ``first`` when l is even and ``second`` when odd.
    ``residual`` (rows, out) is what a layer that adds one adds (only the last may: a (1, 1) dummy else)."""
    rows = x.shape[0]
    count = layers.shape[0]
    for r in prange(rows):
        for layer in range(count):
            if layer == 0:
                source = x[r]
            elif layer % 2 == 1:
                source = first[r]
            else:
                source = second[r]
            if layer == count - 1:
                target = out[r]
            elif layer % 2 == 0:
                target = first[r]
            else:
                target = second[r]
            added = residual[r] if layers[layer, RESIDUAL] != 0 else residual[0]
            _layer(source, target, weights, biases, layers, params, layer, added)
