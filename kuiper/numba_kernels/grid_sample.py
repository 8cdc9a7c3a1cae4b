"""F.grid_sample on the NumPy backend through the compiled loop in grid_sample_kernels.py.

Float32 4-D inputs and grids in bilinear or nearest mode take the compiled loop; bicubic,
3-D and other dtypes the reference (kuiper.ops.grid_sample), which this subclass leaves
in charge of params and errors.
"""

from __future__ import annotations

import numpy as np

from ..output_buffers import output_array
from ..ops.grid_sample import GridSample
from . import kernel_codes as codes
from .runtime import KernelModule

kernels = KernelModule("grid_sample_kernels")

_MODES = {"bilinear": codes.BILINEAR, "nearest": codes.NEAREST}
_PADDINGS = {"zeros": codes.ZEROS, "border": codes.BORDER, "reflection": codes.REFLECTION}


class CompiledGridSample(GridSample):
    def setup(self):
        super().setup()
        compiled = self.mode in _MODES
        self.kernel_note = "compiled (float32, 2-D)" if compiled else f"reference path: mode '{self.mode}'"

    def forward(self, *inputs):
        x, grid = self.ordered(inputs)
        if (self.mode not in _MODES or not isinstance(x, np.ndarray) or not isinstance(grid, np.ndarray)
                or x.dtype != np.float32 or grid.dtype != np.float32 or x.ndim != 4 or grid.ndim != 4
                or grid.shape[-1] != 2 or grid.shape[0] != x.shape[0]):
            return super().forward(*inputs)  # the reference checks shapes and runs everything else
        batch, channels = x.shape[:2]
        out = output_array((batch, channels, grid.shape[1], grid.shape[2]), np.float32)
        kernels.grid_sample_2d(out.size * 4, np.ascontiguousarray(x), np.ascontiguousarray(grid),
                               _MODES[self.mode], _PADDINGS[self.padding_mode], self.align_corners, out)
        return out


KERNELS = [CompiledGridSample]
