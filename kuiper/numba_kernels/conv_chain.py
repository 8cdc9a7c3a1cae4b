"""The conv-chain provider: runs of small 2-D convolutions, each reading the last, as one compiled call.

A Conv2d(8, 8, 3, padding=1) on an 8 x 8 image is 37 K multiply-adds, a few microseconds of
arithmetic, and its op path (the oneDNN call, its post-ops, the checks) took 16 us: a net of 24
such layers spent most of its 0.4-0.6 ms between ops, where ONNX Runtime takes 0.1-0.2.  This
provider claims each run of two or more float32 Conv2d steps with constant weights, groups 1,
one stride for both dims, dilation 1 and zero padding, each reading only the one before it, whose epilogues are
activations (and, on the last, a residual sum) as dense_chain.layer_math reads them.  The run
then costs one compiled call (``conv_chain_kernels.conv_chain``).

The table of a run depends on the image size, so it is made on the first call with each size.
Where a layer would do more than ``chains.LAYER_CALL_WORK`` multiply-adds in a call (then oneDNN's blocked
kernels, many times faster per multiply-add, win), or the input is not a float32 batch of
images of the channels the first layer takes, the convolutions run op by op
(``Partition.run_members``), exactly as without the provider.
"""

from __future__ import annotations

import functools
import math
import threading

import numpy as np

from ..output_buffers import output_array
from ..graph.providers import Partition
from ..limits import check_size
from ..ops.conv import ConvNd
from . import chains
from .chains import NO_RESIDUAL, ChainProvider, layer_math, takes, takes_epilogue_inputs
from .runtime import KernelModule, launch_width
from .scratch import ScratchPool

kernels = KernelModule("conv_chain_kernels")

# Weights per layer (out * in * kh * kw) up to which a convolution joins a chain (256 KB of float32).
LAYER_WEIGHTS = 1 << 16
# Table sizes (image sizes) kept per chain.
MAX_TABLES = 8

# The kernel's layer table: a row per layer.  The layer's input planes (C_IN, H_IN, W_IN) are padded
# to (HP, WP) with PT rows above and PL columns left; it computes C_OUT planes of H_OUT x W_OUT, its
# kernel KH x KW moved by STRIDE along both dims.
(C_IN, H_IN, W_IN, C_OUT, H_OUT, W_OUT, KH, KW, PT, PL, HP, WP, WEIGHT_AT, BIAS_AT, ACTIVATION, RESIDUAL,
 AFTER, STRIDE) = range(18)
NO_BIAS = -1


def _geometry(unit) -> tuple:
    """(in channels, out channels, kernel height, kernel width, ((top, bottom), (left, right)) pads)."""
    out_channels, in_channels, kh, kw = unit.node.attrs["weight"].shape
    return in_channels, out_channels, kh, kw, unit.op.static_pads


def size_table(layer_rows, height: int, width: int):
    """(layer table, padded size, a channel's most sums, output shape, work per image, the largest layer's work
    per image) of a chain for an
    image size, from each layer's ``_geometry`` + (weight at, bias at, activation, residual, after,
    stride); None when a layer's output would be empty or its work per image above LAYER_CALL_WORK."""
    rows, padded, sums, work, largest = [], 0, 0, 0, 0
    for c_in, c_out, kh, kw, ((top, bottom), (left, right)), w_at, b_at, code, residual, after, stride in layer_rows:
        hp, wp = height + top + bottom, width + left + right
        if hp < kh or wp < kw:
            return None
        h_out, w_out = (hp - kh) // stride + 1, (wp - kw) // stride + 1
        layer_work = c_out * c_in * kh * kw * h_out * wp
        if layer_work > chains.LAYER_CALL_WORK:
            return None
        rows.append((c_in, height, width, c_out, h_out, w_out, kh, kw, top, left, hp, wp, w_at, b_at, code,
                     residual, after, stride))
        # A tap reads every stride-th element from its start, over the padded width of each output row.
        padded = max(padded, c_in * hp * wp + stride * h_out * wp + kw)
        sums = max(sums, h_out * wp)
        work += layer_work
        largest = max(largest, layer_work)
        height, width = h_out, w_out
    return np.array(rows, np.int64), padded, sums, (rows[-1][3], height, width), work, largest


