"""Convolutions of every rank on oneDNN (kuiper.onednn), for the NumPy backend's kernels.

``OneDnnConv`` is mixed into a ConvNd subclass: a float32 conv with a constant weight and zero
padding runs on oneDNN when the library is found, its epilogue as post-ops where oneDNN has them
(conv_post_ops.py) and else after the conv, and hands its output to other oneDNN convs in
oneDNN's blocked layout when the graph allows (kuiper/graph/native_layouts.py).  Anything else (another
dtype, an unbatched or empty input, a shape oneDNN refuses) takes the class's other paths,
which also raise the reference's errors.

nn.Conv1d and nn.Conv3d have no compiled paths of their own, so here they are the reference
op plus oneDNN; nn.Conv2d's class (conv.py) puts oneDNN in front of its compiled paths.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .. import onednn
from ..onednn import primitives as onednn_primitives
from ..limits import budget_bytes, check_size, nbytes
from ..ops import conv as reference
from ..ops.base import CHANNELS_LAST
from ..ops.special_values import FLOAT32_MAX, linear_bound, sum_of_squares
from ..thread_limits import requested as model_threads
from . import conv_post_ops

NATIVE_LAYOUT = "onednn"  # the name other ops know oneDNN's blocked layout by (Op.native_layout)
BLOCK_CHANNELS = 16  # oneDNN's widest channel block (AVX-512); a blocked buffer rounds channels up to it
MAX_SHAPES = 64  # input shapes whose output and budget shapes an op keeps
ROUNDING_ROOM = 2.0  # the factor a norm bound leaves for float32 rounding (OneDnnPath.norm_bound)


class OneDnnPath:
    """What a plain and a transposed convolution share on oneDNN (mixed in before the op class): the
    layouts they hand on and take, and the call, with the epilogue as post-ops or after it.  The
    subclass makes ``native`` and says which buffers the size budget is checked for."""

    native = None  # the oneDNN (de)convolution, with the epilogue's post-ops, when it runs this op
    epilogue_after = False  # whether the epilogue runs after the oneDNN call (it has no post-ops for it)
    _output_bound = None  # linear_bound of the weight, on the first call

    def native_layout(self) -> str | None:
        """oneDNN's blocked layout, when this op runs there and gives its own output (no epilogue
        after it)."""
        return NATIVE_LAYOUT if self.native is not None and not self.epilogue_after else None

    def takes_layout(self, position: int, layout: str) -> bool:
        """The input, and the residual of a sum post-op, may arrive in oneDNN's layout."""
        if layout != NATIVE_LAYOUT or self.native is None:
            return False
        return position == 0 or (position == 1 and self.native.adds_residual)

    def writes_channels_last(self) -> bool:
        """On oneDNN, with no epilogue after it: its plain output is a reorder out of the conv's own layout
        (or the conv's own write), which writes channels-last as fast as NCHW.  Its other paths ignore it."""
        return self.native is not None and not self.epilogue_after

    def forward(self, *inputs):
        if self.native is not None:
            out = self._onednn_forward(inputs[0], inputs[1:])
            if out is not None:
                return out
        # The other paths take plain arrays (and raise the reference's errors on bad inputs).
        return super().forward(*(np.asarray(v) if isinstance(v, onednn.Blocked) else v for v in inputs))

    def _onednn_forward(self, x, extras):
        """The op (and its epilogue) on oneDNN, or None where it does not apply to these inputs."""
        if not isinstance(x, onednn.Blocked) and not (isinstance(x, np.ndarray) and x.dtype == np.float32):
            return None  # the reference takes these, and raises its errors
        if x.shape not in self._shapes_by_input and len(self._shapes_by_input) >= MAX_SHAPES:
            self._shapes_by_input.clear()  # a model fed ever new shapes (sequence lengths) keeps the recent ones
        out_shape, budget_shapes, largest = self.cached(self._shapes_by_input, x.shape, self._shapes_for, x.shape)
        if out_shape is None:
            return None
        # The size budget, before anything of that size is made: compared with the largest buffer's size,
        # worked out once per shape; check_size (and the op's description, which alone cost 2 us) only
        # to raise its error.
        if largest > budget_bytes():
            for shape in budget_shapes:
                check_size(shape, 4, self.node.describe())
        residual = None
        if self.native.adds_residual:
            residual = extras[0]
            if tuple(residual.shape) != out_shape or residual.dtype != np.float32:
                return None  # a broadcast or another dtype: the other paths take it
        norms = self.tame(x, residual)
        if norms is None:
            return None  # NaN, +-inf or sums that could overflow: the other paths follow IEEE 754 (see tame)
        blocked = self.output_layout == NATIVE_LAYOUT
        try:
            out = self.native(x, model_threads(), residual=residual, blocked=blocked,
                              channels_last=self.output_layout == CHANNELS_LAST)
        except onednn.OneDnnError:
            return None  # oneDNN refused this input shape (once: it remembers)
        if blocked:
            out.norm_bound = self.norm_bound(out.shape, *norms)
        return self.run_epilogue(out, extras) if self.epilogue_after else out

    def specialized(self, inputs):
        """The oneDNN call as one sequence for inputs like ``inputs`` (``Convolution.sequence_for``), behind the guards
        ``_onednn_forward`` runs per call: the size budget, and the special-value guard (``tame``), which
        reads a Blocked input's norm bound or the data.  Anything else, or inputs of another class, shape,
        layout or thread count, takes ``forward``."""
        x = inputs[0]
        shapes = self._shapes_by_input.get(getattr(x, "shape", None)) if self.native is not None else None
        if shapes is None or shapes[0] is None or self.epilogue_after:
            return None
        out_shape, _, largest = shapes
        residual = inputs[1] if self.native.adds_residual and len(inputs) == 2 else None
        if len(inputs) != 1 + (residual is not None):
            return None
        library = self.native.library
        threads = library.threads(model_threads())  # what this call gets: 1 in a child forked after OpenMP ran
        blocked = self.output_layout == NATIVE_LAYOUT
        call = self.native.sequence_for(x, threads, residual, blocked, self.output_layout == CHANNELS_LAST)
        if call is None:
            return None
        like = same_kind_as(x)
        like_residual = same_kind_as(residual) if residual is not None else None
        forward, tame, norm_bound = self.forward, self.tame, self.norm_bound

        def step(x, *extras):
            residual = extras[0] if extras else None
            if (like(x) and (residual is None or like_residual(residual)) and len(extras) == (like_residual is not None)
                    and library.threads(model_threads()) == threads and largest <= budget_bytes()):
                norms = tame(x, residual)
                if norms is not None:
                    out = call(x, residual)
                    if blocked:
                        out.norm_bound = norm_bound(out_shape, *norms)
                    return out
            return forward(x, *extras)

        return step

    def output_bound(self) -> tuple[float, float]:
        """``linear_bound`` of the weight and bias, worked out on first use."""
        if self._output_bound is None:
            weight = self.native.weight_layouts.given[1]
            self._output_bound = linear_bound(np, weight, None if self.native.bias is None else self.native.bias[1])
        return self._output_bound

    def tame(self, x, residual) -> tuple[float, float] | None:
        """(a bound on the 2-norm of x, one on the residual's: 0 without one) when oneDNN's result on
        x (and the residual of a sum post-op) is IEEE 754's; None where it may not be.

        Not always where an input holds NaN or +-inf: its ReLU and clip post-ops are max/min
        instructions that turn NaN into 0, its GEMM kernels make NaN where PyTorch gives +-inf,
        and an output that overflows before a sum or a clip can lose a NaN the same way.  None of
        that happens when every output is finite, which one dot product per tensor bounds
        (special_values.py: 6 us per 100 K floats).  Blocked buffers' padding holds zeros.

        A tensor another oneDNN conv left in its layout may carry a bound on its norm
        (``Blocked.norm_bound``, set by ``norm_bound``): where the bounds alone show every output
        finite, nothing is read.  Reading each input cost MobileNetV2 0.6 of its 6.8 ms (batch 1,
        2 threads) and 5.9 of 80 ms (batch 8, 1 thread).  Where they do not, the norms are
        computed, so the path taken is the same as without bounds."""
        bound = self.output_bound()
        norms = (_known_norm(x), 0.0 if residual is None else _known_norm(residual))
        if None not in norms and finite_outputs(norms, bound):
            return norms
        norms = (norm_of(x), 0.0 if residual is None else norm_of(residual))
        return norms if finite_outputs(norms, bound) else None

    def norm_bound(self, out_shape, x_norm: float, residual_norm: float) -> float | None:
        """A bound on the 2-norm of this conv's output, for inputs whose norms are at most those given
        (and every output finite: ``tame``), or None where the post-ops' effect is not known.

        Two bounds, the smaller kept.  Each output before its post-ops is a dot product of one
        channel's kernel with a window of x, plus a bias: by Cauchy-Schwarz at most |x| |W| + max|b|,
        and a residual element at most the residual's norm; the post-ops then bound each element
        (conv_post_ops.bound_after), and the norm is at most the square root of the output's size
        times that.  And each element of x meets each weight once at most and lies in at most
        ``taps`` (kernel size) windows of a channel, so the result has a norm of at most
        sqrt(taps) |W| |x| plus the bias's, which the post-ops then bound as a whole.  After a clip
        (ReLU6) the first is the smaller; the second keeps long ReLU chains (ResNets) from growing a
        bound by the square root of the size per layer.  ``ROUNDING_ROOM`` covers float32 rounding,
        well under 1 % for sums of 10 K products."""
        return conv_norm_bound(self.native, out_shape, x_norm, residual_norm, self.output_bound())

    def bound_through(self, in_shapes, norms) -> float | None:
        """A bound on the output's norm for inputs of ``in_shapes`` whose norms are at most ``norms`` (x's, and a
        sum post-op's residual's), where the special-value guard passes for such inputs (``tame``); None where
        it may not, or the post-ops' effect is not known (a run of layers as one sequence: conv_sequence.py)."""
        x_norm, residual_norm = norms[0], (norms[1] if len(norms) > 1 else 0.0)
        if not finite_outputs((x_norm, residual_norm), self.output_bound()):
            return None
        return self.norm_bound(self.native.output_shape(in_shapes[0]), x_norm, residual_norm)

    def emit_call(self, builder, inputs, threads: int, blocked: bool, channels_last: bool = False):
        """Add this op's oneDNN call to a sequence (``Convolution.emit``): ``inputs`` are (value, layout or None
        for plain, shape) of x and a sum post-op's residual; (value, layout, shape) of the output, or None.
        ``channels_last``: a plain output is written channels-last (the sequence's last member's only)."""
        (value, layout, shape), residual = inputs[0], (inputs[1] if len(inputs) > 1 else (None, None, None))
        emitted = self.native.emit(builder, value, layout, shape, threads, residual[0], residual[1], blocked,
                                   channels_last)
        return None if emitted is None else (*emitted, self.native.output_shape(shape))

    @functools.cached_property
    def _shapes_by_input(self) -> dict:
        """(output shape, budget shapes) by input shape: worked out once per shape, not per call."""
        return {}

    def _shapes_for(self, in_shape) -> tuple:
        """(the output shape, the shapes the size budget is checked for, the bytes of the largest) of an
        input of ``in_shape``; (None, (), 0) where oneDNN does not take it: unbatched or empty (the
        reference takes those, and raises its shape errors), or giving an empty output."""
        if len(in_shape) != self.spatial + 2 or in_shape[0] == 0 or in_shape[1] != self.static_weight.in_channels:
            return None, (), 0
        out_shape = self.native.output_shape(in_shape)
        if min(out_shape[2:]) < 1:
            return None, (), 0
        budget_shapes = self.budget_shapes(in_shape, out_shape)
        return out_shape, budget_shapes, max(nbytes(shape, 4) for shape in budget_shapes)

    def budget_shapes(self, in_shape, out_shape) -> tuple[tuple[int, ...], ...]:
        """The shapes the size budget is checked for, in order, before a call makes its buffers."""
        raise NotImplementedError


