"""Max and average pooling of float32 tensors (plain or Blocked) on oneDNN, in the input's layout.

Between two convolutions that keep oneDNN's blocked layout (ResNet's stem, YOLO's SPPF
block), pooling in that layout saves converting the tensor to a plain array and back.
oneDNN pools in whatever layout the input arrives in, and writes its output the same way; a
plain input whose only kernel would be oneDNN's reference loop is refused.

The caller gives each call's output size (PyTorch's floor or ceil rule is the op's business):
the right padding handed to oneDNN is what makes its own size rule give that size.  A plan
(the primitive and its layouts) is made per input layout, shape and thread count; at most
``MAX_PLANS`` are kept, the oldest going first.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .binding import ARG_DST, ARG_SRC, Library, OneDnnError
from .blocked import Blocked, ToPlain
from .primitives import MAX_PLANS, Attributes, Layout, Primitive, dims, pads_after
from .sequence import SequenceBuilder


ALGORITHMS = {  # kuiper's name: oneDNN's
    "max": "pooling_max",
    "average_include_padding": "pooling_avg_include_padding",  # divides by the whole window
    "average_exclude_padding": "pooling_avg_exclude_padding",  # divides by the input elements under it
}


@dataclass
class _Plan:
    layout: Layout | None  # the Blocked input's layout; None: a plain array
    shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    threads: int
    pooling: Primitive | None  # None: oneDNN refused, for the reason below
    refusal: str = ""
    source: Layout | None = None  # the input's layout
    result: Layout | None = None  # the output's: the input's kind of layout
    to_plain: ToPlain | None = None  # the output as a plain array


class Pooling:
    """``Pooling(library, algorithm, kernel, stride, dilation, pads_before)(x, out_size)``: x pooled."""

    def __init__(self, library: Library, algorithm: str, kernel, stride, dilation, pads_before):
        """``algorithm`` is a key of ALGORITHMS; ``dilation`` counts as PyTorch's does (1: none)."""
        self.library = library
        self.algorithm = library.alg_kind(ALGORITHMS[algorithm])
        self.kernel, self.stride, self.dilation = tuple(kernel), tuple(stride), tuple(dilation)
        self.pads_before = tuple(pads_before)
        self.plans: list[_Plan] = []

    def pads_after(self, shape, out_size) -> list[int]:
        """The right padding that makes oneDNN's pooling of ``shape`` give ``out_size``."""
        return pads_after(out_size, shape[2:], self.kernel, self.stride, self.dilation, self.pads_before)

    def _every_window_meets_input(self, shape, out_size) -> bool:
        """Whether every window has an input element under it (a dilated one may step over the input)."""
        for size, out, k, s, d, before in zip(shape[2:], out_size, self.kernel, self.stride, self.dilation,
                                              self.pads_before):
            taps = np.arange(out)[:, None] * s - before + np.arange(k)[None, :] * d
            if not np.all(np.any((taps >= 0) & (taps < size), axis=1)):
                return False
        return True

    def __call__(self, x, out_size, threads: int | None = None, blocked: bool = False):
        """x (N, C, *spatial) pooled to spatial size ``out_size``, on ``threads`` (None: OpenMP's default);
        ``blocked``: the output stays in oneDNN's layout (the input's), else a plain array."""
        threads = self.library.threads(threads)
        layout = x.layout if isinstance(x, Blocked) else None
        buffer = x.buffer if isinstance(x, Blocked) else np.ascontiguousarray(x, dtype=np.float32)
        plan = self.plan(layout, tuple(x.shape), tuple(out_size), threads)
        out = plan.result.output()
        plan.pooling.run({ARG_SRC: (plan.source, buffer), ARG_DST: (plan.result, out)}, threads)
        return Blocked(self.library, plan.out_shape, plan.result, out) if blocked else plan.to_plain(out, threads)

    def emit(self, builder: SequenceBuilder, x: int, layout: Layout | None, shape, out_size, threads: int | None,
             blocked: bool = False) -> tuple[int, Layout] | None:
        """Add to ``builder`` the primitives ``__call__`` runs on an input of ``shape`` in ``layout`` (None: plain),
        held by the value ``x``: (the output value, its layout), or None where no call made a plan for such an
        input yet, or oneDNN refused it."""
        threads = self.library.threads(threads)
        out_shape = tuple(shape[:2]) + tuple(out_size)
        key = (tuple(shape), out_shape, threads)
        plan = next((plan for plan in self.plans if (plan.shape, plan.out_shape, plan.threads) == key
                     and (plan.layout is None if layout is None else layout == plan.layout)), None)
        if plan is None or plan.pooling is None:
            return None
        out = builder.value(plan.result)
        builder.run(plan.pooling, {}, {ARG_SRC: x, ARG_DST: out}, threads)
        if blocked or plan.to_plain.step is None:
            return out, plan.result
        plain = builder.value(plan.to_plain.plain)
        builder.run(plan.to_plain.step, {}, {ARG_SRC: out, ARG_DST: plain}, threads)
        return plain, plan.to_plain.plain

    def plan(self, layout: Layout | None, shape: tuple[int, ...], out_size: tuple[int, ...], threads: int) -> _Plan:
        """The plan for inputs of ``shape`` in ``layout`` (None: plain) on ``threads``, made on first use
        (OneDnnError: oneDNN cannot run it; remembered, as a refusal costs a primitive search)."""
        out_shape = tuple(shape[:2]) + out_size
        for plan in self.plans:
            if (plan.shape, plan.out_shape, plan.threads) == (shape, out_shape, threads) and (
                    plan.layout is None if layout is None else layout == plan.layout):
                break
        else:
            plan = self._make_plan(layout, shape, out_shape, threads)
            self.plans = [*self.plans[1 - MAX_PLANS:], plan]
        if plan.pooling is None:
            raise OneDnnError(plan.refusal)
        return plan

    def _make_plan(self, layout: Layout | None, shape, out_shape, threads: int) -> _Plan:
        library = self.library
        library.set_threads(threads)  # the primitive is made for this many threads
        if not self._every_window_meets_input(shape, out_shape[2:]):
            # oneDNN's max gives -FLT_MAX there (not -inf), its exclude-padding average divides by zero
            return _Plan(layout, shape, out_shape, threads, None, f"pooling of {shape}: a window covers only padding")
        source = layout if layout is not None else Layout.plain(library, shape)
        any_out = Layout.any(library, out_shape)
        try:
            with Attributes(library) as attributes:
                pooling = Primitive(library, lambda pointer: library.pooling_forward_primitive_desc_create(
                    pointer, library.engine, library.forward_inference, self.algorithm, source.handle, any_out.handle,
                    dims(self.stride), dims(self.kernel), dims(d - 1 for d in self.dilation), dims(self.pads_before),
                    dims(self.pads_after(shape, out_shape[2:])), attributes.handle),
                    f"pooling of {shape} to {out_shape} (kernel {self.kernel}, stride {self.stride})")
        except OneDnnError as exc:
            return _Plan(layout, shape, out_shape, threads, None, str(exc))
        implementation = pooling.implementation()
        if layout is None and implementation.startswith("ref"):
            # oneDNN's reference loop is all it has for plain NCHW on some machines (AVX2) and for
            # some windows (dilated ones): far slower than the caller's own loop.
            return _Plan(layout, shape, out_shape, threads, None,
                         f"pooling of plain {shape}: oneDNN has only its reference loop ({implementation})")
        result = pooling.layout(ARG_DST)
        return _Plan(layout, shape, out_shape, threads, pooling, source=source, result=result,
                     to_plain=ToPlain(library, result, out_shape))
