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
from .primitives import MAX_PLANS, Attributes, Layout, Primitive, Reorders
from .sequence import SequenceBuilder


# oneDNN's channel-blocked format tags by rank, widest block first: the layouts joined without its reference loop
BLOCKED_TAGS = {3: ("aBc16b", "aBc8b"), 4: ("aBcd16b", "aBcd8b"), 5: ("aBcde16b", "aBcde8b")}


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
        self.tagged_layouts: dict[tuple, Layout] = {}  # (shape, format tag) -> its layout, made once
        self.reorders = Reorders(library)

    def __call__(self, tensors, threads: int | None = None, blocked: bool = False):
        threads = self.library.threads(threads)
        sources = [self._as_source(tensor) for tensor in tensors]
        shape = list(tensors[0].shape)
        shape[self.axis] = sum(tensor.shape[self.axis] for tensor in tensors)
        aligned = self._aligned([layout for layout, _ in sources], [tensor.shape for tensor in tensors], threads)
        for index, (target, step) in enumerate(aligned):
            if step is not None:  # into the layout the others are in: a jit reorder, then oneDNN's fast join
                buffer = target.empty()
                step.run({ARG_SRC: sources[index], ARG_DST: (target, buffer)}, threads)
                sources[index] = (target, buffer)
        layouts = [layout for layout, _ in sources]
        plan = self._plan(layouts, [tensor.shape for tensor in tensors], tuple(shape), threads)
        buffer = plan.result.output()
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
        values = {}
        for index, ((value, _, input_shape), (target, step)) in enumerate(
                zip(inputs, self._aligned(layouts, [input_shape for _, _, input_shape in inputs], threads))):
            if step is not None:
                aligned = builder.value(target)
                builder.run(step, {}, {ARG_SRC: value, ARG_DST: aligned}, threads)
                value, layouts[index] = aligned, target
            values[ARG_MULTIPLE_SRC + index] = value
        plan = self._plan(layouts, [input_shape for _, _, input_shape in inputs], tuple(shape), threads)
        out = builder.value(plan.result)
        builder.run(plan.concat, {}, {**values, ARG_DST: out}, threads)
        if blocked or plan.to_plain.step is None:
            return out, plan.result
        plain = builder.value(plan.to_plain.plain)
        builder.run(plan.to_plain.step, {}, {ARG_SRC: out, ARG_DST: plain}, threads)
        return plain, plan.to_plain.plain

    def _aligned(self, layouts: list[Layout], shapes, threads: int) -> list[tuple[Layout, Primitive | None]]:
        """For each input, (the layout it joins in, the reorder into it or None).  Inputs in different layouts
        (a plain upsampled map beside a conv's blocked output, as in YOLO's neck) take oneDNN's reference
        join, 30-70 ms for YOLOv5's at batch 8 against a few ms for one layout: where one input is in a
        channel-blocked layout (``BLOCKED_TAGS``), the others are reordered into that layout first."""
        unchanged = [(layout, None) for layout in layouts]
        tag = self._blocked_tag(layouts, shapes)
        if tag is None:
            return unchanged
        aligned = []
        for layout, shape in zip(layouts, shapes):
            target = self._tagged(shape, tag)
            aligned.append((layout, None) if layout == target else (target, self._reorder(layout, target, threads)))
        return aligned

    def _blocked_tag(self, layouts: list[Layout], shapes) -> str | None:
        """The channel-blocked format tag (``BLOCKED_TAGS``) some input is in, the first found; None."""
        if len(shapes[0]) not in BLOCKED_TAGS:
            return None
        return next((tag for tag in BLOCKED_TAGS[len(shapes[0])] for layout, shape in zip(layouts, shapes)
                     if layout == self._tagged(shape, tag)), None)

    def _tagged(self, shape, tag: str) -> Layout:
        """``Layout.tagged``, made once per shape and tag."""
        key = (tuple(shape), tag)
        layout = self.tagged_layouts.get(key)
        if layout is None:
            if len(self.tagged_layouts) >= 4 * MAX_PLANS:
                self.tagged_layouts.pop(next(iter(self.tagged_layouts)))
            layout = self.tagged_layouts[key] = Layout.tagged(self.library, tuple(shape), tag)
        return layout

    def _reorder(self, source: Layout, target: Layout, threads: int) -> Primitive:
        """A reorder between two layouts for ``threads``, made once and kept."""
        return self.reorders.get(source, target, threads)

    def _plan(self, layouts: list[Layout], in_shapes, shape: tuple[int, ...], threads: int) -> _Plan:
        for plan in self.plans:
            if plan.threads == threads and len(plan.layouts) == len(layouts) and all(
                    a == b for a, b in zip(plan.layouts, layouts)):
                return plan
        library = self.library
        library.set_threads(threads)
        handles = (Handle * len(layouts))(*(layout.handle for layout in layouts))
        # Inputs all in one channel-blocked layout join into the same layout, named: left to pick, oneDNN 3.2
        # takes its reference join for some channel counts (16 then 32 channels, but not 32 then 16).
        tag = self._blocked_tag(layouts, in_shapes)
        result = None
        if tag is not None and all(layout == self._tagged(each, tag) for layout, each in zip(layouts, in_shapes)):
            result = self._tagged(shape, tag).handle
        with Attributes(library) as attributes:
            concat = Primitive(library, lambda pointer: library.concat_primitive_desc_create(
                pointer, library.engine, result, len(layouts), self.axis, handles, attributes.handle), "concat")
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