def conv_norm_bound(native: onednn.Convolution, out_shape, x_norm: float, residual_norm: float,
                    bound: tuple[float, float]) -> float | None:
    """A bound on the 2-norm of ``native``'s output (its post-ops applied) for an input whose norm is at most
    ``x_norm`` and a weight and bias of ``linear_bound`` ``bound`` (OneDnnPath.norm_bound says why it holds, for
    plain and transposed convs alike); None where the post-ops' effect is not known."""
    weight_norm, bias_bound = bound
    steps, root_size = native.post_ops, math.sqrt(math.prod(out_shape))
    root_taps = math.sqrt(math.prod(native.kernel))  # at most how many windows of a channel an input element lies in
    each = conv_post_ops.bound_after(steps, x_norm * weight_norm + bias_bound, residual_norm)
    whole = conv_post_ops.bound_after(steps, root_taps * weight_norm * x_norm + bias_bound * root_size,
                                      residual_norm, unit=root_size)
    if each is None or whole is None:
        return None
    return ROUNDING_ROOM * min(each * root_size, whole)


def same_kind_as(sample):
    """A test that a value is like ``sample`` as ``Convolution.sequence_for`` needs: a Blocked tensor of its shape
    in its layout object, or a C-contiguous float32 array of its shape (a view of its shape and strides, for a
    sample that is one: a conv's input lying channels-last)."""
    shape = sample.shape
    if isinstance(sample, onednn.Blocked):
        layout = sample.layout
        return lambda value: value.__class__ is onednn.Blocked and value.layout is layout and value.shape == shape
    kind = sample.__class__
    if not sample.flags.c_contiguous:
        strides = sample.strides
        return lambda value: (value.__class__ is kind and value.shape == shape and value.dtype is FLOAT32
                              and value.strides == strides)
    return lambda value: (value.__class__ is kind and value.shape == shape and value.dtype is FLOAT32
                          and value.flags.c_contiguous)


