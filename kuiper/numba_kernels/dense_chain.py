"""The dense-chain provider: runs of small Linear layers, each reading the last, as one compiled call.

At batch 1 a Linear(32, 32) + ReLU is 1 K multiply-adds, tens of nanoseconds of arithmetic, and
the op path around it (the oneDNN or BLAS call, the epilogue, the checks) took 8-9 us: an MLP of
64 such layers spent all of its 0.6 ms between ops, where ONNX Runtime takes 0.08.  This provider
claims each run of steps that are float32 Linear layers with constant weights, small enough that
their arithmetic is below a call's overhead (``LAYER_WEIGHTS``), where each layer reads only the
one before it and nothing else reads what is between them; their epilogues must be one of the
activations the kernels know (``chains.layer_math``).  The run then costs one compiled call (``dense_chain``).

A call whose rows make a layer's work large (``chains.LAYER_CALL_WORK``: then the layers' own GEMMs
win), or whose input is not float32, runs the layers op by op
(``Partition.run_members``), exactly as without the provider.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ..output_buffers import output_array
from ..graph.providers import Partition
from ..limits import check_size
from ..ops.linear import LinearProjection
from . import chains
from .chains import NO_RESIDUAL, ChainProvider, layer_math, takes, takes_epilogue_inputs
from .runtime import KernelModule, launch_width
from .scratch import ScratchPool

kernels = KernelModule("dense_chain_kernels")

# Weights per layer (in * out features) up to which a Linear joins a chain: 64 K floats (256 KB) fit in
# a core's L2 cache, and at batch 1 such a layer is at most 64 K multiply-adds (a few microseconds).
LAYER_WEIGHTS = 1 << 16
# The kernel's layer table: a row per layer with these columns.  A layer computes
# AFTER(ACTIVATION(x @ W^T + b) + residual) where RESIDUAL is 1, else ACTIVATION(x @ W^T + b); the
# activations' codes are chains.ACTIVATIONS, their alpha and beta in the params table (ACTIVATION's in
# columns 0 and 1, AFTER's in 2 and 3).
IN, OUT, WEIGHT_AT, BIAS_AT, ACTIVATION, RESIDUAL, AFTER = range(7)
NO_BIAS = -1  # BIAS_AT of a layer without a bias


class DenseChain(Partition):
    """The claimed Linear layers as one ``dense_chain`` call."""

    fresh_output = True  # a new array every call

    def setup(self):
        ops = [unit.op for unit in self.members]
        self.in_features = ops[0].shape[1]
        self.out_features = ops[-1].shape[0]
        self.widest = max(op.shape[0] for op in ops)
        self.weights_per_row = sum(op.shape[0] * op.shape[1] for op in ops)
        self.largest_layer = max(op.shape[0] * op.shape[1] for op in ops)
        layers = np.zeros((len(ops), 7), np.int64)
        params = np.zeros((len(ops), 4), np.float32)
        weights, biases, weight_at, bias_at = [], [], 0, 0
        for index, op in enumerate(ops):
            (code, alpha, beta), residual, (after, alpha_after, beta_after) = layer_math(op)
            out_features, in_features = op.shape
            weights.append(np.ascontiguousarray(np.asarray(op.weight_t, np.float32).T).reshape(-1))  # (out, in) rows
            layers[index] = (in_features, out_features, weight_at, NO_BIAS, code, residual, after)
            weight_at += in_features * out_features
            if op.bias is not None:
                biases.append(np.asarray(op.bias, np.float32).reshape(-1))
                layers[index, BIAS_AT] = bias_at
                bias_at += out_features
            params[index] = (alpha, beta, alpha_after, beta_after)
        self.weights = np.concatenate(weights)
        self.biases = np.concatenate(biases) if biases else np.zeros(1, np.float32)
        self.layers, self.params = layers, params
        last = self.members[-1].node
        # Where the last layer's residual (its second input) is among the partition's inputs; None: none.
        self.residual_at = self.node.inputs.index(last.inputs[1]) if layers[-1, RESIDUAL] else None
        self._scratch = ScratchPool()  # rows -> (first, second) pairs

    def forward(self, *inputs):
        x = inputs[0]
        if not takes(x) or x.ndim < 1 or x.shape[-1] != self.in_features:
            return self.run_members(*inputs)  # the ops say what is wrong, or take what the kernel does not
        rows = math.prod(x.shape[:-1])
        work = rows * self.weights_per_row
        if rows * self.largest_layer > chains.LAYER_CALL_WORK or rows == 0:
            return self.run_members(*inputs)
        shape = x.shape[:-1] + (self.out_features,)
        residual = NO_RESIDUAL
        if self.residual_at is not None:
            residual = inputs[self.residual_at]
            if not takes(residual) or residual.shape != shape:
                return self.run_members(*inputs)  # a residual that broadcasts: the op's own epilogue
            residual = np.ascontiguousarray(residual).reshape(rows, self.out_features)
        check_size((rows, self.out_features), 4, self.node.describe())
        flat = np.ascontiguousarray(x).reshape(rows, self.in_features)
        out = output_array((rows, self.out_features), np.float32)
        pair = self._scratch.take(rows, functools.partial(self._buffers, rows))
        try:
            kernels.dense_chain.launch(launch_width(work) > 1, flat, self.weights, self.biases, self.layers,
                                       self.params, residual, pair[0], pair[1], out)
        finally:
            self._scratch.give_back(rows, pair)
        return out.reshape(shape)

    def _buffers(self, rows: int) -> tuple:
        """The values between layers for ``rows`` rows: two arrays of the widest layer's width."""
        check_size((2, rows, self.widest), 4, self.node.describe())
        return np.empty((rows, self.widest), np.float32), np.empty((rows, self.widest), np.float32)


class DenseChainProvider(ChainProvider):
    name = "dense-chain"
    partition = DenseChain

    def joins(self, unit) -> bool:
        """Whether the step is a Linear the chain kernel runs."""
        op = unit.op
        if not isinstance(op, LinearProjection) or op.weight_t is None or len(unit.node.outputs) != 1:
            return False
        if op.weight_t.dtype != np.float32 or (op.bias is not None and op.bias.dtype != np.float32):
            return False
        return op.shape[0] * op.shape[1] <= LAYER_WEIGHTS and takes_epilogue_inputs(unit)

    def fits_declared(self, members, context) -> bool:
        """Whether each layer stays under LAYER_CALL_WORK at the rows the file declares (free dims count as 1)."""
        shape = context.declared_shape(members[0].node.inputs[0])
        if not shape:
            return True
        rows = math.prod(d if isinstance(d, int) else 1 for d in shape[:-1])
        return rows * max(unit.op.shape[0] * unit.op.shape[1] for unit in members) <= chains.LAYER_CALL_WORK
