"""Average pooling: nn.AvgPool1d/2d/3d and F.avg_pool1d/2d/3d, and dilated windows with pads of any
size on either side (ONNX's AveragePool).

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

    ``dilation`` spaces the window's taps; ``pads`` ([before, after] per axis) replaces the even
    ``padding`` and may exceed half a window (a window wholly in the padding, not counting
    it, averages nothing: NaN).
    """

    spatial = 2

    def setup(self):
        n = self.spatial
        self.require_inputs(1)
        self.kernel, self.stride, self.padding = read_window(self, n)
        self.dilation = self.ints_param("dilation", n, default=1)
        self.ceil_mode = self.bool_param("ceil_mode", default=False)
        self.count_include_pad = self.bool_param("count_include_pad", default=True)
        self.divisor_override = self.optional_int_param("divisor_override")
        if any(k < 1 for k in self.kernel) or any(s < 1 for s in self.stride):
            raise self.error(f"kernel_size {self.kernel} and stride {self.stride} must be positive")
        check_window(self, self.kernel, self.stride, self.dilation)
        if self.divisor_override is not None and self.divisor_override <= 0:
            raise self.error(f"param 'divisor_override' must be positive, found {self.divisor_override}")
        pads = self.param("pads", None)
        if pads is None:
            for k, p in zip(self.kernel, self.padding):
                if p < 0 or p * 2 > k:
                    raise self.error(f"padding {self.padding} must be between 0 and half of kernel_size {self.kernel}")
            self.pads = tuple((p, p) for p in self.padding)
        else:
            if (not isinstance(pads, (list, tuple)) or len(pads) != n
                    or not all(isinstance(pair, (list, tuple)) and len(pair) == 2 for pair in pads)
                    or not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 1 << 16
                               for pair in pads for v in pair)):
                raise self.error(f"param 'pads' must give [before, after] non-negative pads for {n} axes, found {pads!r}")
            self.pads = tuple((pair[0], pair[1]) for pair in pads)
            self.padding = tuple(pair[0] for pair in self.pads)
        # PyTorch's window (undilated, even pads of at most half of it): what kernel overrides take.
        self.plain_window = all(d == 1 for d in self.dilation) and all(
            before == after and 2 * before <= k for (before, after), k in zip(self.pads, self.kernel))
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
            for size, out, k, s, (before, after), d in zip(sizes, outs, self.kernel, self.stride, self.pads,
                                                          self.dilation):
                taps = (np.arange(out) * s - before)[:, None] + np.arange(k) * d
                # The taps inside the padded input (a ceil_mode window may hang past it), or the real ones.
                low, high = (-before, size + after) if self.count_include_pad else (0, size)
                counts = ((taps >= low) & (taps < high)).sum(axis=1)
                with np.errstate(divide="ignore"):
                    table = np.multiply.outer(table, 1.0 / counts)
        return self.backend.asarray(table, dtype=dtype)

    def pooled_sizes(self, x) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(input spatial sizes, output spatial sizes), or a ShapeError naming the op."""
        n = self.spatial
        sizes = spatial_sizes(self, x, n)
        outs = tuple(
            pool_output_size(size, k, s, before, d, self.ceil_mode, after)
            for size, k, s, (before, after), d in zip(sizes, self.kernel, self.stride, self.pads, self.dilation)
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
        for axis, (size, out, k, s, (p, _), d) in enumerate(zip(sizes, outs, self.kernel, self.stride, self.pads,
                                                                  self.dilation)):
            if k == s == 1 and p == 0:
                continue  # each window is one value: the sum along this axis is the input itself
            axis_pos = lead + axis
            span = d * (k - 1) + 1
            after = max(0, (out - 1) * s + span - size - p)
            pads = [(0, 0)] * x.ndim
            pads[axis_pos] = (p, after)
            padded = self.backend.pad(x, tuple(pads), "constant", value=0.0)
            windows = self.backend.sliding_window(padded, (span,), (axis_pos,))
            index = [slice(None)] * x.ndim
            index[axis_pos] = slice(0, (out - 1) * s + 1, s)  # (the standard refuses a stop past the end)
            x = xp.sum(windows[(*index, slice(None, None, d))], axis=-1)
        return x * self._reciprocal_divisors(sizes, outs, x.dtype)


AvgPool1d, AvgPool2d, AvgPool3d = spatial_variants(AvgPoolNd, "AvgPool{}d")


OPS = [AvgPool1d, AvgPool2d, AvgPool3d]
