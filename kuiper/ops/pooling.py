"""Pooling: max and average pooling, one spatial axis at a time; adaptive pooling per axis.

Max pooling takes the elementwise maximum of the kernel's strided views along
one axis, then the next axis (a box maximum is separable), on an input padded
once with -inf.

Average pooling sums each spatial axis separately (a box sum is separable),
then multiplies by one precomputed table of reciprocal divisors, so PyTorch's
border rules (ceil_mode, count_include_pad, divisor_override) cost nothing at
run time.  Adaptive average pooling is one small matmul per axis; adaptive max
pooling gathers each bin (padded to the longest bin by repeating its last
element) and reduces, also one axis at a time.
"""

from __future__ import annotations

import functools
import math

import numpy as np  # only to build constant tables (averaging matrices, divisors, bins) once

from ..errors import ShapeError
from ..limits import check_size
from .base import Op, spatial_variants


POOL_CHUNK_BYTES = 4 << 20  # max pooling input per chunk of images
MAX_WINDOW = 1 << 16  # per axis; far beyond any real pooling window
MAX_ADAPTIVE_BINS = 1 << 20  # per axis; the bin tables are built in Python


def pool_output_size(size: int, kernel: int, stride: int, pad: int, dilation: int, ceil_mode: bool) -> int:
    """PyTorch's pooling output length, including its ceil_mode rule."""
    span = dilation * (kernel - 1) + 1
    numerator = size + 2 * pad - span
    out = (-(-numerator // stride) if ceil_mode else numerator // stride) + 1
    # With ceil_mode the last window must start inside the input or the left padding.
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def check_window(op: Op, kernel, stride, dilation) -> None:
    """Positive window params, and no larger than MAX_WINDOW: pooling loops over kernel taps in Python."""
    for key, values in (("kernel_size", kernel), ("stride", stride), ("dilation", dilation)):
        if any(not 1 <= v <= MAX_WINDOW for v in values):
            raise op.error(f"param '{key}' must be between 1 and {MAX_WINDOW}, found {values}")


def read_window(op: Op, spatial: int) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """kernel_size, stride (PyTorch: defaults to the kernel) and padding of a pooling op."""
    kernel = op.ints_param("kernel_size", spatial)
    stride = op.param("stride", None)
    stride = kernel if stride in (None, []) else op.ints_param("stride", spatial)
    return kernel, stride, op.ints_param("padding", spatial, default=0)


def read_return_indices(op: Op) -> bool:
    """``return_indices``: the indices come as a second output operand, or, when pnnx writes
    one output followed by prim::TupleUnpack (nn.AdaptiveMaxPool1d), inside a (values, indices) tuple."""
    return_indices = op.bool_param("return_indices", default=False)
    outputs = len(op.node.outputs)
    if outputs not in ((1, 2) if return_indices else (1,)):
        raise op.error(f"return_indices={return_indices} gives {'1 or 2' if return_indices else '1'} "
                       f"output(s), the file declares {outputs}")
    return return_indices


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
        image_bytes = math.prod(x.shape[1:]) * x.dtype.itemsize
        images = max(1, POOL_CHUNK_BYTES // image_bytes)
        if x.ndim == n + 2 and x.shape[0] > images:
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
        lowest = -math.inf if x.dtype.kind in "fc" else self.xp.iinfo(x.dtype).min if x.dtype.kind in "iu" else False
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


MaxPool1d, MaxPool2d, MaxPool3d = spatial_variants(MaxPoolNd, "MaxPool{}d", ("nn.MaxPool{}d", "F.max_pool{}d"))


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
        key = (tuple(sizes), str(dtype))
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
        if not self.backend.is_array(x) or x.ndim not in (n + 1, n + 2):
            raise ShapeError(f"{self.node.describe()}: expected a rank-{n + 1} or rank-{n + 2} input, "
                             f"found {getattr(x, 'shape', type(x).__name__)}")
        sizes = tuple(x.shape[-n:])
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
            axis_pos = lead + axis
            after = max(0, (out - 1) * s + k - size - p)
            pads = [(0, 0)] * x.ndim
            pads[axis_pos] = (p, after)
            padded = self.backend.pad(x, tuple(pads), "constant", value=0.0)
            windows = self.backend.sliding_window(padded, (k,), (axis_pos,))
            index = [slice(None)] * x.ndim
            index[axis_pos] = slice(0, out * s, s)
            x = xp.sum(windows[tuple(index)], axis=-1)
        return x * self._reciprocal_divisors(sizes, outs, x.dtype)


AvgPool1d, AvgPool2d, AvgPool3d = spatial_variants(AvgPoolNd, "AvgPool{}d", ("nn.AvgPool{}d", "F.avg_pool{}d"))


# ---------------------------------------------------------------- adaptive pooling


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
        if not self.backend.is_array(x) or x.ndim not in (n + 1, n + 2):
            raise ShapeError(f"{self.node.describe()}: expected a rank-{n + 1} or rank-{n + 2} input, "
                             f"found {getattr(x, 'shape', type(x).__name__)}")
        sizes = tuple(x.shape[-n:])
        if any(size == 0 for size in sizes):
            raise ShapeError(f"{self.node.describe()}: cannot pool an empty input {tuple(x.shape)}")
        outs = tuple(size if o is None else o for size, o in zip(sizes, self.output_size))
        check_size(tuple(x.shape[:-n]) + outs, x.dtype.itemsize, self.node.describe())
        return sizes, outs


class AdaptiveAvgPoolNd(_AdaptivePoolNd):
    def setup(self):
        super().setup()
        self._matrices = {}  # (size, out, dtype) -> transposed averaging matrix on the backend

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


AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d = spatial_variants(
    AdaptiveAvgPoolNd, "AdaptiveAvgPool{}d", ("nn.AdaptiveAvgPool{}d", "F.adaptive_avg_pool{}d")
)


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


AdaptiveMaxPool1d, AdaptiveMaxPool2d, AdaptiveMaxPool3d = spatial_variants(
    AdaptiveMaxPoolNd, "AdaptiveMaxPool{}d", ("nn.AdaptiveMaxPool{}d", "F.adaptive_max_pool{}d")
)


OPS = [
    MaxPool1d, MaxPool2d, MaxPool3d, AvgPool1d, AvgPool2d, AvgPool3d,
    AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AdaptiveMaxPool3d,
]
