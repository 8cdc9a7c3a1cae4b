"""A float32 tensor left in a oneDNN layout (channels in SIMD-wide blocks) between oneDNN ops.

Only ops that said they take one ever receive it (kuiper/graph/native_layouts.py); anything
else that meets one, such as a step observer, gets plain NumPy data through ``__array__``.
"""

from __future__ import annotations

import numpy as np

from .binding import ARG_DST, ARG_SRC, Library
from .primitives import Layout, reorder


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
    where the layout is plain already.  A plan keeps one for its output."""

    def __init__(self, library: Library, layout: Layout, shape):
        self.layout = layout
        self.shape = tuple(shape)
        self.plain = Layout.plain(library, self.shape)
        self.step = None if layout == self.plain else reorder(library, layout, self.plain)

    def __call__(self, buffer: np.ndarray, threads: int) -> np.ndarray:
        if self.step is None:
            return buffer.reshape(self.shape)
        out = np.empty(self.shape, np.float32)
        self.step.run({ARG_SRC: (self.layout, buffer), ARG_DST: (self.plain, out)}, threads)
        return out
