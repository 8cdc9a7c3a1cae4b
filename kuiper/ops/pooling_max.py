"""Max pooling: nn.MaxPool1d/2d/3d and F.max_pool1d/2d/3d, optionally with the indices of the maxima.

The op takes the elementwise maximum of the kernel's strided views along one axis,
then the next axis (a box maximum is separable), on an input padded once with -inf.
"""

from __future__ import annotations

import math

from ..errors import ShapeError
from ..ir import dtypes
from .base import Op, spatial_variants
from .pooling_window import check_window, pool_output_size, read_return_indices, read_window

POOL_CHUNK_BYTES = 4 << 20  # input per chunk of images


class MaxPoolNd(Op):
    """Max pooling; with return_indices also the int64 position of each maximum in its input
    plane (h * W + w for 2-D), the first maximum in row-major order as PyTorch picks it."""

    spatial = 2

    def setup(self):
        n = self.spatial
        self.require_inputs(1)
        self.kernel, self.stride, self.padding = read_window(self, n)
        self.dilation = self.ints_param("dilation", n, default=1)
        self.ceil_mode = self.bool_param("ceil_mode", default=False)
        self.return_indices = read_return_indices(self)
        for k, p in zip(self.kernel, self.padding):
            if p * 2 > k:
                raise self.error(f"padding {self.padding} must be at most half of kernel_size {self.kernel}")
        check_window(self, self.kernel, self.stride, self.dilation)

    def forward(self, x):
        n = self.spatial
        if x.ndim not in (n + 1, n + 2):
            raise ShapeError(f"{self.node.describe()}: expected a rank-{n + 2} input, found shape {tuple(x.shape)}")
        if self.return_indices:
            return self.pool_with_indices(x)
        image_bytes = math.prod(x.shape[1:]) * dtypes.itemsize(x.dtype)
        images = max(1, POOL_CHUNK_BYTES // image_bytes)
        if x.ndim == n + 2 and x.shape[0] > images and self.backend.cpu_cache_blocking:
            # A large batch in chunks of images: the padded copy and the partial maxima stay in cache.
            parts = [self.pool(x[start : start + images]) for start in range(0, x.shape[0], images)]
            return self.xp.concat(parts, axis=0)
        return self.pool(x)

    def padded(self, x):
        """x padded with -inf so every window lies inside, and the output size per spatial axis."""
        n = self.spatial
        sizes = x.shape[-n:]
        outs = [
            pool_output_size(size, k, s, p, d, self.ceil_mode)
            for size, k, s, p, d in zip(sizes, self.kernel, self.stride, self.padding, self.dilation)
        ]
        if any(out < 1 for out in outs):
            raise ShapeError(f"{self.node.describe()}: input {tuple(x.shape)} is too small for kernel_size "
                             f"{self.kernel} with padding {self.padding} and dilation {self.dilation}")
        pads = []
        for size, out, k, s, p, d in zip(sizes, outs, self.kernel, self.stride, self.padding, self.dilation):
            needed = (out - 1) * s + d * (k - 1) + 1
            pads.append((p, max(0, needed - size - p)))
        lead = x.ndim - n
        xp = self.xp
        lowest = (-math.inf if dtypes.isdtype(xp, x.dtype, ("real floating", "complex floating"))
                  else xp.iinfo(x.dtype).min if dtypes.isdtype(xp, x.dtype, "integral") else False)
        return self.backend.pad(x, ((0, 0),) * lead + tuple(pads), "constant", value=lowest), outs

    def pool(self, x):
        n = self.spatial
        lead = x.ndim - n
        x, outs = self.padded(x)
        # A max over a box is a max over each axis in turn: k - 1 elementwise maxima of
        # strided views per axis, each over contiguous rows (no window gather).
        for axis, (out, k, s, d) in enumerate(zip(outs, self.kernel, self.stride, self.dilation)):
            result = None
            for tap in range(k):
                index = [slice(None)] * x.ndim
                index[lead + axis] = slice(tap * d, tap * d + (out - 1) * s + 1, s)
                view = x[tuple(index)]
                result = view if result is None else self.xp.maximum(result, view)
            x = result
        return x

    def pool_with_indices(self, x):
        """The same axis-by-axis maximum, carrying each candidate's flat position in the plane.

        The last axis goes first; a later tap wins only if strictly greater, so each
        row keeps its first maximum and the rows then keep the first row: the first
        maximum in row-major order.  Padding (-inf) never beats a real element.
        """
        xp = self.xp
        n = self.spatial
        lead = x.ndim - n
        sizes = tuple(x.shape[-n:])
        x, outs = self.padded(x)
        position = None  # flat position within the axes reduced so far, shaped like x
        trailing = 1
        for axis in reversed(range(n)):
            out, k, s, p, d = outs[axis], self.kernel[axis], self.stride[axis], self.padding[axis], self.dilation[axis]
            shape = [1] * x.ndim
            shape[lead + axis] = out
            starts = xp.reshape(xp.arange(out, dtype=xp.int64) * s - p, tuple(shape))
            best = best_position = None
            for tap in range(k):
                index = [slice(None)] * x.ndim
                index[lead + axis] = slice(tap * d, tap * d + (out - 1) * s + 1, s)
                index = tuple(index)
                view = x[index]
                here = (starts + tap * d) * trailing
                if position is not None:
                    here = here + position[index]
                if best is None:
                    best, best_position = view, xp.broadcast_to(here, tuple(view.shape))
                else:
                    better = view > best
                    best = xp.where(better, view, best)
                    best_position = xp.where(better, here, best_position)
            x, position = best, best_position
            trailing *= sizes[axis]
        return x, xp.asarray(position, dtype=xp.int64, copy=True)


MaxPool1d, MaxPool2d, MaxPool3d = spatial_variants(MaxPoolNd, "MaxPool{}d")


OPS = [MaxPool1d, MaxPool2d, MaxPool3d]
