"""Nearest 2x upsampling (nn.Upsample, F.interpolate) of float32 maps as one compiled pass.

YOLOv5's neck upsamples conv outputs 2x.  The reference op gathers along each axis in turn: two
passes and two fresh arrays, the first one (N, C, 2H, W) dropped at once.  Here each input row is
written twice into its two output rows, in one pass into the one output, on the model's threads.

Only where the reference's source index is ``dst // 2`` on both axes: mode ``nearest``, 2-D, each
output dim exactly twice the input's (ATen's ``nearest_idx``; see ops/resize.py).  Every value is
copied, none computed: the output equals the reference's bit for bit, NaN and infinities too.
Anything else (other sizes or modes, other dtypes or ranks) takes the reference path.
"""

from __future__ import annotations

import numpy as np

from ..limits import check_size
from ..ops.resize import Interpolate, UpsampleNearest
from .runtime import KernelModule

kernels = KernelModule("resize_kernels")
FACTOR = 2


class CompiledNearest2x:
    """The compiled path of a nearest 2x upsampling (mixed in before the reference op class)."""

    def setup(self):
        super().setup()
        if self.mode == "nearest":
            self.kernel_note = "compiled (float32, 2-D, 2x nearest), reference path otherwise"

    def forward(self, *inputs):
        x = inputs[self.data_index]
        if (self.mode == "nearest" and isinstance(x, np.ndarray) and x.dtype == np.float32 and x.ndim == 4
                and x.size):
            out_size = tuple(size for size, _ in self.output_plan(tuple(x.shape[2:]), inputs))
            if out_size == (FACTOR * x.shape[2], FACTOR * x.shape[3]):
                check_size(tuple(x.shape[:2]) + out_size, 4, self.node.describe())
                out = np.empty(tuple(x.shape[:2]) + out_size, np.float32)
                kernels.nearest_2x(out.size, np.ascontiguousarray(x), out)
                return out
        return super().forward(*inputs)


class CompiledInterpolate(CompiledNearest2x, Interpolate):
    """F.interpolate / nn.Upsample."""


class CompiledUpsampleNearest(CompiledNearest2x, UpsampleNearest):
    """nn.UpsamplingNearest2d."""


KERNELS = [CompiledInterpolate, CompiledUpsampleNearest]
