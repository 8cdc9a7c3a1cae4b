"""A float32 convolution (1-3 spatial dims, any stride, dilation, zero padding, groups) run by oneDNN,
or a transposed convolution (oneDNN's deconvolution: PyTorch's ConvTranspose).

oneDNN's fast kernels want activations with channels in blocks of 8 or 16 (the SIMD width)
and a weight laid out to match.  The weight is reordered once per layout and kept.  An
input may be a plain array, reordered on the way in, or a ``Blocked`` tensor that another
convolution left in its own layout; the output is plain, or ``Blocked`` when the caller
says that only oneDNN convolutions read it (kuiper/graph/native_layouts.py decides), which
saves two passes over memory per convolution.  Post-ops (``primitives.Attributes``) run on
the output while it is in cache: element-wise functions, and a sum with a ``residual``.  A small
convolution (``PLAIN_CONV_WORK``) reads and writes plain arrays instead: there the reorders cost
more than the convolution.  A primitive is made for each input shape and thread count the first
time it is seen (oneDNN fixes a primitive's thread count when it makes it: run on fewer threads,
it waits for the missing ones); at most ``MAX_PLANS`` are kept per convolution, the oldest
going first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..output_buffers import output_array
from .blocked import Blocked, ToPlain, channels_last_order, channels_last_view
from .binding import (ARG_BIAS, ARG_DST, ARG_POST_OP_DW, ARG_SRC, ARG_SRC_1, ARG_WEIGHTS, Library, OneDnnError,
                      post_op_argument)
from .primitives import (ONE_THREAD_WORK, PLAIN_CONV_WORK, Attributes, Layout, PlanCache, Primitive, Reorders,
                         dense_strides, dims, in_strides, pads_after, reference_or_gemm, reorder)
from .sequence import SequenceBuilder
from .weight_layouts import WeightLayouts


# Whether a 2-D convolution's activations take channels in blocks of 16 where they fill one
# (``Convolution._blocked_primitive``) rather than the layout oneDNN picks.
PREFER_CHANNEL_BLOCKS = True
CHANNEL_BLOCK = 16
CHANNEL_BLOCKED_2D = "aBcd16b"  # oneDNN's format tag of NCHW with channels in blocks of 16 (nChw16c)
CHANNEL_BLOCK_MIN_POSITIONS = 100  # output positions per map (10 x 10) from which nChw16c is preferred


def _channel_blocked(library: Library, shape) -> Layout:
    """nChw16c for a 4-D shape of at least a block of channels; else no layout yet (oneDNN picks)."""
    if shape[1] >= CHANNEL_BLOCK:
        return Layout.tagged(library, shape, CHANNEL_BLOCKED_2D)
    return Layout.any(library, shape)


def _plain_float32(value) -> bool:
    return isinstance(value, np.ndarray) and value.dtype == np.float32 and value.flags.c_contiguous


@dataclass
class _Plan:
    """What one input shape runs: the convolution, its weight, and the reorders around it."""

    convolution: Primitive
    threads: int  # the count it was made for
    constants: dict  # its weight and bias arguments ({argument number: (layout, buffer)})
    weight_layout: Layout  # the layout its kernel reads the weight in
    source: Layout  # the convolution's input layout
    result: Layout  # its output layout
    plain_in: Layout  # plain NCHW of the input's shape, made once
    reads_plain: bool  # whether ``source`` is ``plain_in``: a plain input goes in as it is
    out_shape: tuple[int, ...]
    to_plain: ToPlain  # the output as a plain array (no copy where the convolution writes plain NCHW)
    to_channels_last: ToPlain | None = None  # the output as a channels-last view, made on first use
    # The argument number the residual goes in as, in ``result``'s layout, where a binary add post-op
    # adds it (``_blocked_primitive``); None: a sum post-op adds what the output buffer holds.
    residual_argument: int | None = None
    reorder_in: Primitive | None = None  # plain_in -> source, made on the first plain input that needs it
    # (the last Blocked input's layout object, the reorder from it to ``source`` or None): a producer
    # hands over the same layout object call after call, so its comparison with ``source`` is made once
    blocked_in: tuple = (None, None)


class Convolution:
    """``Convolution(...)(x)``: the convolution of float32 x (plain or Blocked), as a fresh tensor."""

    def __init__(self, library: Library, weight: np.ndarray, bias: np.ndarray | None, stride, dilation, pads,
                 groups: int, post_ops=(), output_padding=None, depthwise=None):
        """``weight`` is (out, in/groups, *kernel), or the ``WeightLayouts`` of another convolution of that
        weight (which then shares its reordered copies); ``pads`` a (before, after) pair per spatial dim;
        ``post_ops`` the steps applied to the output (``primitives.Attributes``).

        ``output_padding`` (one count per spatial dim) makes it a transposed convolution, whose
        output has (in - 1) * stride - before - after + dilation * (kernel - 1) + output_padding + 1
        positions along each dim; its ``weight`` is still (out, in/groups, *kernel), the transpose
        of PyTorch's ConvTranspose weight within each group.

        ``depthwise`` (weight (channels, 1, k, k), bias or None) is the depthwise convolution of a
        ``("depthwise", k, stride, padding)`` post-op, which oneDNN runs over the output while it is in
        cache (MobileNet's 1x1 expansion, then its 3x3 depthwise conv); the output is the depthwise
        conv's, after the post-ops that follow that step.
        """
        self.library = library
        self.output_padding = None if output_padding is None else tuple(output_padding)
        self.out_channels, group_in, *kernel = weight.shape
        self.in_channels = group_in * groups
        self.kernel = tuple(kernel)
        self.stride, self.dilation, self.pads, self.groups = tuple(stride), tuple(dilation), tuple(pads), groups
        self.post_ops = tuple(post_ops)
        self.adds_residual = ("sum",) in self.post_ops
        if isinstance(weight, WeightLayouts):
            self.weight_layouts = weight  # shared with another convolution of the same weight
        else:
            shape = weight.shape if groups == 1 else (groups, self.out_channels // groups) + weight.shape[1:]
            self.weight_layouts = WeightLayouts(library, Layout.plain(library, shape),
                                                np.ascontiguousarray(weight, dtype=np.float32))
        self.bias = None if bias is None else (Layout.plain(library, bias.shape),
                                               np.ascontiguousarray(bias, dtype=np.float32))
        self.plans = PlanCache()  # by (input shape, threads); refusals by input shape
        # The plan of each (input shape, thread count the library grants): a call looks it up before anything
        # else, so the thread count, the work and the layouts are worked out once per shape, not per
        # call (for a small conv that was half of its call).
        self.calls = PlanCache()
        self.reorders = Reorders(library)
        self.strided_layouts: dict = {}  # transposed views' layouts, by shape and strides (in_strides)
        self.fused = next((step[1:] for step in self.post_ops if step[0] == "depthwise"), None)  # (k, stride, pad)
        self.depthwise = None  # the fused depthwise conv's weight (groups, 1, 1, k, k) and bias: (layout, array) each
        if self.fused is not None:
            dw_weight, dw_bias = depthwise
            channels = dw_weight.shape[0]
            dw_weight = np.ascontiguousarray(dw_weight, dtype=np.float32).reshape((channels, 1, 1)
                                                                                  + dw_weight.shape[2:])
            # The post-op is made with a float32 bias (Attributes): zeros stand for none.
            dw_bias = np.zeros(channels, np.float32) if dw_bias is None else np.ascontiguousarray(dw_bias, np.float32)
            self.depthwise = ((Layout.plain(library, dw_weight.shape), dw_weight),
                              (Layout.plain(library, dw_bias.shape), dw_bias))

    def work(self, shape) -> int:
        """Multiply-adds of a call on ``shape``: each output (or, transposed, input) element takes
        in_channels / groups times the kernel's taps."""
        positions = shape if self.output_padding is not None else self._own_output_shape(shape)
        count = positions[0] * (self.out_channels if self.output_padding is None else self.in_channels)
        for size in positions[2:]:
            count *= size
        taps = (self.in_channels if self.output_padding is None else self.out_channels) // self.groups
        for k in self.kernel:
            taps *= k
        return count * taps

    def output_shape(self, shape) -> tuple[int, ...]:
        own = self._own_output_shape(shape)
        if self.fused is None:
            return own
        kernel, stride, pad = self.fused  # the depthwise conv pads both sides alike
        return own[:2] + tuple((size + 2 * pad - kernel) // stride + 1 for size in own[2:])

    def _own_output_shape(self, shape) -> tuple[int, ...]:
        """The output shape of this convolution, before a fused depthwise one."""
        if self.output_padding is not None:
            spatial = tuple((size - 1) * s - before - after + d * (k - 1) + extra + 1
                            for size, k, s, d, (before, after), extra in zip(
                                shape[2:], self.kernel, self.stride, self.dilation, self.pads, self.output_padding))
        else:
            spatial = tuple((size + before + after - d * (k - 1) - 1) // s + 1
                            for size, k, s, d, (before, after) in zip(shape[2:], self.kernel, self.stride,
                                                                     self.dilation, self.pads))
        return (shape[0], self.out_channels) + spatial

    def __call__(self, x, threads: int | None = None, residual=None, blocked: bool = False, weight=None,
                 bias=None, channels_last: bool = False):
        """Run on ``threads`` (None: OpenMP's default, ``OMP_NUM_THREADS`` or every core).

        ``residual`` (plain or Blocked, the output's shape) is what a sum post-op adds;
        ``blocked`` asks for the output in the convolution's own layout; ``weight`` (float32, the
        shape of the one made with) replaces it for this call, reordered into the kernel's layout:
        a weight that arrives as an input, as JAX passes weights (a 64-channel 3x3 weight's
        reorder is ~20 us against the ~1 ms convolution it feeds).  ``bias`` (float32, one per output
        channel) likewise replaces the bias of one made with a bias.  ``channels_last`` (without
        ``blocked``) asks for the plain output as a view of an (N, *spatial, C) array (``ToPlain``).
        """
        threads = self.library.threads(threads)  # OpenMP's default for None; 1 in a child forked after OpenMP ran
        if channels_last and not blocked and residual is None and weight is None and bias is None:
            out = self._channels_last_through(x, threads)
            if out is not None:
                return out
        plain_io = not blocked and not isinstance(x, Blocked)
        plan = self.calls.get((x.shape, threads, plain_io))
        if plan is None:
            plan = self.calls.get_or_make((x.shape, threads, plain_io),
                                          lambda: self._plan_for_call(x.shape, threads, plain_io))
        threads = plan.threads
        if self.adds_residual != (residual is not None):
            raise OneDnnError("a residual is needed by a sum post-op, and only then")
        if residual is not None and tuple(residual.shape) != plan.out_shape:
            raise OneDnnError(f"the residual has shape {tuple(residual.shape)}, the output {plan.out_shape}")
        if isinstance(x, Blocked):
            source = self._blocked_in(x, plan, threads)
        else:
            source = self._plain_in(x, plan, threads)
        arguments = {**plan.constants, ARG_SRC: source}
        if residual is None:
            result = (plan.result, plan.result.output())
        elif plan.residual_argument is None:  # a sum post-op adds what the output holds
            result = self._in_layout(residual, plan.to_plain.plain, plan.result, threads, fresh=True)
        else:  # a binary add post-op reads the residual, in the output's layout
            arguments[plan.residual_argument] = self._in_layout(residual, plan.to_plain.plain, plan.result, threads)
            result = (plan.result, plan.result.output())
        arguments[ARG_DST] = result
        if weight is not None:
            arguments[ARG_WEIGHTS] = self._call_weight(weight, plan, threads)
        if bias is not None:
            arguments[ARG_BIAS] = self._call_bias(bias)
        plan.convolution.run(arguments, threads)
        if blocked:
            return Blocked(self.library, plan.out_shape, *result)
        return self._to_plain(plan, channels_last)(result[1], threads)

    def emit(self, builder: SequenceBuilder, x: int, x_layout: Layout | None, shape, threads: int | None,
             residual: int | None = None, residual_layout: Layout | None = None,
             blocked: bool = False, channels_last: bool = False, weight: tuple[int, Layout] | None = None,
             bias: int | None = None) -> tuple[int, Layout] | None:
        """Add to ``builder`` the primitives ``__call__`` runs on an input of ``shape`` in ``x_layout`` (a Blocked
        tensor's; None: a plain C-contiguous array), held by the builder's value ``x`` (and a ``residual`` value
        in ``residual_layout``, None: plain): (the output value, its layout), or None where there is no plan
        for such a call yet (call first).  A ``weight`` (its value and the layout it lies in) and a ``bias``
        value replace the ones the convolution was made with, as ``__call__``'s ``weight`` and ``bias`` do:
        the weight is reordered into the kernel's layout by a step of the sequence."""
        threads = self.library.threads(threads)
        plan = self.calls.get((tuple(shape), threads, not blocked and x_layout is None))
        if plan is None or self.adds_residual != (residual is not None):
            return None
        threads = plan.threads
        if x_layout is None and plan.reads_plain or x_layout is not None and x_layout == plan.source:
            source = x
        else:  # reordered into the layout the kernel reads, as ``_plain_in`` and ``_blocked_in`` do
            if x_layout is None and plan.reorder_in is None:
                plan.reorder_in = self._reorder(plan.plain_in, plan.source, threads)
            step = plan.reorder_in if x_layout is None else self._reorder(x_layout, plan.source, threads)
            source = builder.value(plan.source)
            builder.run(step, {}, {ARG_SRC: x, ARG_DST: source}, threads)
        values = {ARG_SRC: source}
        residual_layout = residual_layout or plan.to_plain.plain
        if residual is not None and plan.residual_argument is not None:  # a binary add post-op reads it
            if residual_layout != plan.result:
                aligned = builder.value(plan.result)
                builder.run(self._reorder(residual_layout, plan.result, threads), {},
                            {ARG_SRC: residual, ARG_DST: aligned}, threads)
                residual = aligned
            values[plan.residual_argument] = residual
            # The output gets a buffer of its own: the kernel may keep partial sums in the output while it
            # reads the residual (32 channels on two threads: every element wrong when they shared one).
            out = builder.value(plan.result)
        elif residual is None:
            out = builder.value(plan.result)
        elif residual_layout == plan.result:
            out = builder.starting_as(plan.result, residual)  # a sum post-op adds what the output holds
        else:  # the residual reordered into the output's layout, where the sum finds it
            out = builder.value(plan.result)
            builder.run(self._reorder(residual_layout, plan.result, threads), {}, {ARG_SRC: residual, ARG_DST: out},
                        threads)
        values[ARG_DST] = out
        constants = dict(plan.constants)
        if weight is not None:
            weight_value, weight_layout = weight
            del constants[ARG_WEIGHTS]
            if weight_layout != plan.weight_layout:
                laid_out = builder.value(plan.weight_layout)
                builder.run(self._reorder(weight_layout, plan.weight_layout, threads), {},
                            {ARG_SRC: weight_value, ARG_DST: laid_out}, threads)
                weight_value = laid_out
            values[ARG_WEIGHTS] = weight_value
        if bias is not None:
            if constants.pop(ARG_BIAS, None) is None:
                return None  # made without a bias: no argument takes one
            values[ARG_BIAS] = bias
        builder.run(plan.convolution, constants, values, threads)
        to_plain = self._to_plain(plan, channels_last)
        if blocked or to_plain.step is None:
            return out, plan.result
        plain = builder.value(to_plain.plain)
        builder.run(to_plain.step, {}, {ARG_SRC: out, ARG_DST: plain}, threads)
        return plain, to_plain.plain

    def sequence_for(self, x, threads: int | None, residual=None, blocked: bool = False,
                     channels_last: bool = False):
        """``__call__`` for inputs like ``x`` (and ``residual``) as one ``Sequence``: a function ``call(x,
        residual)`` returning what ``__call__(x, threads, residual, blocked)`` would, for inputs of ``x``'s class
        and shape (a plain input float32 and C-contiguous; a Blocked one, and a Blocked residual, in the layout
        object ``x``'s is) on the same granted thread count, which the caller checks; None where ``emit`` is.

        A small convolution's call spent ~12 us deciding the plan, the argument table and which memory
        objects to re-point, warm, and 30-50 us of it in a model, where each op finds Python's caches
        cold; this re-points the input and output and executes.

        With ``channels_last``, an ``x`` lying channels-last (``_channels_last_through``) is taken too: the call
        is then for inputs with ``x``'s strides, which the caller checks as well."""
        blocked_in = isinstance(x, Blocked)
        if channels_last and not blocked and residual is None and not blocked_in:
            through = self._channels_last_sequence(x, threads)
            if through is not None:
                return through
        if residual is not None and not isinstance(residual, Blocked) and not _plain_float32(residual):
            return None
        builder = SequenceBuilder(self.library)
        x_value = builder.input()
        residual_value = None if residual is None else builder.input()
        emitted = self._emitted(builder, x, x_value, threads, blocked, channels_last, residual=residual_value,
                                residual_layout=residual.layout if isinstance(residual, Blocked) else None)
        if emitted is None:
            return None
        run = self._sequence_call(builder, emitted, x, blocked, channels_last)

        def call(x, residual=None):
            if residual is None:
                return run(x)
            return run(x, residual.buffer if residual.__class__ is Blocked else residual)

        return call

    def weight_input_sequence_for(self, x, weight_layout: Layout, with_bias: bool, threads: int | None,
                                  blocked: bool = False, channels_last: bool = False):
        """``__call__`` with a call's own weight (and bias) as one ``Sequence``: a function ``call(x, weight[, bias])``
        returning what ``__call__(x, threads, weight=weight, bias=bias, blocked=blocked, channels_last=...)``
        would, for an ``x`` as ``sequence_for`` takes it and a weight whose memory ``weight_layout`` describes
        (a transposed view passed as the C-contiguous array of its memory: ``in_strides``), which the caller
        checks; None where ``emit`` is.  The weight's reorder into the kernel's layout is a step of the sequence.

        A Flax CNN's first conv (8 x 1 x 28 x 28 to 32 channels, the weight passed by JAX) spent 75 us in its
        op's forward, 34 of them in oneDNN: the rest was deciding again, per call, the plan, the weight's
        layout and its reorder, the argument tables."""
        builder = SequenceBuilder(self.library)
        x_value, weight_value = builder.input(), builder.input()
        bias_value = builder.input() if with_bias else None
        emitted = self._emitted(builder, x, x_value, threads, blocked, channels_last,
                                weight=(weight_value, weight_layout), bias=bias_value)
        return None if emitted is None else self._sequence_call(builder, emitted, x, blocked, channels_last)

    def _emitted(self, builder: SequenceBuilder, x, x_value: int, threads, blocked: bool, channels_last: bool,
                 **inputs) -> tuple[int, Layout] | None:
        """``emit`` for an ``x`` a sequence takes (plain float32 C-contiguous, or Blocked); None for another."""
        blocked_in = isinstance(x, Blocked)
        if not blocked_in and not _plain_float32(x):
            return None
        return self.emit(builder, x_value, x.layout if blocked_in else None, x.shape, threads, blocked=blocked,
                         channels_last=channels_last, **inputs)

    def _sequence_call(self, builder: SequenceBuilder, emitted: tuple[int, Layout], x, blocked: bool,
                       channels_last: bool):
        """The built sequence as ``call(x, *other inputs)``: the output as ``__call__`` gives it."""
        out, layout = emitted
        sequence = builder.build([out])
        library, out_shape = self.library, self.output_shape(x.shape)
        view = channels_last_view(out_shape) if channels_last and not blocked else None
        blocked_in = isinstance(x, Blocked)

        def call(x, *others):
            (flat,) = sequence(x.buffer if blocked_in else x, *others)
            if blocked:
                return Blocked(library, out_shape, layout, flat)
            return flat.reshape(out_shape) if view is None else view(flat)

        return call

    def _channels_last_through(self, x, threads: int):
        """The output channels-last, read from an ``x`` that lies channels-last itself (a transposed view of an
        (N, *spatial, C) array: PVT-v2's Mix-FFN hands its depthwise conv a Linear layer's rows), by a kernel
        that reads and writes that layout, with no reorder on either side; None where ``x`` lies otherwise
        or oneDNN has only a reference or GEMM kernel for it (the blocked plan then runs, between reorders).

        PVT-v2's (1, 256, 56, 56) depthwise 3x3, 1 thread: 0.79 ms through nChw16c and its two reorders,
        0.36 ms so.  Its kernel (brdgmm_dw) sums in another order than the blocked one (jit_dw): the values
        differ from the blocked plan's in the last bits."""
        if (self.fused is not None or x.__class__ is not np.ndarray or x.dtype != np.float32 or x.flags.c_contiguous
                or x.ndim < 3):
            return None
        order = channels_last_order(x.ndim)
        memory = x.transpose(order)
        if not memory.flags.c_contiguous:
            return None
        key = (x.shape, threads, "channels-last")
        plan = self.calls.get(key)
        if plan is None:
            try:
                plan = self.calls.get_or_make(key, lambda: self._channels_last_plan(x.shape, threads))
            except OneDnnError:
                return None
        result = output_array(plan.to_plain.memory_shape, np.float32)
        plan.convolution.run({**plan.constants, ARG_SRC: (plan.source, memory), ARG_DST: (plan.result, result)},
                             plan.threads)
        return result.transpose(plan.to_plain.axes)

    def _channels_last_sequence(self, x, threads: int | None):
        """``_channels_last_through`` for inputs lying as ``x`` does, as a function of x (one Sequence: the input
        and output re-pointed, the primitive run); None where that path does not take ``x``."""
        threads = self.library.threads(threads)
        if self._channels_last_through(x, threads) is None:  # (makes the plan on the first such input)
            return None
        plan = self.calls.get((x.shape, threads, "channels-last"))
        builder = SequenceBuilder(self.library)
        x_value = builder.input()
        out = builder.value(plan.result)
        builder.run(plan.convolution, plan.constants, {ARG_SRC: x_value, ARG_DST: out}, plan.threads)
        sequence = builder.build([out])
        order, view = channels_last_order(x.ndim), plan.to_plain.view

        def call(x, residual=None):
            (flat,) = sequence(x.transpose(order))
            return view(flat)

        return call

    def _channels_last_plan(self, shape, threads: int) -> _Plan:
        """The plan of ``_channels_last_through`` (OneDnnError: no direct kernel for it)."""
        shape = tuple(shape)
        if threads > 1 and self.work(shape) < ONE_THREAD_WORK:
            threads = 1
        library = self.library
        library.set_threads(threads)
        out_shape = self.output_shape(shape)
        order = channels_last_order(len(shape))
        source = Layout.strided(library, shape, dense_strides(shape, order))
        result = Layout.strided(library, out_shape, dense_strides(out_shape, order))
        convolution = self._primitive(shape, source, result, self._pads_after(shape))
        if reference_or_gemm(convolution.implementation()):
            raise OneDnnError(f"convolution of {shape}: no channels-last kernel but {convolution.implementation()}")
        weight_layout = convolution.layout(ARG_WEIGHTS)
        constants = {ARG_WEIGHTS: self.weight_layouts.in_layout(weight_layout, threads)}
        if self.bias is not None:
            constants[ARG_BIAS] = self.bias
        return _Plan(convolution=convolution, threads=threads, constants=constants, weight_layout=weight_layout,
                     source=source, result=result, plain_in=source, reads_plain=True, out_shape=out_shape,
                     to_plain=ToPlain(library, result, out_shape, channels_last=True))

    def _to_plain(self, plan: _Plan, channels_last: bool) -> ToPlain:
        """What makes ``plan``'s output plain: NCHW, or a channels-last view (its reorder made on first use, for the
        plan's thread count)."""
        if not channels_last:
            return plan.to_plain
        if plan.to_channels_last is None:
            self.library.set_threads(plan.threads)
            plan.to_channels_last = ToPlain(self.library, plan.result, plan.out_shape, channels_last=True)
        return plan.to_channels_last

    def _plan_for_call(self, shape, threads: int, plain_io: bool) -> _Plan:
        """The plan a call on ``shape`` on ``threads`` threads runs: a small one on one thread."""
        if threads > 1:
            work = self.work(shape)
            if work < ONE_THREAD_WORK or (plain_io and self._runs_plain(work)):
                threads = 1
        return self.plan(shape, threads, plain_io)

    def _plain_in(self, x, plan: _Plan, threads: int) -> tuple[Layout, np.ndarray]:
        """A plain input as a (layout, buffer) pair in the plan's input layout.  A transposed view of a
        row-major array (NHWC seen as NCHW, as a JAX program's convolutions hand it over) is reordered
        straight from its strides: copying it row-major first was a second pass over it."""
        x = np.asarray(x, dtype=np.float32)
        if not x.flags.c_contiguous:
            strided = in_strides(self.library, x, self.strided_layouts)
            if strided is not None:
                target = (plan.source, plan.source.empty())
                self._reorder(strided[0], plan.source, threads).run({ARG_SRC: strided, ARG_DST: target}, threads)
                return target
            x = np.ascontiguousarray(x)
        if plan.reads_plain:
            return plan.plain_in, x
        if plan.reorder_in is None:
            plan.reorder_in = self._reorder(plan.plain_in, plan.source, threads)
        target = (plan.source, plan.source.empty())
        plan.reorder_in.run({ARG_SRC: (plan.plain_in, x), ARG_DST: target}, threads)
        return target

    def _call_weight(self, weight, plan: _Plan, threads: int) -> tuple[Layout, np.ndarray]:
        """A call's own weight in the plan's weight layout: as it is where that is plain, else reordered
        into a fresh buffer (a plan may serve several threads at once), from its strides where it is a
        transposed view (JAX's HWIO kernels seen as OIHW)."""
        source = self.weight_memory(weight)
        if source[0] == plan.weight_layout:
            return source
        target = (plan.weight_layout, plan.weight_layout.empty())
        self._reorder(source[0], plan.weight_layout, threads).run({ARG_SRC: source, ARG_DST: target}, threads)
        return target

    def weight_memory(self, weight) -> tuple[Layout, np.ndarray]:
        """A call's own weight as (a layout describing its memory, a C-contiguous array of that memory): a
        transposed view read by its strides (``in_strides``), else the weight as a row-major array."""
        plain_layout, shape = self.weight_layouts.given_layout, self.weight_layouts.shape
        if tuple(weight.shape) != shape or weight.dtype != np.float32:
            raise OneDnnError(f"a call's weight must be float32 of shape {shape}, "
                              f"found {weight.dtype} {tuple(weight.shape)}")
        if not weight.flags.c_contiguous:
            strided = in_strides(self.library, weight, self.strided_layouts,
                                 None if self.groups == 1 else self._weight_shape())
            if strided is not None:
                return strided
        return plain_layout, np.ascontiguousarray(weight)

    def _call_bias(self, bias) -> tuple[Layout, np.ndarray]:
        """A call's own bias as the bias argument (one made without a bias has no place for one)."""
        if self.bias is None:
            raise OneDnnError("a call's bias needs a convolution made with a bias")
        layout, kept = self.bias
        if tuple(bias.shape) != tuple(kept.shape) or bias.dtype != np.float32:
            raise OneDnnError(f"a call's bias must be float32 of shape {tuple(kept.shape)}, "
                              f"found {bias.dtype} {tuple(bias.shape)}")
        return layout, np.ascontiguousarray(bias)

    def _blocked_in(self, x: Blocked, plan: _Plan, threads: int) -> tuple[Layout, np.ndarray]:
        """A Blocked input as a (layout, buffer) pair in the plan's input layout."""
        layout, step = plan.blocked_in
        if x.layout is not layout:
            layout, step = x.layout, None if x.layout == plan.source else self._reorder(x.layout, plan.source, threads)
            plan.blocked_in = (layout, step)  # one assignment: a plan may serve several threads
        if step is None:
            return plan.source, x.buffer
        target = (plan.source, plan.source.empty())
        step.run({ARG_SRC: (layout, x.buffer), ARG_DST: target}, threads)
        return target

    def _in_layout(self, value, plain: Layout, layout: Layout, threads: int,
                   fresh: bool = False) -> tuple[Layout, np.ndarray]:
        """``value`` (plain, of the layout ``plain``, or Blocked) as a (layout, buffer) pair in ``layout``;
        ``fresh``: a buffer of its own."""
        if isinstance(value, Blocked):
            if value.layout == layout:
                return layout, (value.buffer.copy() if fresh else value.buffer)
            source = (value.layout, value.buffer)
        else:
            value = np.ascontiguousarray(value, dtype=np.float32)
            source = (plain, value)
            if source[0] == layout:
                return layout, (value.copy() if fresh else value)
        target = (layout, layout.empty())
        self._reorder(source[0], layout, threads).run({ARG_SRC: source, ARG_DST: target}, threads)
        return target

    def _reorder(self, source: Layout, target: Layout, threads: int) -> Primitive:
        """A reorder between two layouts for ``threads``, made once and kept."""
        return self.reorders.get(source, target, threads)

    def plan(self, shape, threads: int, plain_io: bool = True) -> _Plan:
        """The plan for inputs of ``shape`` on ``threads``, made on first use (OneDnnError: oneDNN cannot run it).
        ``plain_io``: the input arrives plain and the output leaves plain (no oneDNN convolution beside
        this one hands over or takes its blocked layout)."""
        shape = tuple(shape)
        return self.plans.get_or_make((shape, threads, plain_io), lambda: self._make_plan(shape, threads, plain_io),
                                      refusal_key=shape)

    def _make_plan(self, shape, threads: int, plain_io: bool) -> _Plan:
        library = self.library
        library.set_threads(threads)  # the primitives below are made for this many threads
        out_shape = self.output_shape(shape)
        if min(out_shape[2:], default=1) < 1:
            raise OneDnnError(f"convolution of {shape} has an empty output {out_shape}")
        own_shape = self._own_output_shape(shape)
        right = self._pads_after(shape)
        plain_in = Layout.plain(library, shape)
        convolution, residual_argument = None, None
        if plain_io and self._runs_plain(self.work(shape)):
            try:
                convolution = self._primitive(shape, plain_in, Layout.plain(library, out_shape), right)
            except OneDnnError:
                convolution = None  # no plain-layout kernel for it: the blocked ones below
            if convolution is not None and convolution.implementation().startswith("ref"):
                # oneDNN's GEMM kernel lacks these post-ops (an activation before the sum): its
                # reference loop, which runs them on plain layouts, is 400x slower than the blocked kernels.
                convolution = None
        if convolution is None:
            convolution, residual_argument = self._blocked_primitive(shape, own_shape, right)
        source, result = convolution.layout(ARG_SRC), convolution.layout(ARG_DST)  # dst: the fused conv's
        if result.nbytes < 4 * math.prod(out_shape):
            raise OneDnnError(f"convolution of {shape}: oneDNN's output is not of shape {out_shape}")
        weight_layout = convolution.layout(ARG_WEIGHTS)
        constants = {ARG_WEIGHTS: self.weight_layouts.in_layout(weight_layout, threads)}
        if self.bias is not None:
            constants[ARG_BIAS] = self.bias
        if self.depthwise is not None:
            constants.update(self._depthwise_in(convolution, threads))
        reads_plain = source == plain_in
        return _Plan(
            convolution=convolution, threads=threads, constants=constants, weight_layout=weight_layout,
            source=plain_in if reads_plain else source, result=result, plain_in=plain_in, reads_plain=reads_plain,
            out_shape=out_shape, to_plain=ToPlain(library, result, out_shape), residual_argument=residual_argument,
        )

    def _pads_after(self, shape) -> list[int]:
        """The right padding oneDNN is given for inputs of ``shape``.

        oneDNN checks out = (in + before + after - span) / stride + 1 exactly: the right padding it
        is given is the part the last window uses (PyTorch drops the rest by flooring).  A
        transposed conv swaps in and out in that rule, so output_padding lowers the right padding."""
        windows, positions = self._own_output_shape(shape)[2:], shape[2:]
        if self.output_padding is not None:
            windows, positions = positions, windows
        return pads_after(windows, positions, self.kernel, self.stride, self.dilation,
                          [before for before, _ in self.pads])

    def _blocked_primitive(self, shape, out_shape, right) -> tuple[Primitive, int | None]:
        """The convolution on blocked layouts, and the argument number a residual goes in as (None: a sum
        post-op adds it): for a 2-D convolution whose output maps have at least ``CHANNEL_BLOCK_MIN_POSITIONS``
        positions, channels in blocks of 16 (nChw16c) where there are that many channels; else the layouts
        oneDNN picks.

        Left to pick, oneDNN 3.2 takes channels-last (nhwc) and its brgemm kernels for every layer of
        MobileNetV2, which on nChw16c runs its direct jit kernels instead: batch 8, 1 thread, its 21
        distinct layers take 30.6 ms in all there against 42.4 (16 -> 96 channels 1x1 on 112x112: 3.2
        against 5.9 ms; the depthwise 96 on 112x112: 3.2 against 5.6), and no reorder follows the stem.
        On 7x7 maps brgemm wins (ResNet-18's 512-channel 3x3 convs: 5.3 against 6.8 ms for three, batch
        1) or ties (MobileNetV2's), and from 14x14 up the two tie on ResNet-18's and YOLOv5's dense
        3x3 convs.  Where the kernels for nChw16c are only reference or GEMM ones (a grouped conv
        whose groups do not fill blocks), oneDNN picks after all.

        oneDNN 3.2's direct nChw16c kernels take a sum post-op only first: a residual added after an
        activation (YOLOv5's bottlenecks: x + SiLU(conv(x))) found only the reference kernel there, so
        oneDNN picked nhwc and brgemm, and a reorder went in and out of every bottleneck.  Such a sum is
        made a binary add post-op, which those kernels take, with the residual passed as its operand."""
        library = self.library
        if (PREFER_CHANNEL_BLOCKS and self.output_padding is None and len(shape) == 4
                and out_shape[2] * out_shape[3] >= CHANNEL_BLOCK_MIN_POSITIONS):
            source, result = _channel_blocked(library, shape), _channel_blocked(library, out_shape)
            chains = [(self.post_ops, None)]
            if self.adds_residual and self.post_ops.index(("sum",)) > 0:
                at = self.post_ops.index(("sum",))
                adding = self.post_ops[:at] + (("add",),) + self.post_ops[at + 1:]
                chains.append((adding, post_op_argument(at, ARG_SRC_1)))
            for post_ops, residual_argument in chains:
                try:
                    convolution = self._primitive(shape, source, result, right, post_ops)
                except OneDnnError:
                    continue
                if not reference_or_gemm(convolution.implementation()):
                    return convolution, residual_argument
        return self._primitive(shape, Layout.any(library, shape), Layout.any(library, out_shape), right), None

    def _primitive(self, shape, source: Layout, result: Layout, right, post_ops=None) -> Primitive:
        """The (transposed) convolution primitive of inputs of ``shape`` from ``source`` to ``result``, with
        ``post_ops`` (None: the convolution's own; a binary one's operand is in ``result``'s layout)."""
        library = self.library
        any_weight = Layout.any(library, self._weight_shape())
        bias = self.bias[0].handle if self.bias is not None else None
        create, algorithm = library.convolution_forward_primitive_desc_create, library.convolution_direct
        if self.output_padding is not None:
            create, algorithm = library.deconvolution_forward_primitive_desc_create, library.deconvolution_direct
        post_ops = self.post_ops if post_ops is None else post_ops
        with Attributes(library, post_ops, operand=result) as attributes:
            return Primitive(library, lambda pointer: create(
                pointer, library.engine, library.forward_inference, algorithm, source.handle,
                any_weight.handle, bias, result.handle, dims(self.stride), dims(d - 1 for d in self.dilation),
                dims(before for before, _ in self.pads), dims(right), attributes.handle),
                f"{'transposed ' if self.output_padding is not None else ''}convolution of {shape} by "
                f"{self.weight_layouts.shape}")

    def _runs_plain(self, work: int) -> bool:
        """Whether a call of ``work`` multiply-adds runs on plain layouts and one thread: under
        ``PLAIN_CONV_WORK``, for convolutions neither grouped nor transposed."""
        return work < PLAIN_CONV_WORK and self.groups == 1 and self.output_padding is None and self.fused is None

    def _weight_shape(self) -> tuple[int, ...]:
        if self.groups == 1:
            return (self.out_channels, self.in_channels) + self.kernel
        return (self.groups, self.out_channels // self.groups, self.in_channels // self.groups) + self.kernel

    def _depthwise_in(self, convolution: Primitive, threads: int) -> dict:
        """The fused depthwise conv's weight and bias arguments, reordered into the layouts ``convolution``
        reads them in."""
        arguments = {}
        for number, given in ((ARG_POST_OP_DW | ARG_WEIGHTS, self.depthwise[0]),
                              (ARG_POST_OP_DW | ARG_BIAS, self.depthwise[1])):
            layout = convolution.layout(number)
            if layout == given[0]:
                arguments[number] = given
                continue
            buffer = layout.empty()
            reorder(self.library, given[0], layout).run({ARG_SRC: given, ARG_DST: (layout, buffer)}, threads=threads)
            arguments[number] = (layout, buffer)
        return arguments

    def implementation(self, shape, threads: int | None = None) -> str:
        return self.plan(shape, self.library.threads(threads)).convolution.implementation()
