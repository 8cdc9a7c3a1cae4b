"""nn.LayerNorm, nn.InstanceNorm, and the NumPy backend's softmax and log-softmax, through the row loops in
norm_kernels.py.

Layer norm: float32 inputs normalised over their trailing dims take the compiled loop,
with affine weights constant, absent or given as float32 inputs; everything else (other
dtypes) the reference op, which this subclass leaves in charge of params and errors.
Softmax: ``softmax_in_place`` replaces the backend primitive of that name (softmax ops,
attention) for float32 C-contiguous arrays over their last axis; log-softmax over the last
axis of float32 inputs runs its own row loop (CompiledSoftmax).
"""

from __future__ import annotations

import math

import numpy as np

from ..output_buffers import output_array
from ..ops import activation
from ..ops import norm_layer as reference_norm
from ..ops.norm_batch import InstanceNorm
from ..ops.specialize import same_shapes
from .runtime import KernelModule, launch_width

kernels = KernelModule("norm_kernels")


class CompiledLayerNorm(reference_norm.LayerNorm):
    """Float32 inputs normalised over their trailing dims: the compiled row loop (``fast_variance``:
    its own loop, with the formula's float32 rounding).  Weights given as inputs (JAX passes them as
    arguments) are read at each call when they are float32 of the normalised shape; anything else
    (other dtypes, wrong shapes: the reference says what is wrong) takes the reference."""

    def setup(self):
        super().setup()
        self.compiled = True
        self.weights_given = "input" in (self.weight_source[0], self.bias_source[0])
        self.kernel_note = "compiled (float32)"
        self._rows: dict = {}  # the affine weights as float32 rows, made on the first call that takes this path

    def row_affine(self):
        """(weight, bias) of constant or absent affine weights as contiguous float32 rows; ones and zeros
        without them.

        Made at the first call, not at build: only a real input of the normalised shape bounds
        their size (a file may declare normalized_shape=2^63 with no weights to check it against).
        """
        return self.cached(self._rows, "rows", self._make_rows)

    def _make_rows(self):
        width = math.prod(self.normalized_shape)
        weight, bias = self.static_weight, self.static_bias
        row_weight = np.ones(width, np.float32) if weight is None else \
            np.ascontiguousarray(np.reshape(weight, (width,)), dtype=np.float32)
        row_bias = np.zeros(width, np.float32) if bias is None else \
            np.ascontiguousarray(np.reshape(bias, (width,)), dtype=np.float32)
        return row_weight, row_bias

    def call_affine(self, inputs):
        """(weight, bias) rows for this call, those given as inputs taken as they come; None when one of
        them is not a float32 array of the normalised shape."""
        rows = list(self.row_affine())
        for place, (kind, position) in enumerate((self.weight_source, self.bias_source)):
            if kind != "input":
                continue
            value = inputs[position]
            if (not isinstance(value, np.ndarray) or value.dtype != np.float32
                    or tuple(value.shape) != self.normalized_shape):
                return None
            rows[place] = np.ascontiguousarray(value.reshape(-1))
        return rows

    def takes(self, x) -> bool:
        """Whether the compiled loop (or a kernel standing in for it) takes x: float32 ending in the
        normalised shape."""
        k = len(self.normalized_shape)
        return (self.compiled and isinstance(x, np.ndarray) and x.dtype == np.float32 and x.ndim >= k
                and tuple(x.shape[-k:]) == self.normalized_shape)

    def forward(self, *inputs):
        x = inputs[self.input_position()]
        rows = self.call_affine(inputs) if self.takes(x) else None
        return super().forward(*inputs) if rows is None else self.compiled_forward(x, rows)

    def specialized(self, inputs):
        """The compiled row loop called directly, its kernel, rows and constant weights resolved, while x
        keeps its class, dtype and shape (a 20 x 64 input: 4.6 us through ``forward``); None for weights
        given as inputs, whose rows ``forward`` reads at each call."""
        if len(inputs) != 1 or self.weights_given or not self.takes(inputs[0]) or inputs[0].size == 0:
            return None
        row_weight, row_bias = self.row_affine()
        shape, width = inputs[0].shape, row_weight.shape[0]
        rows = inputs[0].size // width
        if self.fast_variance:
            kernel, eps = kernels.layer_norm_rows_fast_variance, np.float32(self.eps)
        else:
            kernel, eps = kernels.layer_norm_rows, self.eps
        work = 3 * rows * width

        def direct(x):
            flat = np.ascontiguousarray(x.reshape(rows, width))
            out = output_array((rows, width), np.float32)
            kernel(work, flat, row_weight, row_bias, eps, out)
            return out.reshape(shape)

        return same_shapes(inputs, direct, self.forward)

    def compiled_forward(self, x, rows=None):
        """The compiled row loop over an x that ``takes`` accepted, with ``rows`` (weight, bias) or the
        constant ones."""
        row_weight, row_bias = self.row_affine() if rows is None else rows
        flat = np.ascontiguousarray(x.reshape(-1, row_weight.shape[0]))
        out = output_array(flat.shape, np.float32)
        if self.fast_variance:
            kernels.layer_norm_rows_fast_variance(3 * flat.size, flat, row_weight, row_bias, np.float32(self.eps), out)
        else:
            kernels.layer_norm_rows(3 * flat.size, flat, row_weight, row_bias, self.eps, out)
        return out.reshape(x.shape)


