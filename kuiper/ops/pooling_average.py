"""Average pooling: nn.AvgPool1d/2d/3d and F.avg_pool1d/2d/3d.

The op sums each spatial axis separately (a box sum is separable), then multiplies
by one precomputed table of reciprocal divisors, so PyTorch's border rules
(ceil_mode, count_include_pad, divisor_override) cost nothing at run time.
"""

from __future__ import annotations

import numpy as np  # only to build the table of divisors once per input size

from ..errors import ShapeError
from .base import Op, spatial_variants
from .pooling_window import check_window, pool_output_size, read_window, spatial_sizes


class AvgPoolNd(Op):
    """nn.AvgPoolNd / F.avg_poolNd with PyTorch's divisor rules at the borders.

    A window's divisor is ``divisor_override`` if given; else, with
    count_include_pad, the window clipped to the padded input (a ceil_mode
    window hanging past the right padding counts only up to it); else the
    number of real input elements under it.  Every rule is a product of one
    length per axis, so the reciprocal divisors form one small table per input size.
    """

    spatial = 2

    def setup(self):
        n = self.spatial
        self.require_inputs(1)
        self.kernel, self.stride, self.padding = read_window(self, n)
        self.ceil_mode = self.bool_param("ceil_mode", default=False)
        self.count_include_pad = self.bool_param("count_include_pad", default=True)
        self.divisor_override = self.optional_int_param("divisor_override")
        if any(k < 1 for k in self.kernel) or any(s < 1 for s in self.stride):
            raise self.error(f"kernel_size {self.kernel} and stride {self.stride} must be positive")
        check_window(self, self.kernel, self.stride, (1,) * n)
        if self.divisor_override is not None and self.divisor_override <= 0:
            raise self.error(f"param 'divisor_override' must be positive, found {self.divisor_override}")
        for k, p in zip(self.kernel, self.padding):
            if p < 0 or p * 2 > k:
                raise self.error(f"padding {self.padding} must be between 0 and half of kernel_size {self.kernel}")
        self._reciprocals = {}  # (sizes, dtype) -> table of 1/divisor, shaped like the output's spatial dims

    def _reciprocal_divisors(self, sizes, outs, dtype):
        key = (tuple(sizes), dtype)  # the dtype object: its str() costs 2-3 us a call
        return self.cached(self._reciprocals, key, lambda: self._make_reciprocals(sizes, outs, dtype))

    def _make_reciprocals(self, sizes, outs, dtype):
        """1/divisor for every output position: a host-side table made once per input size and dtype."""
        if self.divisor_override is not None:
            table = np.full(outs, 1.0 / self.divisor_override)
        else:
            table = np.ones(())
            for size, out, k, s, p in zip(sizes, outs, self.kernel, self.stride, self.padding):
                start = np.arange(out) * s - p
                end = np.minimum(start + k, size + p)
                if not self.count_include_pad:
                    start, end = np.maximum(start, 0), np.minimum(end, size)
                table = np.multiply.outer(table, 1.0 / (end - start))
        return self.backend.asarray(table, dtype=dtype)

    def pooled_sizes(self, x) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(input spatial sizes, output spatial sizes), or a ShapeError naming the op."""
        n = self.spatial
        sizes = spatial_sizes(self, x, n)
        outs = tuple(
            pool_output_size(size, k, s, p, 1, self.ceil_mode)
            for size, k, s, p in zip(sizes, self.kernel, self.stride, self.padding)
        )
        if any(o < 1 for o in outs):
            raise ShapeError(f"{self.node.describe()}: input {tuple(x.shape)} is too small for "
                             f"kernel_size {self.kernel} with padding {self.padding}")
        return sizes, outs

    def forward(self, x):
        xp = self.xp
        sizes, outs = self.pooled_sizes(x)
        lead = x.ndim - self.spatial
        # Box sums, one axis at a time: k additions per output instead of prod(kernel).
        for axis, (size, out, k, s, p) in enumerate(zip(sizes, outs, self.kernel, self.stride, self.padding)):
            if k == s == 1 and p == 0:
                continue  # each window is one value: the sum along this axis is the input itself
            axis_pos = lead + axis
            after = max(0, (out - 1) * s + k - size - p)
            pads = [(0, 0)] * x.ndim
            pads[axis_pos] = (p, after)
            padded = self.backend.pad(x, tuple(pads), "constant", value=0.0)
            windows = self.backend.sliding_window(padded, (k,), (axis_pos,))
            index = [slice(None)] * x.ndim
            index[axis_pos] = slice(0, (out - 1) * s + 1, s)  # (the standard refuses a stop past the end)
            x = xp.sum(windows[(*index, ...)], axis=-1)
        return x * self._reciprocal_divisors(sizes, outs, x.dtype)


AvgPool1d, AvgPool2d, AvgPool3d = spatial_variants(AvgPoolNd, "AvgPool{}d")


OPS = [AvgPool1d, AvgPool2d, AvgPool3d]
