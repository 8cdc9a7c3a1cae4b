"""Concatenating float32 tensors (plain or Blocked) along one axis with oneDNN, into oneDNN's layout.

Between two convolutions that keep oneDNN's blocked layout (a YOLO C3 block: two branches
joined, then a 1x1 convolution), joining the branches in that layout saves converting each
branch to plain arrays and the result back.  The output layout is the one oneDNN picks from
the inputs'.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .binding import ARG_DST, ARG_MULTIPLE_SRC, ARG_SRC, Handle, Library
from .blocked import Blocked, ToPlain
from .primitives import MAX_PLANS, Attributes, Layout, Primitive
from .sequence import SequenceBuilder


@dataclass
class _Plan:
    """What one combination of input layouts runs: the concatenation, its output layout, the copy to plain."""

    layouts: list[Layout]
    threads: int
    concat: Primitive
    result: Layout
    to_plain: ToPlain


class Concatenation:
    """``Concatenation(library, axis)(tensors, threads, blocked)``: the tensors joined along ``axis``."""

    def __init__(self, library: Library, axis: int):
        self.library = library
        self.axis = axis
        self.plans: list[_Plan] = []
        self.plain_layouts: dict[tuple[int, ...], Layout] = {}  # a plain input's layout per shape, made once

    def __call__(self, tensors, threads: int | None = None, blocked: bool = False):
        threads = self.library.threads(threads)
        sources = [self._as_source(tensor) for tensor in tensors]
        shape = list(tensors[0].shape)
        shape[self.axis] = sum(tensor.shape[self.axis] for tensor in tensors)
        plan = self._plan([layout for layout, _ in sources], tuple(shape), threads)
        buffer = plan.result.empty()
        arguments = {ARG_MULTIPLE_SRC + i: source for i, source in enumerate(sources)}
        arguments[ARG_DST] = (plan.result, buffer)
        plan.concat.run(arguments, threads)
        return Blocked(self.library, tuple(shape), plan.result, buffer) if blocked else plan.to_plain(buffer, threads)

    def emit(self, builder: SequenceBuilder, inputs, threads: int | None,
             blocked: bool = False) -> tuple[int, Layout] | None:
        """Add to ``builder`` the primitives ``__call__`` runs on ``inputs``: (value, layout or None for a plain
        array, shape) each; (the output value, its layout)."""
        threads = self.library.threads(threads)
        layouts = [layout if layout is not None else self._plain_layout(shape) for _, layout, shape in inputs]
        shape = list(inputs[0][2])
        shape[self.axis] = sum(input_shape[self.axis] for _, _, input_shape in inputs)
        plan = self._plan(layouts, tuple(shape), threads)
        out = builder.value(plan.result)
        values = {ARG_MULTIPLE_SRC + i: value for i, (value, _, _) in enumerate(inputs)}
        builder.run(plan.concat, {}, {**values, ARG_DST: out}, threads)
        if blocked or plan.to_plain.step is None:
            return out, plan.result
        plain = builder.value(plan.to_plain.plain)
        builder.run(plan.to_plain.step, {}, {ARG_SRC: out, ARG_DST: plain}, threads)
        return plain, plan.to_plain.plain

    def _plan(self, layouts: list[Layout], shape: tuple[int, ...], threads: int) -> _Plan:
        for plan in self.plans:
            if plan.threads == threads and len(plan.layouts) == len(layouts) and all(
                    a == b for a, b in zip(plan.layouts, layouts)):
                return plan
        library = self.library
        library.set_threads(threads)
        handles = (Handle * len(layouts))(*(layout.handle for layout in layouts))
        with Attributes(library) as attributes:
            concat = Primitive(library, lambda pointer: library.concat_primitive_desc_create(
                pointer, library.engine, None, len(layouts), self.axis, handles, attributes.handle), "concat")
        result = concat.layout(ARG_DST)
        plan = _Plan(layouts, threads, concat, result, ToPlain(library, result, shape))
        self.plans = [*self.plans[1 - MAX_PLANS:], plan]
        return plan

    def _as_source(self, tensor) -> tuple[Layout, np.ndarray]:
        if isinstance(tensor, Blocked):
            return tensor.layout, tensor.buffer
        array = np.ascontiguousarray(tensor, dtype=np.float32)
        return self._plain_layout(array.shape), array

    def _plain_layout(self, shape) -> Layout:
        """A plain input's layout, made once per shape."""
        shape = tuple(shape)
        layout = self.plain_layouts.get(shape)
        if layout is None:
            if len(self.plain_layouts) >= MAX_PLANS:
                self.plain_layouts.pop(next(iter(self.plain_layouts)))
            layout = self.plain_layouts[shape] = Layout.plain(self.library, shape)
        return layout
