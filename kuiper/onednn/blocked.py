"""A float32 tensor left in a oneDNN layout (channels in SIMD-wide blocks) between oneDNN ops.

Only ops that said they take one ever receive it (kuiper/graph/native_layouts.py); anything
else that meets one, such as a step observer, gets plain NumPy data through ``__array__``.
"""

from __future__ import annotations

import numpy as np

from .binding import ARG_DST, ARG_SRC, Library
from .primitives import Layout, reorder


class Blocked:
    """``shape`` is the logical (N, C, *spatial) shape; ``buffer`` holds the data in ``layout``."""

    dtype = np.dtype(np.float32)

    def __init__(self, library: Library, shape: tuple[int, ...], layout: Layout, buffer: np.ndarray):
        self.library = library
        self.shape = tuple(shape)
        self.layout = layout
        self.buffer = buffer

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def plain(self, threads: int | None = None) -> np.ndarray:
        """The data as a fresh C-contiguous array."""
        out = np.empty(self.shape, np.float32)
        target = Layout.plain(self.library, self.shape)
        reorder(self.library, self.layout, target).run({ARG_SRC: (self.layout, self.buffer), ARG_DST: (target, out)},
                                                       self.library.threads(threads))
        return out

    def __array__(self, dtype=None, copy=None):
        out = self.plain()
        return out if dtype is None else out.astype(dtype, copy=False)

    def __repr__(self) -> str:
        return f"Blocked(shape={self.shape}, {self.layout.nbytes} bytes)"