class CompiledInstanceNorm(InstanceNorm):
    """Instance norm without affine weights (RAFT's encoders) on batched float32 (N, C, *spatial)
    inputs: each (image, channel) plane is one row of ``layer_norm_rows`` with weight 1 and bias 0.
    Affine weights, running statistics, unbatched inputs and other dtypes: the reference."""

    def setup(self):
        super().setup()
        self.compiled = (not self.use_running_stats
                         and self.weight_source[0] == "none" and self.bias_source[0] == "none")
        self.kernel_note = "compiled (float32)" if self.compiled else "reference path: affine or running statistics"
        self._rows: dict = {}  # plane size -> (ones, zeros)

    def forward(self, *inputs):
        x = inputs[self.input_position()]
        batched_ranks = (3, 4, 5) if self.spatial is None else (self.spatial + 2,)
        if (not self.compiled or not isinstance(x, np.ndarray) or x.dtype != np.float32 or x.ndim not in batched_ranks
                or x.size == 0 or (self.channels is not None and x.shape[1] != self.channels)):
            return super().forward(*inputs)  # the reference checks shapes and runs everything else
        width = math.prod(x.shape[2:])
        ones, zeros = self.cached(self._rows, width,
                                  lambda: (np.ones(width, np.float32), np.zeros(width, np.float32)))
        rows = np.ascontiguousarray(np.reshape(x, (-1, width)))
        out = output_array(rows.shape, np.float32)
        kernels.layer_norm_rows(3 * rows.size, rows, ones, zeros, self.eps, out)
        return np.reshape(out, x.shape)


class CompiledSoftmax(activation.Softmax):
    """log_softmax over the last axis of float32 inputs: one row loop (``log_softmax_rows``) instead of
    NumPy's six passes (on (1, 3, 196, 196): 214 against 134 us for softmax).  Softmax itself already
    runs compiled through ``softmax_in_place``; everything else takes the reference."""

    def forward(self, x):
        if not (self.log and not self.negate and isinstance(x, np.ndarray) and x.dtype == np.float32
                and x.ndim >= 1 and x.size and (self.input_ranks is None or x.ndim in self.input_ranks)):
            return super().forward(x)
        dim = activation.implicit_softmax_dim(x.ndim) if self.dim is None else self.dim
        if dim not in (-1, x.ndim - 1):
            return super().forward(x)
        rows = np.ascontiguousarray(x.reshape(-1, x.shape[-1]))
        out = output_array(rows.shape, np.float32)
        count = launch_width(8 * rows.size)
        kernels.log_softmax_rows.launch(count > 1, rows, min(rows.shape[0], 4 * count) if count > 1 else 1, out)
        return out.reshape(x.shape)


KERNELS = [CompiledLayerNorm, CompiledInstanceNorm, CompiledSoftmax]


def softmax_last_axis(x) -> bool:
    """Softmax over the last axis of ``x`` in place, if x is float32, C-contiguous and not empty; False if not taken."""
    if x.dtype != np.float32 or not x.flags.c_contiguous or not x.flags.writeable or x.ndim < 1 or x.size == 0:
        return False
    rows = x.reshape(-1, x.shape[-1])
    count = launch_width(8 * rows.size)
    # On the calling thread, one block: each block makes its own scratch rows.
    kernels.softmax_rows.launch(count > 1, rows, min(rows.shape[0], 4 * count) if count > 1 else 1, rows)
    return True


def softmax_in_place(default, x, axis: int):
    """The ``softmax_in_place`` primitive of NumPy-array backends (``kuiper_add_primitives``): the
    compiled row loop over the last axis; ``default``, the backend's own, for everything else."""
    if axis in (-1, x.ndim - 1) and softmax_last_axis(x):
        return x
    return default(x, axis)
