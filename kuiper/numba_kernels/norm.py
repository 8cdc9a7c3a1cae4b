"""nn.LayerNorm and softmax / log_softmax on the NumPy backend through the row loops in norm_kernels.py.

Float32 inputs normalised over their trailing dims (layer norm with constant or no
affine weights; softmax over the last dim) take the compiled loop; everything else
(softmin, another dim, weights given as inputs, other dtypes) the reference op,
which this subclass leaves in charge of params and errors.
"""

from __future__ import annotations

import math

import numpy as np

from ..ops import activation as reference_activation
from ..ops import norm as reference_norm
from ..ops.base import normalize_axis
from . import norm_kernels as kernels
from .runtime import launch_threads


class CompiledLayerNorm(reference_norm.LayerNorm):
    def setup(self):
        super().setup()
        width = math.prod(self.normalized_shape)
        sources_ok = self.weight_source[0] != "input" and self.bias_source[0] != "input"
        self.compiled = sources_ok
        self.kernel_note = "compiled (float32)" if sources_ok else "reference path: weight or bias is an input"
        if sources_ok:
            weight, bias = self.static_weight, self.static_bias
            self.row_weight = np.ones(width, np.float32) if weight is None else \
                np.ascontiguousarray(np.reshape(weight, (width,)), dtype=np.float32)
            self.row_bias = np.zeros(width, np.float32) if bias is None else \
                np.ascontiguousarray(np.reshape(bias, (width,)), dtype=np.float32)

    def forward(self, *inputs):
        x = inputs[self.input_position()]
        k = len(self.normalized_shape)
        if (not self.compiled or not isinstance(x, np.ndarray) or x.dtype != np.float32 or x.ndim < k
                or tuple(x.shape[-k:]) != self.normalized_shape):
            return super().forward(*inputs)
        rows = np.ascontiguousarray(np.reshape(x, (-1, self.row_weight.shape[0])))
        out = np.empty_like(rows)
        with launch_threads():
            kernels.layer_norm_rows(rows, self.row_weight, self.row_bias, self.eps, out)
        return np.reshape(out, x.shape)


class CompiledSoftmax(reference_activation.Softmax):
    kernel_note = "compiled over the last dim (float32)"

    def forward(self, x):
        if self.negate or self.dim is None or self.node.type == "nn.Softmax2d" or not isinstance(x, np.ndarray) or x.dtype != np.float32 or x.ndim < 1:
            return super().forward(x)
        if normalize_axis(self.dim, x.ndim, self) != x.ndim - 1 or x.shape[-1] == 0:
            return super().forward(x)
        rows = np.ascontiguousarray(np.reshape(x, (-1, x.shape[-1])))
        out = np.empty_like(rows)
        with launch_threads():
            kernels.softmax_rows(rows, self.log, out)
        return np.reshape(out, x.shape)


KERNELS = [CompiledLayerNorm, CompiledSoftmax]