FLOAT32 = np.dtype(np.float32)


def _known_norm(value) -> float | None:
    """The bound on a Blocked tensor's norm its producer gave, or None."""
    return value.norm_bound if isinstance(value, onednn.Blocked) else None


def norm_of(value) -> float:
    """The 2-norm of a plain array or a Blocked tensor's buffer: NaN or inf where it holds NaN or +-inf."""
    return math.sqrt(sum_of_squares(np, _buffer(value)))


def finite_outputs(norms: tuple[float, float], bound: tuple[float, float]) -> bool:
    """``outputs_tame``'s test on norms already known: every output finite, with room for rounding."""
    weight_norm, bias_bound = bound
    return norms[0] * weight_norm + bias_bound + norms[1] < FLOAT32_MAX / 2  # NaN compares False


def _plain_float32(value, rank: int) -> bool:
    return isinstance(value, np.ndarray) and value.dtype == np.float32 and value.ndim == rank


def _buffer(value) -> np.ndarray:
    """A plain array in its memory order, or a Blocked tensor's buffer: a norm of a transposed view then
    reads memory in one pass rather than gathering across it (PVT-v2's depthwise conv on a (1, 256, 56, 56)
    view of a (1, 3136, 256) array: 9.6 -> 1.3 ms for the whole conv step, 1 thread)."""
    return value.buffer if isinstance(value, onednn.Blocked) else onednn_primitives.memory_ordered(value)


