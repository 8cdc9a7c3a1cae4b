"""nn.BatchNorm (inference) on the NumPy backend: one compiled pass per (image, channel) plane, or
per image where each plane is one value (a BatchNorm1d on (N, C)).

The reference computes ``x * scale + shift`` in two NumPy passes and a temporary, and the
ReLU that usually follows (DenseNet's BN-ReLU-conv layers, a pre-activation ResNet) is a third
pass.  Here a BatchNorm whose statistics and affine weights are all constants takes the
elementwise op that reads it as its epilogue (kuiper/graph/fusion.py); the kernel applies a
ReLU, ReLU6 or other clamp (what ``conv_post_ops`` recognises as one) in the same pass, and
runs any other epilogue after it, as the elementwise op would have.  Other dtypes, unbatched
inputs and statistics given as inputs take the reference op, which raises its errors.
"""

from __future__ import annotations

import math

import numpy as np

from ..ops.epilogue import WithEpilogue
from ..ops.norm_batch import BatchNorm
from . import conv_post_ops
from .runtime import KernelModule

kernels = KernelModule("batch_norm_kernels")

NO_CLAMP = (-math.inf, math.inf)


def clamp_of(epilogue, operand: int) -> tuple[float, float] | None:
    """(low, high) when the epilogue is a clamp of the op's result (none: NO_CLAMP), else None."""
    steps = conv_post_ops.post_ops_for(epilogue, operand)
    if steps == ():
        return NO_CLAMP
    if steps is not None and len(steps) == 1:
        algorithm, alpha, beta = steps[0]
        if algorithm == "eltwise_relu" and alpha == 0.0:
            return (0.0, math.inf)
        if algorithm == "eltwise_clip":
            return (alpha, beta)
    return None


class CompiledBatchNorm(WithEpilogue, BatchNorm):
    """nn.BatchNorm1d/2d/3d and F.batch_norm with constant statistics, float32, in one compiled pass."""

    unary_epilogues_only = True  # its inputs are checked by name: an epilogue's extra inputs would not pass

    @classmethod
    def takes_epilogue(cls, node) -> bool:
        """The fusion pass may give a BatchNorm of constants (one input) its elementwise reader."""
        return len(node.inputs) == 1 and all(key in node.attrs for key in ("running_mean", "running_var"))

    def setup(self):
        super().setup()
        self.read_epilogue()
        self.clamp = NO_CLAMP if self.epilogue is None else clamp_of(self.epilogue, self.epilogue_operand)
        self.compiled = self.static and self.scale.dtype == np.float32 and self.shift.dtype == np.float32
        self.kernel_note = "compiled (float32), one pass" if self.compiled else "reference path"
        if self.compiled and self.epilogue is not None:
            where = "in the same pass" if self.clamp is not None else "after it"
            self.kernel_note += f"; epilogue {', '.join(self.node.params.get('epilogue_members', []))} {where}"

    def weights_are_constant(self) -> bool:
        return self.static

    def compute_with_epilogue(self, x, extras):
        """A clamp in the same pass; any other epilogue after the one-pass batch norm."""
        if self.clamp is not None:
            return self._one_pass(x, self.clamp)
        out = self._one_pass(x, NO_CLAMP)
        return None if out is None else self.run_epilogue(out, extras)

    def forward(self, *inputs):
        if self.epilogue is None:
            out = self._one_pass(inputs[0], NO_CLAMP)
            return out if out is not None else super().forward(*inputs)
        return super().forward(*inputs)  # WithEpilogue: compute_with_epilogue, else the op then the epilogue

    def _one_pass(self, x, clamp):
        """The normalised x (with ``clamp``) in one compiled pass, or None where the reference takes x."""
        if (not self.compiled or not isinstance(x, np.ndarray) or x.dtype != np.float32 or x.ndim < 2
                or x.shape[1] != self.channels or x.size == 0):
            return None
        low, high = np.float32(clamp[0]), np.float32(clamp[1])
        if x.size == x.shape[0] * x.shape[1]:  # (N, C), or planes of one value: a row per image
            rows = np.ascontiguousarray(np.reshape(x, (x.shape[0], x.shape[1])))
            out = np.empty_like(rows)
            kernels.scale_shift_rows(rows.size, rows, self.scale, self.shift, low, high, out)
            return np.reshape(out, x.shape)
        planes = np.ascontiguousarray(np.reshape(x, (x.shape[0] * x.shape[1], -1)))
        out = np.empty_like(planes)
        kernels.scale_shift_planes(planes.size, planes, self.scale, self.shift, low, high, out)
        return np.reshape(out, x.shape)


KERNELS = [CompiledBatchNorm]
