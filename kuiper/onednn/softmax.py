"""Softmax over the rows of a float32 (rows, width) array, in place, run by oneDNN.

oneDNN's softmax ("accurate": each row shifted by its maximum) runs on its OpenMP threads with
vectorised exponentials.  A row of only -inf comes out NaN throughout, as in PyTorch; a row
holding a NaN or +inf comes out partly finite (PyTorch makes it NaN throughout), which the
caller sees as a NaN in the row.  A primitive is made per (rows, width) and thread count the
first time it is seen, at most ``MAX_PLANS`` kept.
"""

from __future__ import annotations

import numpy as np

from .binding import ARG_DST, ARG_SRC, Library
from .primitives import Attributes, Layout, PlanCache, Primitive


class SoftmaxPlan:
    """The softmax of one (rows, width) shape on one thread count: ``plan(rows)`` writes it over ``rows``."""

    def __init__(self, step: Primitive, layout: Layout, threads: int):
        self.step, self.layout, self.threads = step, layout, threads

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        self.step.run({ARG_SRC: (self.layout, rows), ARG_DST: (self.layout, rows)}, self.threads)
        return rows


class Softmax:
    """``Softmax(library).plan(shape, threads)(rows)``: softmax of each row of C-contiguous float32 ``rows``
    of that shape, written over it."""

    def __init__(self, library: Library):
        self.library = library
        self.plans = PlanCache()  # by (shape, threads)

    def plan(self, shape: tuple[int, int], threads: int | None = None) -> SoftmaxPlan:
        """The plan for ``shape`` on ``threads`` (None: OpenMP's default), made on first use
        (OneDnnError: oneDNN cannot run it)."""
        threads = self.library.threads(threads)
        shape = tuple(shape)
        return self.plans.get_or_make((shape, threads), lambda: self._make_plan(shape, threads))

    def _make_plan(self, shape: tuple[int, int], threads: int) -> SoftmaxPlan:
        library = self.library
        library.set_threads(threads)  # the primitive is made for this many threads
        layout = Layout.plain(library, shape)
        with Attributes(library) as attributes:
            step = Primitive(library, lambda pointer: library.softmax_forward_primitive_desc_create(
                pointer, library.engine, library.forward_inference, library.softmax_accurate, layout.handle,
                layout.handle, 1, attributes.handle), f"softmax of {shape}")
        return SoftmaxPlan(step, layout, threads)
