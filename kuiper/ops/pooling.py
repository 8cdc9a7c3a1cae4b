"""Pooling: max pooling over sliding windows, adaptive average pooling as two small matmuls."""

from __future__ import annotations

import functools
import math

import numpy as np  # only to build constant averaging matrices at build/first-call time

from ..errors import ShapeError
from .base import Op


def pool_output_size(size: int, kernel: int, stride: int, pad: int, dilation: int, ceil_mode: bool) -> int:
    """PyTorch's pooling output length, including its ceil_mode rule."""
    span = dilation * (kernel - 1) + 1
    numerator = size + 2 * pad - span
    out = (-(-numerator // stride) if ceil_mode else numerator // stride) + 1
    # With ceil_mode the last window must start inside the input or the left padding.
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


class MaxPoolNd(Op):
    spatial = 2

    def setup(self):
        n = self.spatial
        self.require_inputs(1)
        self.kernel = self.ints_param("kernel_size", n)
        stride = self.param("stride", None)
        self.stride = self.kernel if stride in (None, []) else self.ints_param("stride", n)
        self.padding = self.ints_param("padding", n, default=0)
        self.dilation = self.ints_param("dilation", n, default=1)
        self.ceil_mode = self.bool_param("ceil_mode", default=False)
        if self.bool_param("return_indices", default=False):
            raise self.unsupported("return_indices", True, [False])
        for k, p in zip(self.kernel, self.padding):
            if p * 2 > k:
                raise self.error(f"padding {self.padding} must be at most half of kernel_size {self.kernel}")

    def forward(self, x):
        n = self.spatial
        if x.ndim not in (n + 1, n + 2):
            raise ShapeError(f"{self.node.describe()}: expected a rank-{n + 2} input, found shape {tuple(x.shape)}")
        sizes = x.shape[-n:]
        outs = [
            pool_output_size(size, k, s, p, d, self.ceil_mode)
            for size, k, s, p, d in zip(sizes, self.kernel, self.stride, self.padding, self.dilation)
        ]
        pads = []
        for size, out, k, s, p, d in zip(sizes, outs, self.kernel, self.stride, self.padding, self.dilation):
            needed = (out - 1) * s + d * (k - 1) + 1
            pads.append((p, max(0, needed - size - p)))
        lead = x.ndim - n
        x = self.backend.pad(x, ((0, 0),) * lead + tuple(pads), "constant", value=-math.inf)
        span = tuple(d * (k - 1) + 1 for k, d in zip(self.kernel, self.dilation))
        axes = tuple(range(lead, lead + n))
        windows = self.backend.sliding_window(x, span, axes)
        index = (slice(None),) * lead + tuple(slice(0, o * s, s) for o, s in zip(outs, self.stride)) + tuple(
            slice(None, None, d) for d in self.dilation
        )
        windows = windows[index]
        return self.xp.max(windows, axis=tuple(range(-n, 0)))


class MaxPool1d(MaxPoolNd):
    types = ("nn.MaxPool1d", "F.max_pool1d")
    spatial = 1


class MaxPool2d(MaxPoolNd):
    types = ("nn.MaxPool2d", "F.max_pool2d")
    spatial = 2


@functools.lru_cache(maxsize=64)
def adaptive_average_matrix(size: int, out: int) -> np.ndarray:
    """(out, size) matrix whose row i averages PyTorch's adaptive bin i: [floor(i*size/out), ceil((i+1)*size/out))."""
    matrix = np.zeros((out, size), dtype=np.float32)
    for i in range(out):
        start = (i * size) // out
        end = -(-((i + 1) * size) // out)
        matrix[i, start:end] = 1.0 / (end - start)
    return matrix


class AdaptiveAvgPoolNd(Op):
    spatial = 2

    def setup(self):
        self.require_inputs(1)
        value = self.param("output_size")
        if not isinstance(value, list):
            value = [value] * self.spatial
        if len(value) != self.spatial or not all(v is None or (isinstance(v, int) and v > 0) for v in value):
            raise self.error(f"param 'output_size' must be {self.spatial} positive integer(s) or None, found {value!r}")
        self.output_size = tuple(value)
        self._matrices = {}  # (size, out, dtype) -> transposed averaging matrix on the backend

    def _average_matrix_t(self, size: int, out: int, dtype):
        key = (size, out, str(dtype))
        if key not in self._matrices:
            matrix = self.backend.asarray(adaptive_average_matrix(size, out).T.copy(), dtype=dtype)
            self._matrices[key] = matrix
        return self._matrices[key]

    def forward(self, x):
        xp = self.xp
        n = self.spatial
        if x.ndim not in (n + 1, n + 2):
            raise ShapeError(f"{self.node.describe()}: expected a rank-{n + 2} input, found shape {tuple(x.shape)}")
        sizes = x.shape[-n:]
        outs = [size if o is None else o for size, o in zip(sizes, self.output_size)]
        if all(o == 1 for o in outs):
            return xp.mean(x, axis=tuple(range(-n, 0)), keepdims=True)
        # Average each spatial axis separately: A_h @ x @ A_w^T for 2-D.
        for axis, (size, out) in enumerate(zip(sizes, outs)):
            if size == out:
                continue
            axis_pos = x.ndim - n + axis
            moved = xp.moveaxis(x, axis_pos, -1)
            moved = xp.matmul(moved, self._average_matrix_t(size, out, x.dtype))
            x = xp.moveaxis(moved, -1, axis_pos)
        return x


class AdaptiveAvgPool1d(AdaptiveAvgPoolNd):
    types = ("nn.AdaptiveAvgPool1d", "F.adaptive_avg_pool1d")
    spatial = 1


class AdaptiveAvgPool2d(AdaptiveAvgPoolNd):
    types = ("nn.AdaptiveAvgPool2d", "F.adaptive_avg_pool2d")
    spatial = 2


OPS = [MaxPool1d, MaxPool2d, AdaptiveAvgPool1d, AdaptiveAvgPool2d]
