"""A chain of small stride-1 2-D convolutions, each with its activation, in one compiled call per batch.

Each image goes through every layer with its planes in cache.  A layer's input is first written
into a zero-padded buffer of Hp x Wp planes; then every output row y, column x of output channel
co is the sum over (ci, ky, kx) of w * padded[ci, y + ky, x + kx].  Computed over the padded width
(x up to Wp, the columns past W_out thrown away), that input is a contiguous run of the padded
plane starting at ky * Wp + kx, so each tap is one long vectorised multiply-add over
H_out * Wp values instead of H_out short rows.  The bias, activation and residual are applied as
the valid columns are copied into the next layer's padded buffer, or into the output.

The layer table is conv_chain.py's; activations are dense_chain_kernels.activate's.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .conv_chain import (ACTIVATION, AFTER, BIAS_AT, C_IN, C_OUT, H_IN, H_OUT, HP, KH, KW, NO_BIAS, PL, PT,
                         RESIDUAL, W_IN, W_OUT, WEIGHT_AT, WP)
from .dense_chain_kernels import SUM_IN_ANY_ORDER, activate
from .runtime import kernel


@njit(inline="always")
def _taps(padded, sums, weights, layers, layer, co):
    """sums[j] = sum over (ci, ky, kx) of w[co, ci, ky, kx] * padded[ci, ky * WP + kx + j], j < H_OUT * WP.

    ``sums`` is an array the kernel allocated itself: the compiler then knows that it shares no
    memory with ``padded`` and vectorises the loop (into a slice of an argument it did not).
    """
    c_in = layers[layer, C_IN]
    kh = layers[layer, KH]
    kw = layers[layer, KW]
    hp = layers[layer, HP]
    wp = layers[layer, WP]
    span = layers[layer, H_OUT] * wp
    weight_at = layers[layer, WEIGHT_AT] + co * c_in * kh * kw
    sums[:span] = 0.0
    for ci in range(c_in):
        for ky in range(kh):
            for kx in range(kw):
                w = weights[weight_at + (ci * kh + ky) * kw + kx]
                start = ci * hp * wp + ky * wp + kx
                source = padded[start: start + span]
                for j in range(span):
                    sums[j] += w * source[j]


@njit(inline="always")
def _finish(sums, co, biases, params, layers, layer, residual, target, next_layer):
    """Channel co's valid columns of ``sums`` with bias, activation and residual, into ``target``: the next
    layer's padded buffer (its interior at that layer's PT, PL) or, for the last layer, the output."""
    h_out = layers[layer, H_OUT]
    w_out = layers[layer, W_OUT]
    wp = layers[layer, WP]
    bias_at = layers[layer, BIAS_AT]
    code = layers[layer, ACTIVATION]
    adds = layers[layer, RESIDUAL] != 0
    after = layers[layer, AFTER]
    if next_layer >= 0:
        plane = layers[next_layer, HP] * layers[next_layer, WP]
        row = layers[next_layer, WP]
        top = layers[next_layer, PT]
        left = layers[next_layer, PL]
    else:
        plane = h_out * w_out
        row = w_out
        top = 0
        left = 0
    bias = biases[bias_at + co] if bias_at != NO_BIAS else 0.0
    for y in range(h_out):
        source = sums[y * wp: y * wp + w_out]
        start = co * plane + (y + top) * row + left
        out = target[start: start + w_out]
        extra = residual[(co * h_out + y) * w_out: (co * h_out + y + 1) * w_out] if adds else residual[0:w_out]
        for x in range(w_out):
            value = source[x] + bias
            if code != 0:
                value = activate(value, code, params[layer, 0], params[layer, 1])
            if adds:
                value += extra[x]
                if after != 0:
                    value = activate(value, after, params[layer, 2], params[layer, 3])
            out[x] = value


@njit(inline="always")
def _copy_in(image, target, layers):
    """The first layer's input planes (C_IN, H_IN, W_IN), flattened, into its padded buffer (zeroed)."""
    channels = layers[0, C_IN]
    height = layers[0, H_IN]
    width = layers[0, W_IN]
    hp = layers[0, HP]
    wp = layers[0, WP]
    top = layers[0, PT]
    left = layers[0, PL]
    target[:] = 0.0
    for c in range(channels):
        for y in range(height):
            source = image[(c * height + y) * width: (c * height + y + 1) * width]
            start = c * hp * wp + (y + top) * wp + left
            target[start: start + width] = source


@kernel(fastmath=SUM_IN_ANY_ORDER)  # the caller's flags hold for what numba inlines into it
def conv_chain(x, weights, biases, layers, params, residual, padded, span, out):
    """out[n] = the chain of ``layers`` over image x[n] (C, H, W flattened); ``padded`` (N, 2, size) holds
    each layer's padded input (layer l reads padded[n, l % 2]); ``span`` is the most sums a channel of a
    layer has (H_OUT * WP); ``residual`` (N, out size) is what the last layer adds where its row says
    so (a (1, 1) placeholder when it adds none)."""
    images = x.shape[0]
    count = layers.shape[0]
    for n in prange(images):
        sums = np.empty(span, np.float32)
        _copy_in(x[n], padded[n, 0], layers)
        for layer in range(count):
            last = layer == count - 1
            target = out[n] if last else padded[n, (layer + 1) % 2]
            extra = residual[n] if last and layers[layer, RESIDUAL] != 0 else residual[0]
            if not last:
                target[:] = 0.0
            for co in range(layers[layer, C_OUT]):
                _taps(padded[n, layer % 2], sums, weights, layers, layer, co)
                _finish(sums, co, biases, params, layers, layer, extra, target, -1 if last else layer + 1)
