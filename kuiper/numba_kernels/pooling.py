"""nn.MaxPool2d and nn.AvgPool2d on the NumPy backend through the compiled loops in pool_kernels.py.

Float32 inputs of rank 3 or 4 take the compiled loop; anything else the reference
(kuiper.ops.pooling_max, pooling_average), which these subclasses leave in charge of params and errors.
"""

from __future__ import annotations

import numpy as np

from ..ops.pooling_average import AvgPool2d
from ..ops.pooling_max import MaxPool2d
from ..ops.pooling_window import pool_output_size
from .runtime import KernelModule

kernels = KernelModule("pool_kernels")


class CompiledMaxPool2d(MaxPool2d):
    kernel_note = "compiled (float32)"

    def forward(self, x):
        if (self.return_indices or not isinstance(x, np.ndarray) or x.dtype != np.float32
                or x.ndim not in (3, 4)):
            return super().forward(x)  # indices and other dtypes: the reference
        height, width = x.shape[-2:]
        outs = [
            pool_output_size(size, k, s, p, d, self.ceil_mode)
            for size, k, s, p, d in zip((height, width), self.kernel, self.stride, self.padding, self.dilation)
        ]
        if min(outs) < 1:
            return super().forward(x)  # the reference decides what an empty output is
        planes = np.ascontiguousarray(np.reshape(x, (-1, height, width)))
        out = np.empty((planes.shape[0], outs[0], outs[1]), np.float32)
        kernels.max_pool2d(out.size * (self.kernel[0] + self.kernel[1]), planes, self.kernel[0], self.kernel[1],
                           self.stride[0], self.stride[1], self.dilation[0], self.dilation[1], self.padding[0],
                           self.padding[1], out)
        return np.reshape(out, tuple(x.shape[:-2]) + tuple(outs))


class CompiledAvgPool2d(AvgPool2d):
    kernel_note = "compiled (float32)"

    def forward(self, x):
        if not isinstance(x, np.ndarray) or x.dtype != np.float32 or x.ndim not in (3, 4):
            return super().forward(x)
        sizes, outs = self.pooled_sizes(x)
        reciprocals = np.ascontiguousarray(self._reciprocal_divisors(sizes, outs, np.float32))
        planes = np.ascontiguousarray(np.reshape(x, (-1,) + sizes))
        out = np.empty((planes.shape[0],) + outs, np.float32)
        kernels.avg_pool2d(out.size * (self.kernel[0] + self.kernel[1]), planes, self.kernel[0], self.kernel[1],
                           self.stride[0], self.stride[1], self.padding[0], self.padding[1], reciprocals, out)
        return np.reshape(out, tuple(x.shape[:-2]) + outs)


KERNELS = []  # pool_native.py registers their subclasses, which add oneDNN's path
