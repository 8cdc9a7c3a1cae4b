"""A float32 tensor left in a oneDNN layout (channels in SIMD-wide blocks) between oneDNN ops.

Only ops that said they take one ever receive it (kuiper/graph/native_layouts.py); anything
else that meets one, such as a step observer, gets plain NumPy data through ``__array__``.
"""

from __future__ import annotations

import numpy as np

from ..output_buffers import output_array
from .binding import ARG_DST, ARG_SRC, Library
from .primitives import Layout, dense_strides, reorder


class Blocked:
    """``shape`` is the logical (N, C, *spatial) shape; ``buffer`` holds the data in ``layout``.

    ``norm_bound``, when its producer knows one, is a number at least the 2-norm of the data, every
    element of which is then finite: a convolution's special-value guard reads it instead of the
    data (kuiper/numba_kernels/conv_native.py).  None: nothing is known."""

    dtype = np.dtype(np.float32)

    def __init__(self, library: Library, shape: tuple[int, ...], layout: Layout, buffer: np.ndarray,
                 norm_bound: float | None = None):
        self.library = library
        self.shape = tuple(shape)
        self.layout = layout
        self.buffer = buffer
        self.norm_bound = norm_bound

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def plain(self, threads: int | None = None) -> np.ndarray:
        """The data as a fresh C-contiguous array (a reorder made for this call: see ToPlain for a kept one)."""
        threads = self.library.threads(threads)
        self.library.set_threads(threads)
        return ToPlain(self.library, self.layout, self.shape)(self.buffer, threads)

    def __array__(self, dtype=None, copy=None):
        out = self.plain()
        return out if dtype is None else out.astype(dtype, copy=False)

    def __repr__(self) -> str:
        return f"Blocked(shape={self.shape}, {self.layout.nbytes} bytes)"


class ToPlain:
    """``ToPlain(library, layout, shape)(buffer, threads)``: data of ``shape`` in ``layout`` as a plain
    array; the reorder is made once (for the thread count set when it is made), and none at all
    where the layout is plain already.  A plan keeps one for its output.

    ``channels_last``: the array is (N, C, *spatial) seen through a view of a C-contiguous
    (N, *spatial, C) array, for a reader that moves the channels last (a permute then costs no copy:
    kuiper/graph/channels_last.py).  Reordering into it costs what reordering into NCHW does."""

    def __init__(self, library: Library, layout: Layout, shape, channels_last: bool = False):
        self.layout = layout
        self.shape = tuple(shape)
        self.channels_last = channels_last
        if channels_last:
            self.memory_shape, self.axes = _channels_last_shapes(self.shape)
            strides = dense_strides(self.shape, channels_last_order(len(self.shape)))
            self.plain = Layout.strided(library, self.shape, strides)
        else:
            self.memory_shape, self.axes = self.shape, None
            self.plain = Layout.plain(library, self.shape)
        self.step = None if layout == self.plain else reorder(library, layout, self.plain)

    def view(self, flat: np.ndarray) -> np.ndarray:
        """A buffer holding data in ``plain`` as an array of ``shape``."""
        out = flat.reshape(self.memory_shape)
        return out if self.axes is None else out.transpose(self.axes)

    def __call__(self, buffer: np.ndarray, threads: int) -> np.ndarray:
        if self.step is None:
            return self.view(buffer)
        out = output_array(self.memory_shape, np.float32)
        self.step.run({ARG_SRC: (self.layout, buffer), ARG_DST: (self.plain, out)}, threads)
        return self.view(out)


def channels_last_order(rank: int) -> tuple[int, ...]:
    """The order in which a channels-last tensor's axes lie in memory: (0, 2, ..., rank - 1, 1)."""
    return (0, *range(2, rank), 1)


def channels_last_view(shape):
    """A function taking a flat buffer that holds a tensor of ``shape`` (N, C, *spatial) channels-last, row-major
    (N, *spatial, C), to that tensor as an array of ``shape`` (a view: no copy)."""
    memory_shape, axes = _channels_last_shapes(shape)
    return lambda flat: flat.reshape(memory_shape).transpose(axes)


def _channels_last_shapes(shape) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(the shape a channels-last tensor of ``shape`` has in memory, each logical axis's place in it)."""
    order = channels_last_order(len(shape))
    return tuple(shape[axis] for axis in order), tuple(order.index(axis) for axis in range(len(order)))
