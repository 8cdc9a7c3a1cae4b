"""nn.MaxPool1d, nn.MaxPool2d and nn.AvgPool2d on the NumPy backend through the compiled loops in pool_kernels.py.

Float32 inputs of rank 3 or 4 (2 or 3 for MaxPool1d) take the compiled loop; anything else the
reference (kuiper.ops.pooling_max, pooling_average), which these subclasses leave in charge of
params and errors.  A 1-D max pool is the 2-D loop over planes one row high: the reference's
maxima of strided views cost 15-20 us of Python on an audio net's small tensors (M5's four pools).
"""

from __future__ import annotations

import numpy as np

from ..output_buffers import output_array
from ..ops.pooling_average import AvgPool2d
from ..ops.pooling_max import MaxPool1d, MaxPool2d
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
        out = output_array((planes.shape[0], outs[0], outs[1]), np.float32)
        kernels.max_pool2d(out.size * (self.kernel[0] + self.kernel[1]), planes, self.kernel[0], self.kernel[1],
                           self.stride[0], self.stride[1], self.dilation[0], self.dilation[1], self.padding[0],
                           self.padding[1], out)
        return np.reshape(out, tuple(x.shape[:-2]) + tuple(outs))


class CompiledMaxPool1d(MaxPool1d):
    kernel_note = "compiled (float32)"

    def forward(self, x):
        if self.return_indices or not isinstance(x, np.ndarray) or x.dtype != np.float32 or x.ndim not in (2, 3):
            return super().forward(x)  # indices and other dtypes: the reference
        (kernel,), (stride,), (dilation,), (padding,) = self.kernel, self.stride, self.dilation, self.padding
        length = x.shape[-1]
        out_length = pool_output_size(length, kernel, stride, padding, dilation, self.ceil_mode)
        if out_length < 1:
            return super().forward(x)  # the reference decides what an empty output is
        planes = np.ascontiguousarray(x.reshape(-1, 1, length))
        out = output_array((planes.shape[0], 1, out_length), np.float32)
        kernels.max_pool2d(out.size * kernel, planes, 1, kernel, 1, stride, 1, dilation, 0, padding, out)
        return out.reshape(tuple(x.shape[:-1]) + (out_length,))


class CompiledAvgPool2d(AvgPool2d):
    kernel_note = "compiled (float32)"

    def forward(self, x):
        if not isinstance(x, np.ndarray) or x.dtype != np.float32 or x.ndim not in (3, 4) or not self.plain_window:
            return super().forward(x)  # other dtypes, dilations and uneven pads: the reference
        sizes, outs = self.pooled_sizes(x)
        reciprocals = np.ascontiguousarray(self._reciprocal_divisors(sizes, outs, np.float32))
        planes = np.ascontiguousarray(np.reshape(x, (-1,) + sizes))
        out = output_array((planes.shape[0],) + outs, np.float32)
        kernels.avg_pool2d(out.size * (self.kernel[0] + self.kernel[1]), planes, self.kernel[0], self.kernel[1],
                           self.stride[0], self.stride[1], self.padding[0], self.padding[1], reciprocals, out)
        return np.reshape(out, tuple(x.shape[:-2]) + outs)


KERNELS: list = []  # pool_native.py registers subclasses of these, which add oneDNN's path