def blocked_shape(shape) -> tuple[int, ...]:
    """``shape`` with its channels rounded up to oneDNN's widest block, as its blocked buffers hold them."""
    return (shape[0], -(-shape[1] // BLOCK_CHANNELS) * BLOCK_CHANNELS) + tuple(shape[2:])


class WeightInputPath(OneDnnPath):
    """The oneDNN path of a plain or transposed conv whose weight is an input (JAX passes weights as
    arguments): a (de)convolution made per weight shape, the call's weight reordered into it per call.
    The subclass says which weights fit an input (``_fits``), how its weight reads as oneDNN's
    (out, in/groups, *kernel) one (``_onednn_weight``) and makes the primitive (``_native_for_weight``)."""

    def forward(self, *inputs):
        if self.static_weight is None:
            out = self._weight_input_forward(inputs)
            if out is not None:
                return out
        return super().forward(*inputs)

    def _weight_input_forward(self, inputs):
        """The op on oneDNN, the weight reordered per call; None where that does not apply (the reference
        takes those, and raises its errors).

        On a 64-channel 3x3 net from JAX, im2col in NumPy took 1.5x (1 thread) to 3.2x (2 threads) the
        same program with constant weights; this path 1.16x (1 thread).  A Flax U-Net's three 2x2/2
        transposed convs took 0.26-0.34 ms each in the reference's GEMM and pass per tap."""
        library = onednn.library()
        x, weight = inputs[self.input_pos], inputs[self.weight_pos]
        bias = None if self.bias_pos is None else inputs[self.bias_pos]
        rank = self.spatial + 2
        blocked_in = isinstance(x, onednn.Blocked)
        if (library is None or self.padding_mode != "zeros" or not (blocked_in or _plain_float32(x, rank))
                or not _plain_float32(weight, rank) or x.shape[0] == 0 or len(x.shape) != rank
                or not self._fits(x.shape, weight.shape)):
            return None
        native_weight = self._onednn_weight(weight)
        if bias is not None and not (_plain_float32(bias, 1) and bias.shape[0] == native_weight.shape[0]):
            return None
        if len(self._natives_by_weight) >= MAX_SHAPES:
            self._natives_by_weight.clear()
        native = self.cached(self._natives_by_weight, native_weight.shape, self._native_for_weight, library,
                             native_weight.shape)
        out_shape = native.output_shape(x.shape)
        if min(out_shape[2:]) < 1:
            return None
        check_size(max(self._weight_input_budget(x.shape, native), blocked_shape(out_shape), key=math.prod), 4,
                   self.node.describe())
        # NaN, +-inf or sums that could overflow go to the reference, which follows IEEE 754.  Read in
        # memory order (a transposed view would be copied) and in float32: a weight whose squares
        # overflow float32 only costs the slower path.  Each output sums products of distinct input and
        # weight elements, plain or transposed, so |x| |w| + max|b| bounds it.
        bound = (math.sqrt(sum_of_squares(np, onednn_primitives.memory_ordered(weight))),
                 0.0 if bias is None else float(np.max(np.abs(bias), initial=0.0)))
        x_norm = _known_norm(x)  # a Blocked input's producer may have bounded its norm: then nothing is read
        if x_norm is None or not finite_outputs((x_norm, 0.0), bound):
            x_norm = norm_of(x)
            if not finite_outputs((x_norm, 0.0), bound):
                return None
        blocked = self.output_layout == NATIVE_LAYOUT
        try:
            # The call's bias goes in as oneDNN's bias argument: added in the kernel as it stores each
            # output, not in a pass of its own over the output (a Flax CNN's 8 x 32 x 28 x 28: 45 us).
            out = native(x, model_threads(), weight=native_weight, bias=bias, blocked=blocked,
                         channels_last=self.output_layout == CHANNELS_LAST)
        except onednn.OneDnnError:
            return None
        if blocked:  # its readers' guards (the next conv's, a max pool's) then read nothing
            out.norm_bound = conv_norm_bound(native, out.shape, x_norm, 0.0, bound)
        # A one-input epilogue (numba_kernels/conv.py) ran as the call's post-ops, or runs after it here.
        return out if self._weight_input_post_ops() is not None else self.run_epilogue(out, ())

    def specialized(self, inputs):
        """For an op whose weight is an input: ``_weight_input_forward`` for inputs like ``inputs`` as one sequence
        that reorders the call's weight itself (``Convolution.weight_input_sequence_for``), behind the guards that
        forward runs per call (the size budget, the bound that shows every output finite).  x of another class,
        shape or layout, a weight of other strides, another thread count: ``forward``."""
        if self.static_weight is not None:
            return super().specialized(inputs)
        if self._weight_input_post_ops() is None or len(inputs) != 2 + (self.bias_pos is not None):
            return None  # an epilogue that runs after the conv: forward
        x, weight = inputs[self.input_pos], inputs[self.weight_pos]
        bias = None if self.bias_pos is None else inputs[self.bias_pos]
        if not _plain_float32(weight, self.spatial + 2) or (bias is not None and not _plain_float32(bias, 1)):
            return None
        native_weight = self._onednn_weight(weight)
        native = self._natives_by_weight.get(native_weight.shape)
        if native is None or not (isinstance(x, onednn.Blocked) or _plain_float32(x, self.spatial + 2)):
            return None
        if bias is not None and not (bias.flags.c_contiguous and bias.shape[0] == native_weight.shape[0]):
            return None
        library = native.library
        threads = library.threads(model_threads())
        weight_layout, _ = native.weight_memory(native_weight)
        blocked = self.output_layout == NATIVE_LAYOUT
        call = native.weight_input_sequence_for(x, weight_layout, bias is not None, threads, blocked,
                                                self.output_layout == CHANNELS_LAST)
        if call is None:
            return None
        out_shape = native.output_shape(x.shape)
        largest = 4 * math.prod(max(self._weight_input_budget(x.shape, native), blocked_shape(out_shape),
                                    key=math.prod))
        like, weight_strides, weight_shape = same_kind_as(x), weight.strides, weight.shape
        order = onednn_primitives.dense_order(native_weight)
        input_pos, weight_pos, bias_pos, forward = self.input_pos, self.weight_pos, self.bias_pos, self.forward

        def step(*values):
            x, weight = values[input_pos], values[weight_pos]
            bias = None if bias_pos is None else values[bias_pos]
            if (like(x) and weight.__class__ is np.ndarray and weight.dtype is FLOAT32 and weight.shape == weight_shape
                    and weight.strides == weight_strides and library.threads(model_threads()) == threads
                    and (bias is None or (bias.__class__ is np.ndarray and bias.dtype is FLOAT32
                                          and bias.shape == (out_shape[1],) and bias.flags.c_contiguous))
                    and largest <= budget_bytes()):
                native_weight = self._onednn_weight(weight)
                memory = native_weight.transpose(order)  # the weight's memory, row-major (in_strides')
                bound = (math.sqrt(sum_of_squares(np, memory)),
                         0.0 if bias is None else float(np.max(np.abs(bias), initial=0.0)))
                x_norm = _known_norm(x)
                if x_norm is None or not finite_outputs((x_norm, 0.0), bound):
                    x_norm = norm_of(x)
                if finite_outputs((x_norm, 0.0), bound):
                    out = call(x, memory) if bias is None else call(x, memory, bias)
                    if blocked:
                        out.norm_bound = conv_norm_bound(native, out_shape, x_norm, 0.0, bound)
                    return out
            return forward(*values)

        return step

    def _fits(self, x_shape, weight_shape) -> bool:
        """Whether an input of ``x_shape`` and a weight of ``weight_shape`` (the op's own layout) fit."""
        raise NotImplementedError

    def _onednn_weight(self, weight: np.ndarray) -> np.ndarray:
        """The call's weight as oneDNN's (out, in/groups, *kernel) weight: a view, or a copy where none is."""
        return weight

    def _native_for_weight(self, library, weight_shape) -> onednn.Convolution:
        """The oneDNN (de)convolution for oneDNN weights of ``weight_shape``, made on the first call that
        brings one, with zeros (and a bias of zeros where the op reads a bias input): every call passes its
        own."""
        raise NotImplementedError

    def _weight_input_budget(self, in_shape, native) -> tuple[int, ...]:
        """The largest buffer the call makes besides its output (a padded input, channels blocked)."""
        return blocked_shape(tuple(in_shape[:2]) + tuple(size + sum(p) for size, p in zip(in_shape[2:], native.pads)))

    def _weight_input_post_ops(self) -> tuple | None:
        """oneDNN's post-op steps for this op's epilogue (() without one), or None where it has none for it;
        worked out once (matching the math against the known steps compares IR trees)."""
        return self._weight_input_steps[0]

    @functools.cached_property
    def _weight_input_steps(self) -> tuple:
        return (() if self.epilogue is None
                else conv_post_ops.post_ops_for(self.epilogue, getattr(self, "epilogue_operand", 0)),)

    def _weight_input_usable(self) -> bool:
        return onednn.available() and self.padding_mode == "zeros" and self._weight_input_post_ops() is not None

    def native_layout(self) -> str | None:
        """An op whose weight is an input may hand its output on in oneDNN's blocked layout too (to a pool
        after it: a Flax CNN's conv -> ReLU -> max pool), unless its epilogue runs after it on a plain array."""
        if self.static_weight is None:
            return NATIVE_LAYOUT if self._weight_input_usable() else None
        return super().native_layout()

    def takes_layout(self, position: int, layout: str) -> bool:
        """An op whose weight is an input takes its x in oneDNN's blocked layout (a Flax U-Net's conv after
        conv: a reorder to plain and one back saved per pair)."""
        if self.static_weight is None:
            return layout == NATIVE_LAYOUT and position == self.input_pos and self._weight_input_usable()
        return super().takes_layout(position, layout)

    def writes_channels_last(self) -> bool:
        """An op whose weight is an input writes channels-last where its oneDNN path runs its epilogue as
        post-ops (``native_layout``'s conditions)."""
        if self.static_weight is None:
            return self.native_layout() == NATIVE_LAYOUT
        return super().writes_channels_last()

    def weight_input_note(self) -> str:
        """``kernel_note`` for an op whose weight is an input."""
        if onednn.library() is None or self.padding_mode != "zeros":
            return "reference path: the weight is an input"
        return "oneDNN, the weight input reordered per call (float32; else the reference path)"

    @functools.cached_property
    def _natives_by_weight(self) -> dict:
        return {}


class OneDnnConv(WeightInputPath):
    """The oneDNN path of a convolution op (mixed in before the op class)."""

    def _fits(self, x_shape, weight_shape) -> bool:
        return x_shape[1] == weight_shape[1] * self.groups and weight_shape[0] % self.groups == 0

    def _native_for_weight(self, library, weight_shape) -> onednn.Convolution:
        bias = None if self.bias_pos is None else np.zeros(weight_shape[0], np.float32)
        return onednn.Convolution(library, np.zeros(weight_shape, np.float32), bias, self.stride, self.dilation,
                                  self.pads_for(tuple(weight_shape[2:])), self.groups,
                                  self._weight_input_post_ops() or ())

    def use_onednn(self) -> bool:
        """Run on oneDNN from now on if it is installed and takes this conv; whether it does.

        The epilogue runs as post-ops where oneDNN has them for all of it, else after the conv,
        compiled, over its plain output: a GRU's gates (``sigmoid(c) * h``, ``(1 - z) * h + z *
        tanh(c)``) and a residual add over another conv's activation.  On RAFT's ConvGRU (242 to
        96 channels, 3x3 on 16x16) oneDNN's conv is twice as fast as the compiled ones that ran
        those epilogues on each output plane, and the extra pass costs a few percent of it.  Where
        the class's own path fuses such an epilogue better (``fuses_epilogue_elsewhere``), that
        path keeps the conv.
        """
        weight = self.static_weight
        library = onednn.library()
        if library is None or weight is None or self.padding_mode != "zeros" or weight.matrix.dtype != np.float32:
            return False
        post_ops = conv_post_ops.post_ops_for(self.epilogue, getattr(self, "epilogue_operand", 0))
        if post_ops is None and self.fuses_epilogue_elsewhere():
            return False
        self.epilogue_after = post_ops is None
        raw = np.reshape(weight.matrix, (weight.out_channels, weight.in_channels // self.groups) + weight.kernel)
        self.native = onednn.Convolution(library, raw, self.static_bias_vector, self.stride, self.dilation,
                                         self.static_pads, self.groups, post_ops or ())
        return True

    def hand_over_weights(self) -> dict:
        """The node's weight, to oneDNN (``onednn.WeightLayouts``), which drops the given array once it has
        its own layout; the op's matrix then comes from there for the paths that read it as given (inputs
        with NaN, other dtypes)."""
        weight = self.static_weight
        if self.native is None or weight is None or "weight" not in self.node.attrs:
            return {}
        layouts = self.native.weight_layouts
        layouts.let_go_when_kept = True
        matrix_shape = weight.matrix.shape

        def remake_matrix():
            return np.reshape(layouts.given[1], matrix_shape)

        weight.remade_from(remake_matrix)
        return {"weight": lambda: layouts.given[1]}

    def fuses_epilogue_elsewhere(self) -> bool:
        """Whether another path of the class runs an epilogue oneDNN has no post-ops for better than
        oneDNN and a pass after it: the compiled depthwise and pointwise convs, which are memory-bound
        and run it on each output plane while it is in cache (in-process A/Bs: RepViT 1.08x slower
        with them on oneDNN, EfficientNet-B0 1.03x)."""
        return False

    def budget_shapes(self, in_shape, out_shape) -> tuple[tuple[int, ...], ...]:
        """The larger of the padded input (what the reference makes) and the output, channels rounded
        up as oneDNN's blocked buffers hold them: both fit if it does, so one check (each costs 4-5 us,
        a tenth of a small conv's call)."""
        padded = tuple(in_shape[:2]) + tuple(size + sum(p) for size, p in zip(in_shape[2:], self.static_pads))
        return (max(blocked_shape(padded), blocked_shape(out_shape), key=math.prod),)


class OneDnnOrReference(OneDnnConv):
    """A conv on oneDNN where it applies, else the reference op (mixed in before the op class)."""

    @classmethod
    def takes_epilogue(cls, node) -> bool:
        """The fusion pass may give an nn.* conv (constant weight, one input) its elementwise reader:
        oneDNN runs it as post-ops, the reference after the conv (kuiper/ops/epilogue.py).  In
        small 1-D nets (M5 audio) a separate ReLU per conv was a fifth of the call."""
        return "weight" in node.attrs and len(node.inputs) == 1

    def setup(self):
        super().setup()
        if self.static_weight is None:
            self.kernel_note = self.weight_input_note()
        else:
            self.kernel_note = ("oneDNN (its layout and kernel chosen per input shape)" if self.use_onednn()
                                else "reference path (im2col + one BLAS GEMM)")
        if self.epilogue_after:
            self.kernel_note += "; epilogue after the oneDNN conv (no post-ops for it)"


class NativeConv1d(OneDnnOrReference, reference.Conv1d):
    """nn.Conv1d."""


class NativeConv3d(OneDnnOrReference, reference.Conv3d):
    """nn.Conv3d."""


KERNELS = [NativeConv1d, NativeConv3d]