class ConvChain(Partition):
    """The claimed convolutions as one ``conv_chain`` call."""

    fresh_output = True  # a new array every call

    def setup(self):
        ops = [unit.op for unit in self.members]
        weights, biases, weight_at, bias_at = [], [], 0, 0
        self.layer_rows = []  # per layer: the size-independent part of its table row
        params = np.zeros((len(ops), 4), np.float32)
        for index, (unit, op) in enumerate(zip(self.members, ops)):
            weight = np.ascontiguousarray(unit.node.attrs["weight"], np.float32)
            (code, alpha, beta), residual, (after, alpha_after, beta_after) = layer_math(op)
            out_channels = weight.shape[0]
            bias = op.static_bias_vector
            self.layer_rows.append(_geometry(unit) + (weight_at, NO_BIAS if bias is None else bias_at, code,
                                                      int(residual), after, op.stride[0]))
            weights.append(weight.reshape(-1))
            weight_at += weight.size
            if bias is not None:
                biases.append(np.asarray(bias, np.float32).reshape(-1))
                bias_at += out_channels
            params[index] = (alpha, beta, alpha_after, beta_after)
        self.weights = np.concatenate(weights)
        self.biases = np.concatenate(biases) if biases else np.zeros(1, np.float32)
        self.params = params
        self.in_channels = self.layer_rows[0][0]
        last = self.members[-1].node
        self.residual_at = self.node.inputs.index(last.inputs[1]) if self.layer_rows[-1][8] else None
        self._tables: dict[tuple[int, int], tuple | None] = {}  # image size -> (table, sizes) or None: too large
        self._tables_lock = threading.Lock()
        self._scratch = ScratchPool()  # (images, padded size) -> padded buffers

    def table(self, height: int, width: int):
        found = self._tables.get((height, width), False)
        if found is False:
            found = size_table(self.layer_rows, height, width)
            with self._tables_lock:
                if len(self._tables) >= MAX_TABLES:
                    self._tables.clear()
                self._tables[(height, width)] = found
        return found

    def forward(self, *inputs):
        x = inputs[0]
        if not takes(x) or x.ndim != 4 or x.shape[1] != self.in_channels or x.shape[0] == 0:
            return self.run_members(*inputs)  # the ops say what is wrong, or take what the kernel does not
        found = self.table(x.shape[2], x.shape[3])
        if found is None:
            return self.run_members(*inputs)
        layers, padded_size, sums_size, out_shape, work, largest = found
        images = x.shape[0]
        if images * largest > chains.LAYER_CALL_WORK:
            return self.run_members(*inputs)  # many images: the layers' own kernels win
        shape = (images,) + out_shape
        residual = NO_RESIDUAL
        if self.residual_at is not None:
            residual = inputs[self.residual_at]
            if not takes(residual) or residual.shape != shape:
                return self.run_members(*inputs)  # a residual that broadcasts: the op's own epilogue
            residual = np.ascontiguousarray(residual).reshape(images, -1)
        check_size(shape, 4, self.node.describe())
        out = output_array((images, math.prod(out_shape)), np.float32)
        key = (images, padded_size)
        padded = self._scratch.take(key, functools.partial(self._padded, images, padded_size))
        try:
            flat = np.ascontiguousarray(x).reshape(images, -1)
            kernels.conv_chain.launch(launch_width(images * work) > 1, flat, self.weights, self.biases, layers,
                                      self.params, residual, padded, sums_size, out)
        finally:
            self._scratch.give_back(key, padded)
        return out.reshape(shape)

    def _padded(self, images: int, size: int) -> np.ndarray:
        """Each image's two padded layer inputs."""
        check_size((images, 2, size), 4, self.node.describe())
        return np.empty((images, 2, size), np.float32)


class ConvChainProvider(ChainProvider):
    name = "conv-chain"
    partition = ConvChain

    def joins(self, unit) -> bool:
        """Whether the step is a convolution the chain kernel runs."""
        op, node = unit.op, unit.node
        if not isinstance(op, ConvNd) or op.spatial != 2 or op.static_weight is None or len(node.outputs) != 1:
            return False
        weight, bias = node.attrs.get("weight"), op.static_bias_vector
        if weight is None or weight.dtype != np.float32 or weight.ndim != 4:
            return False
        if bias is not None and bias.dtype != np.float32:
            return False
        if op.groups != 1 or op.stride[0] != op.stride[1] or op.dilation != (1, 1) or op.padding_mode != "zeros":
            return False
        return weight.size <= LAYER_WEIGHTS and takes_epilogue_inputs(unit)

    def fits_declared(self, members, context) -> bool:
        """Whether the run's layers stay under LAYER_CALL_WORK at the batch and image size the file declares
        (a free size: yes): a run over it keeps ResNet-18's 64-channel 56 x 56 convolutions apart, with the
        native layouts between them."""
        shape = context.declared_shape(members[0].node.inputs[0])
        if shape is None or len(shape) != 4 or not all(isinstance(d, int) for d in shape[2:]):
            return True
        rows = [_geometry(unit) + (0, NO_BIAS, 0, 0, 0, unit.op.stride[0]) for unit in members]
        found = size_table(rows, shape[2], shape[3])
        images = shape[0] if isinstance(shape[0], int) else 1
        return found is not None and images * found[5] <= chains.LAYER_CALL_WORK
