"""Layer normalization of float32 rows, ``(x - mean) / sqrt(var + eps) * scale + shift``, run by oneDNN.

Each row of a (rows, width) array is normalized on its own; the caller folds a tensor's
leading dims into rows and its normalized dims into the width.  The primitive runs on oneDNN's
OpenMP threads (the compiled row loop it replaces runs on the calling thread below 2^22
element operations).  A primitive is made per row count and thread count the first time it is
seen, at most ``MAX_PLANS`` kept.
"""

from __future__ import annotations

import threading

import numpy as np

from ..output_buffers import output_array
from .binding import ARG_DST, ARG_MEAN, ARG_SCALE, ARG_SHIFT, ARG_SRC, ARG_VARIANCE, USE_SCALE, USE_SHIFT, Library
from .primitives import Attributes, Layout, PlanCache, Primitive


class LayerNormalization:
    """``LayerNormalization(library, scale, shift, eps)(rows)``: each row of float32 ``rows`` normalized, as a
    fresh array; ``scale`` and ``shift`` are float32 vectors of the row width."""

    def __init__(self, library: Library, scale: np.ndarray, shift: np.ndarray, eps: float):
        self.library = library
        self.width = scale.shape[0]
        vector = Layout.plain(library, (self.width,))
        self.scale = (vector, np.ascontiguousarray(scale, dtype=np.float32))
        self.shift = (vector, np.ascontiguousarray(shift, dtype=np.float32))
        self.eps = float(eps)
        self.plans = PlanCache()  # by (rows, threads)
        self._statistics = threading.local()  # each thread's mean and variance buffers

    def __call__(self, rows: np.ndarray, threads: int | None = None) -> tuple[np.ndarray, bool]:
        """(the normalized rows, whether every row's statistics stayed finite).  They are float32 in
        oneDNN: a row with |x| above ~7e17 overflows its sum of squares (or holds NaN or inf), and
        comes out as the shift alone; the caller then normalizes the rows another way."""
        threads = self.library.threads(threads)
        step, layout, statistics, zeros = self.plan(rows.shape[0], threads)
        out = output_array(rows.shape, np.float32)
        # This thread's statistics buffers, the same arrays call after call (no re-pointing of their memory objects).
        buffers = getattr(self._statistics, "buffers", None)
        if buffers is None or buffers[0].shape[0] != rows.shape[0]:
            buffers = self._statistics.buffers = (np.empty(rows.shape[0], np.float32), np.empty(rows.shape[0], np.float32))
        mean, variance = buffers
        step.run({ARG_SRC: (layout, np.ascontiguousarray(rows, dtype=np.float32)), ARG_DST: (layout, out),
                  ARG_SCALE: self.scale, ARG_SHIFT: self.shift, ARG_MEAN: (statistics, mean),
                  ARG_VARIANCE: (statistics, variance)}, threads)
        # The variances times zeros: 0 when all are finite, NaN when one is inf or NaN (1 us, and vdot
        # warns of no invalid 0 * inf; a max and an isfinite cost 2.5-4).
        return out, bool(np.vdot(variance, zeros) == 0)

    def plan(self, count: int, threads: int) -> tuple[Primitive, Layout, Layout, np.ndarray]:
        return self.plans.get_or_make((count, threads), lambda: self._make_plan(count, threads))

    def _make_plan(self, count: int, threads: int) -> tuple[Primitive, Layout, Layout, np.ndarray]:
        library = self.library
        library.set_threads(threads)  # the primitive is made for this many threads
        layout = Layout.plain(library, (count, self.width))
        statistics = Layout.plain(library, (count,))
        # Training propagation: the same kernel, which also hands out each row's mean and variance.
        with Attributes(library) as attributes:
            step = Primitive(library, lambda pointer: library.layer_normalization_forward_primitive_desc_create(
                pointer, library.engine, library.forward_training, layout.handle, layout.handle, statistics.handle,
                self.eps, USE_SCALE | USE_SHIFT, attributes.handle), f"layer normalization of ({count}, {self.width})")
        return step, layout, statistics, np.zeros(count, np.float32)
