"""A chain of small 2-D convolutions, each with its activation, in one compiled call per batch.

Each image goes through every layer with its planes in cache.  A layer's input is first written
into a zero-padded buffer of Hp x Wp planes; then every output row y, column x of output channel
co is the sum over (ci, ky, kx) of w * padded[ci, s * y + ky, s * x + kx] (s the stride).  Computed
over the padded width (x up to Wp, the columns past W_out thrown away), output j = y * Wp + x reads
padded element s * j + ky * Wp + kx of the plane: a contiguous run (every s-th element) starting at
ky * Wp + kx, so each tap is one long vectorised multiply-add over H_out * Wp values instead of
H_out short rows.  Four output channels are summed at once (``_taps_four``): each tap's run is read once
for the four, and there are a quarter as many loops, whose set-up was the time of a small layer (24
layers of 8 channels on 8 x 8: 0.18 -> 0.11 ms a call).  The bias, activation and residual are applied as
the valid columns are copied into the next layer's padded buffer, or into the output.

The layer table is conv_chain.py's; activations are dense_chain_kernels.activate's.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .conv_chain import (ACTIVATION, AFTER, BIAS_AT, C_IN, C_OUT, H_IN, H_OUT, HP, KH, KW, NO_BIAS, PL, PT,
                         RESIDUAL, STRIDE, W_IN, W_OUT, WEIGHT_AT, WP)
from .dense_chain_kernels import SUM_IN_ANY_ORDER, activate
from .runtime import kernel


@njit(inline="always")
def _geometry(layers, layer):
    """(C_IN, KH, KW, HP, WP, STRIDE, the sums of one channel: H_OUT * WP) of a layer's row."""
    wp = layers[layer, WP]
    return (layers[layer, C_IN], layers[layer, KH], layers[layer, KW], layers[layer, HP], wp,
            layers[layer, STRIDE], layers[layer, H_OUT] * wp)


@njit(inline="always")
def _taps(padded, sums, weights, layers, layer, co):
    """sums[j] = sum over (ci, ky, kx) of w[co, ci, ky, kx] * padded[ci, ky * WP + kx + s * j], j < H_OUT * WP.

    ``sums`` is an array the kernel allocated itself: the compiler then knows that it shares no
    memory with ``padded`` and vectorises the loop (into a slice of an argument it did not).
    """
    c_in, kh, kw, hp, wp, stride, span = _geometry(layers, layer)
    weight_at = layers[layer, WEIGHT_AT] + co * c_in * kh * kw
    sums[:span] = 0.0
    for ci in range(c_in):
        for ky in range(kh):
            for kx in range(kw):
                w = weights[weight_at + (ci * kh + ky) * kw + kx]
                start = ci * hp * wp + ky * wp + kx
                if stride == 1:  # a contiguous slice: the loop vectorises without gathers
                    source = padded[start: start + span]
                    for j in range(span):
                        sums[j] += w * source[j]
                else:
                    every = padded[start: start + stride * span: stride]
                    for j in range(span):
                        sums[j] += w * every[j]


@njit(inline="always")
def _taps_four(padded, sums, weights, layers, layer, co):
    """``_taps`` for channels co to co + 3 at once (into rows 0-3 of ``sums``): each tap's source is read
    once for all four, and the loops over the taps are a quarter as many, where their set-up, not the
    multiply-adds of a small layer's short rows, was the time."""
    c_in, kh, kw, hp, wp, stride, span = _geometry(layers, layer)
    taps = c_in * kh * kw
    weight_at = layers[layer, WEIGHT_AT] + co * taps
    s0, s1, s2, s3 = sums[0], sums[1], sums[2], sums[3]
    s0[:span] = 0.0
    s1[:span] = 0.0
    s2[:span] = 0.0
    s3[:span] = 0.0
    for ci in range(c_in):
        for ky in range(kh):
            for kx in range(kw):
                tap = weight_at + (ci * kh + ky) * kw + kx
                w0 = weights[tap]
                w1 = weights[tap + taps]
                w2 = weights[tap + 2 * taps]
                w3 = weights[tap + 3 * taps]
                start = ci * hp * wp + ky * wp + kx
                if stride == 1:  # a contiguous slice: the loop vectorises without gathers
                    source = padded[start: start + span]
                    for j in range(span):
                        value = source[j]
                        s0[j] += w0 * value
                        s1[j] += w1 * value
                        s2[j] += w2 * value
                        s3[j] += w3 * value
                else:
                    every = padded[start: start + stride * span: stride]
                    for j in range(span):
                        value = every[j]
                        s0[j] += w0 * value
                        s1[j] += w1 * value
                        s2[j] += w2 * value
                        s3[j] += w3 * value


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
        sums = np.empty((4, span), np.float32)
        _copy_in(x[n], padded[n, 0], layers)
        for layer in range(count):
            last = layer == count - 1
            target = out[n] if last else padded[n, (layer + 1) % 2]
            extra = residual[n] if last and layers[layer, RESIDUAL] != 0 else residual[0]
            if not last:
                target[:] = 0.0
            channels = layers[layer, C_OUT]
            following = -1 if last else layer + 1
            for co in range(0, channels - 3, 4):
                _taps_four(padded[n, layer % 2], sums, weights, layers, layer, co)
                for k in range(4):
                    _finish(sums[k], co + k, biases, params, layers, layer, extra, target, following)
            for co in range(channels - channels % 4, channels):
                _taps(padded[n, layer % 2], sums[0], weights, layers, layer, co)
                _finish(sums[0], co, biases, params, layers, layer, extra, target, following)
