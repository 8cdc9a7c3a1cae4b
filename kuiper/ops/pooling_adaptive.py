"""Adaptive pooling: nn.AdaptiveAvgPool1d/2d/3d, nn.AdaptiveMaxPool1d/2d/3d and their F.* forms.

The output size is given and PyTorch's bins follow from it.  Adaptive average
pooling is one small matmul per axis; adaptive max pooling gathers each bin (padded
to the longest bin by repeating its last element) and reduces, also one axis at a time.
"""

from __future__ import annotations

import functools

import numpy as np  # only to build constant tables (averaging matrices, bins) once

from ..errors import ShapeError
from ..ir import dtypes
from ..limits import check_size
from .base import Op, prod, spatial_variants
from .pooling_window import read_return_indices, spatial_sizes

MAX_ADAPTIVE_BINS = 1 << 20  # per axis; the bin tables are built in Python


def adaptive_bins(size: int, out: int) -> list[tuple[int, int]]:
    """PyTorch's adaptive bin i covers [floor(i*size/out), ceil((i+1)*size/out))."""
    return [((i * size) // out, -(-((i + 1) * size) // out)) for i in range(out)]


@functools.lru_cache(maxsize=64)
def adaptive_average_matrix(size: int, out: int) -> np.ndarray:
    """(out, size) matrix whose row i averages adaptive bin i."""
    matrix = np.zeros((out, size), dtype=np.float32)
    for i, (start, end) in enumerate(adaptive_bins(size, out)):
        matrix[i, start:end] = 1.0 / (end - start)
    return matrix


@functools.lru_cache(maxsize=64)
def adaptive_gather_table(size: int, out: int) -> np.ndarray:
    """(out, L) input positions of each adaptive bin, L the longest bin; shorter bins repeat their last position.

    Repeating the last element changes neither a max nor the first position of the max.
    """
    bins = adaptive_bins(size, out)
    longest = max(end - start for start, end in bins)
    steps = np.arange(longest)
    return np.stack([start + np.minimum(steps, end - start - 1) for start, end in bins]).astype(np.int64)


class _AdaptivePoolNd(Op):
    """Parses ``output_size``: an int or one entry per spatial dim; None (pnnx writes 0) keeps that dim."""

    spatial = 2

    def setup(self):
        self.require_inputs(1)
        value = self.param("output_size")
        if not isinstance(value, list):
            value = [value] * self.spatial
        if len(value) == 1:
            value = value * self.spatial
        valid = all(v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 0) for v in value)
        if len(value) != self.spatial or not valid or any(v is not None and v > MAX_ADAPTIVE_BINS for v in value):
            raise self.error(f"param 'output_size' must be {self.spatial} positive integer(s) up to "
                             f"{MAX_ADAPTIVE_BINS} or None, found {value!r}")
        self.output_size = tuple(None if v in (None, 0) else v for v in value)

    def output_sizes(self, x) -> tuple[tuple[int, ...], tuple[int, ...]]:
        n = self.spatial
        sizes = spatial_sizes(self, x, n)
        if any(size == 0 for size in sizes):
            raise ShapeError(f"{self.node.describe()}: cannot pool an empty input {tuple(x.shape)}")
        outs = tuple(size if o is None else o for size, o in zip(sizes, self.output_size))
        check_size(tuple(x.shape[:-n]) + outs, dtypes.itemsize(x.dtype), self.node.describe())
        return sizes, outs


class AdaptiveAvgPoolNd(_AdaptivePoolNd):
    def setup(self):
        super().setup()
        self._matrices = {}  # (size, out, dtype) -> transposed averaging matrix on the backend
        self._ones = {}  # (count, dtype) -> a vector of ones on the backend

    def _global_average(self, x):
        """The mean over the spatial dims as one matrix-vector product (BLAS): 4-7x faster than
        xp.mean's reduction over two axes for the squeeze-excitation pools of EfficientNet and
        MobileNetV3 (float32 accumulation, as PyTorch's)."""
        xp = self.xp
        n = self.spatial
        count = prod(x.shape[x.ndim - n:])
        ones = self.cached(self._ones, (count, str(x.dtype)), lambda: xp.ones((count,), dtype=x.dtype))
        sums = xp.matmul(xp.reshape(x, (-1, count)), ones)
        return xp.reshape(sums / count, tuple(x.shape[: x.ndim - n]) + (1,) * n)

    def _average_matrix_t(self, size: int, out: int, dtype):
        return self.cached(
            self._matrices,
            (size, out, str(dtype)),
            lambda: self.backend.asarray(adaptive_average_matrix(size, out).T.copy(), dtype=dtype),
        )

    def forward(self, x):
        xp = self.xp
        n = self.spatial
        sizes, outs = self.output_sizes(x)
        if all(o == 1 for o in outs):
            if x.dtype in (xp.float32, xp.float64):
                return self._global_average(x)
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


AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d = spatial_variants(AdaptiveAvgPoolNd, "AdaptiveAvgPool{}d")


class AdaptiveMaxPoolNd(_AdaptivePoolNd):
    """Max over PyTorch's adaptive bins, one axis at a time (a max over a box is separable).

    pnnx writes F.adaptive_max_pool* with ``return_indices=True`` and two
    outputs even when the indices are unused, so the indices are computed
    whenever the op has two outputs: int64 positions in each input plane
    (h * W + w for 2-D), the first maximum in row-major order as PyTorch picks it.
    """

    def setup(self):
        super().setup()
        self.return_indices = read_return_indices(self)
        self._tables = {}  # (size, out) -> flat gather table on the backend

    def _gather_table(self, size: int, out: int):
        def make():
            table = adaptive_gather_table(size, out)
            return self.backend.asarray(table.reshape(-1)), table.shape[1]

        return self.cached(self._tables, (size, out), make)

    def _gather_bins(self, x, size: int, out: int):
        """x with its last axis (length size) replaced by (out, longest bin)."""
        flat, longest = self._gather_table(size, out)
        gathered = self.xp.take(x, flat, axis=x.ndim - 1)
        return self.xp.reshape(gathered, tuple(x.shape[:-1]) + (out, longest)), flat, longest

    def forward(self, x):
        xp = self.xp
        n = self.spatial
        sizes, outs = self.output_sizes(x)
        lead = x.ndim - n
        if not self.return_indices:
            for axis, (size, out) in enumerate(zip(sizes, outs)):
                moved = xp.moveaxis(x, lead + axis, -1)
                bins, _, _ = self._gather_bins(moved, size, out)
                x = xp.moveaxis(xp.max(bins, axis=-1), -1, lead + axis)
            return x
        # Last axis first, carrying each value's flat position within the axes already reduced.
        position = None
        trailing = 1  # product of the input sizes of the axes already reduced
        for axis in reversed(range(n)):
            size, out = sizes[axis], outs[axis]
            moved = xp.moveaxis(x, lead + axis, -1)
            bins, flat, longest = self._gather_bins(moved, size, out)
            choice = xp.argmax(bins, axis=-1, keepdims=True)  # first maximum in each bin
            values = xp.take_along_axis(bins, choice, axis=-1)[..., 0]
            # Which input row each choice came from: table[o, choice].
            bin_start = xp.reshape(xp.arange(out, dtype=xp.int64) * longest, (out, 1))
            rows = xp.take(flat, xp.reshape(bin_start + choice, (-1,)), axis=0)
            rows = xp.reshape(rows, tuple(choice.shape[:-1]))
            if position is None:
                new_position = rows
            else:
                moved_position = xp.moveaxis(position, lead + axis, -1)
                position_bins, _, _ = self._gather_bins(moved_position, size, out)
                new_position = rows * trailing + xp.take_along_axis(position_bins, choice, axis=-1)[..., 0]
            x = xp.moveaxis(values, -1, lead + axis)
            position = xp.moveaxis(new_position, -1, lead + axis)
            trailing *= size
        return x, position


AdaptiveMaxPool1d, AdaptiveMaxPool2d, AdaptiveMaxPool3d = spatial_variants(AdaptiveMaxPoolNd, "AdaptiveMaxPool{}d")


OPS = [AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AdaptiveMaxPool3d]
