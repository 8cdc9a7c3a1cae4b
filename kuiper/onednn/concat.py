"""Concatenating float32 tensors (plain or Blocked) along one axis with oneDNN, into oneDNN's layout.

Between two convolutions that keep oneDNN's blocked layout (a YOLO C3 block: two branches
joined, then a 1x1 convolution), joining the branches in that layout saves converting each
branch to plain arrays and the result back.  The output layout is the one oneDNN picks from
the inputs'.
"""

from __future__ import annotations

import ctypes

import numpy as np

from .binding import ARG_DST, ARG_MULTIPLE_SRC, Handle, Library
from .blocked import Blocked
from .primitives import Attributes, Layout, Primitive

MAX_PLANS = 8


class Concatenation:
    """``Concatenation(library, axis)(tensors, threads, blocked)``: the tensors joined along ``axis``."""

    def __init__(self, library: Library, axis: int):
        self.library = library
        self.axis = axis
        self.plans: list[tuple[list[Layout], int, Primitive]] = []  # (input layouts, threads, primitive)

    def __call__(self, tensors, threads: int | None = None, blocked: bool = False):
        threads = self.library.threads(threads)
        sources = [_as_source(self.library, tensor) for tensor in tensors]
        step = self._primitive([layout for layout, _ in sources], threads)
        shape = list(tensors[0].shape)
        shape[self.axis] = sum(tensor.shape[self.axis] for tensor in tensors)
        result = step.layout(ARG_DST)
        buffer = result.empty()
        arguments = {ARG_MULTIPLE_SRC + i: source for i, source in enumerate(sources)}
        arguments[ARG_DST] = (result, buffer)
        step.run(arguments, threads)
        out = Blocked(self.library, tuple(shape), result, buffer)
        if blocked:
            return out
        if result == Layout.plain(self.library, shape):
            return np.reshape(buffer, shape)  # oneDNN joined plain inputs into a plain result
        return out.plain(threads)

    def _primitive(self, layouts: list[Layout], threads: int) -> Primitive:
        for kept_layouts, kept_threads, step in self.plans:
            if kept_threads == threads and len(kept_layouts) == len(layouts) and all(
                    a == b for a, b in zip(kept_layouts, layouts)):
                return step
        library = self.library
        library.set_threads(threads)
        handles = (Handle * len(layouts))(*(layout.handle for layout in layouts))
        with Attributes(library) as attributes:
            step = Primitive(library, lambda pointer: library.concat_primitive_desc_create(
                pointer, library.engine, None, len(layouts), self.axis, handles, attributes.handle), "concat")
        self.plans = [*self.plans[1 - MAX_PLANS:], (layouts, threads, step)]
        return step


def _as_source(library: Library, tensor) -> tuple[Layout, np.ndarray]:
    if isinstance(tensor, Blocked):
        return tensor.layout, tensor.buffer
    array = np.ascontiguousarray(tensor, dtype=np.float32)
    return Layout.plain(library, array.shape), array
