"""The oneDNN sequence provider: a run of oneDNN layers, each reading the ones before it, as one flat loop
of primitive calls over buffers planned once (kuiper/onednn/sequence.py).

Op by op, each convolution of MobileNetV2 at batch 1 spent 15-20 us of Python around its oneDNN call
in a model (its guards, its argument pointing, a fresh output), 0.6 of the model's ~5 ms where ONNX
Runtime's whole overhead is ~0.1.  This provider claims each run of two or more oneDNN convolutions
(constant weights, post-ops only), pointwise-depthwise pairs, poolings and channel concatenations with one input from
outside, whose values other than the last are read only inside the run.  From its second call the
run re-points its input and its fresh output and executes its primitives one after another, the
activations between them in buffers reused call after call (a residual sum writes over the residual
where nothing reads it later).  A member says how it joins: ``emit_call`` adds its primitives,
``bound_through`` carries a bound on the norm through it.

Each convolution's own path guards it against special values (conv_native.py, ``tame``): oneDNN's
result is IEEE 754's only where every output is finite, which bounds on the norms show.  The bounds
grow with the input's norm through every layer, so the whole run's guards pass for inputs whose norm
is at most one threshold, found once by bisection (``_threshold``).  A call reads the input's norm
(or the bound its producer gave), compares, and runs the sequence; any other input (a larger norm,
NaN, another shape or layout, another thread count) runs the members op by op
(``Partition.run_members``), which decide layer by layer exactly as without the provider.  Where a
member's call is not one a sequence runs (no plan for it), the run stays op by op.
"""

from __future__ import annotations

import math

import numpy as np

from .. import onednn
from ..graph.providers import Partition, Provider
from ..limits import budget_bytes
from ..onednn.blocked import channels_last_view
from ..ops.base import CHANNELS_LAST
from ..ops.special_values import FLOAT32_MAX
from ..thread_limits import requested as model_threads
from .conv_depthwise_pair import PointwiseDepthwise
from .concat_native import NativeConcat
from .conv_native import NATIVE_LAYOUT, OneDnnPath, blocked_shape, norm_of, same_kind_as
from .pool_native import NativeAdaptiveAvgPool2d, OneDnnPooling

# Halvings of the interval (on a log scale) the threshold lies in: from a factor of 1e4 to one of 1 + 6e-7.
# Each takes every member's bound (~5 us a member), on the first call: 60 of them cost MobileNetV2's first
# call 10-13 ms.  A threshold a little under the exact one only sends such inputs op by op.
BISECTION_STEPS = 24
MAX_KINDS = 4  # input kinds (batch sizes, layouts) beside the first call's that get a sequence of their own


def _member(unit) -> bool:
    """Whether a unit joins a sequence: a oneDNN conv with a constant weight and post-ops only, a
    pointwise-depthwise pair, a pooling or a global average on oneDNN, a channel concatenation on oneDNN."""
    op = unit.op
    if len(unit.node.outputs) != 1:
        return False
    if isinstance(op, PointwiseDepthwise):
        return len(unit.node.inputs) == 1
    if isinstance(op, OneDnnPooling):  # a max pool between convs (ResNet's stem, YOLO's SPPF), in their layout
        return op.native is not None and len(unit.node.inputs) == 1
    if isinstance(op, NativeConcat):  # joined branches (YOLO's C3 blocks)
        return op.native is not None
    if isinstance(op, NativeAdaptiveAvgPool2d):  # a classifier's global average of the last conv's maps
        return op.global_average and len(unit.node.inputs) == 1
    return (isinstance(op, OneDnnPath) and op.native is not None and not op.epilogue_after
            and getattr(op, "static_weight", None) is not None
            and len(unit.node.inputs) == 1 + op.native.adds_residual)


def runs(units, uses) -> list[tuple[int, int]]:
    """(start, stop) of each run of two or more members with one input from outside (the first member's,
    which later members may read too: a residual block's input), whose values other than the last one's
    are read only inside the run."""
    found, start = [], 0
    while start < len(units):
        stop = start
        if _member(units[start]) and len(units[start].node.inputs) == 1:  # not a residual from outside
            made = {units[start].node.inputs[0]}  # the run's input, and what its members make
            while stop < len(units) and _member(units[stop]) and all(o in made for o in units[stop].node.inputs):
                made.add(units[stop].node.outputs[0])
                stop += 1
        end = _longest_closed(units, start, stop, uses)
        if end - start >= 2:
            found.append((start, end))
            start = end
        else:
            start += 1
    return found


def _longest_closed(units, start: int, stop: int, uses) -> int:
    """The largest end <= stop such that units[start:end]'s values, but the last, are read only inside."""
    for end in range(stop, start + 1, -1):
        inside: dict[str, int] = {}
        for unit in units[start:end]:
            for operand in unit.node.inputs:
                inside[operand] = inside.get(operand, 0) + 1
        if all(uses.get(unit.node.outputs[0], 0) == inside.get(unit.node.outputs[0], 0)
               for unit in units[start:end - 1]):
            return end
    return start


class OneDnnSequence(Partition):
    """A run of oneDNN layers as one Sequence per input kind (made from the call after the one that made the
    members' plans)."""

    def setup(self):
        self.ops = [unit.op for unit in self.members]
        readers: dict[str, list] = {}
        for unit in self.members:
            for position, operand in enumerate(unit.node.inputs):
                readers.setdefault(operand, []).append((unit.op, position))
        # The layouts between members, as native_layouts.py decides them between steps (it sees only the
        # partition): blocked where every reader inside takes oneDNN's layout.
        for unit in self.members[:-1]:
            operand = unit.node.outputs[0]
            takes = all(op.takes_layout(position, NATIVE_LAYOUT) for op, position in readers.get(operand, []))
            unit.op.output_layout = NATIVE_LAYOUT if takes and unit.op.native_layout() == NATIVE_LAYOUT else None
        self.kernel_note = (f"oneDNN: {len(self.members)} layers as one sequence of primitive calls "
                            f"({self.members[0].node.name}..{self.members[-1].node.name})")

    # The partition's output is its last member's: the layout the graph agrees on for it is that member's.
    @property
    def output_layout(self):
        return self.ops[-1].output_layout if hasattr(self, "ops") else None

    @output_layout.setter
    def output_layout(self, layout):
        if hasattr(self, "ops"):
            self.ops[-1].output_layout = layout

    def native_layout(self) -> str | None:
        return self.ops[-1].native_layout()

    def writes_channels_last(self) -> bool:
        """As its last member: the sequence's output is that member's (LeViT's stem of four convs, then
        flatten and transpose to tokens)."""
        return self.ops[-1].writes_channels_last()

    def takes_layout(self, position: int, layout: str) -> bool:
        return position == 0 and self.ops[0].takes_layout(0, layout)

    def specialized(self, inputs):
        """The run as one Sequence for inputs like ``inputs``, behind one guard for all its members' (see the
        module's doc); None where a member's call is not one a sequence runs.  Inputs of another kind (a
        batch of another size, the last chunk of a stream) get a sequence of their own on their second
        call, up to ``MAX_KINDS`` kinds; others run op by op."""
        if len(inputs) != 1:
            return None
        self._kinds = {}  # input kind -> the step that runs it (made anew with each specialization)
        return self._sequence_step(inputs[0], self._other_kind)

    def _other_kind(self, x):
        """A call whose input is not of the kind the first call's sequence was made for: its own kind's step,
        made on that kind's second call (the first makes the members' plans), or the members op by op."""
        key = _kind(x)
        step = self._kinds.get(key)
        if step is not None:
            return step(x)
        out = self.run_members(x)
        if len(self._kinds) < MAX_KINDS:
            # Its fallback runs the members: an input this step's guard refuses although its kind's key matched
            # (a dtype equal to float32's but another object, as unpickled arrays on a Dask worker carry; a
            # strided view of other strides) must not come back here, where it found this step again.
            self._kinds[key] = self._sequence_step(x, self.run_members) or self.run_members
        return out

    def _sequence_step(self, x, other_kind):
        """The step running the run as one Sequence on inputs like ``x``, ``other_kind`` for any other input;
        None where it cannot."""
        if not (isinstance(x, onednn.Blocked) or _plain_float32(x)):
            return None
        library = onednn.library()
        threads = library.threads(model_threads())
        builder = onednn.SequenceBuilder(library)
        first = builder.input()
        values = {self.node.inputs[0]: (first, x.layout if isinstance(x, onednn.Blocked) else None, tuple(x.shape))}
        shapes, largest = [], 0
        for unit in self.members:
            inputs = [values[operand] for operand in unit.node.inputs]
            if unit.op.output_layout == CHANNELS_LAST:  # (the last member's, where the graph said so)
                emitted = unit.op.emit_call(builder, inputs, threads, False, channels_last=True)
            else:
                emitted = unit.op.emit_call(builder, inputs, threads, unit.op.output_layout == NATIVE_LAYOUT)
            if emitted is None:
                return None
            largest = max(largest, 4 * math.prod(blocked_shape(emitted[2])))
            shapes.append([shape for _, _, shape in inputs])
            values[unit.node.outputs[0]] = emitted
        out, out_layout, out_shape = values[self.node.outputs[0]]
        threshold = _threshold(self.members, shapes)
        if threshold is None:
            return None
        sequence = builder.build([out])
        blocked_out = self.output_layout == NATIVE_LAYOUT
        view = channels_last_view(out_shape) if self.output_layout == CHANNELS_LAST else None
        blocked_in = isinstance(x, onednn.Blocked)
        like, run_members = same_kind_as(x), self.run_members

        def step(x):
            if not (like(x) and library.threads(model_threads()) == threads):
                return other_kind(x)
            if largest <= budget_bytes():
                norm = x.norm_bound if blocked_in else None
                if norm is None or not norm <= threshold:
                    norm = norm_of(x)
                if norm <= threshold:  # NaN compares False
                    (flat,) = sequence(x.buffer if blocked_in else x)
                    if blocked_out:
                        return onednn.Blocked(library, out_shape, out_layout, flat)
                    return flat.reshape(out_shape) if view is None else view(flat)
            return run_members(x)

        step.threshold = threshold  # the input norm under which the sequence runs (for tests, profiles)
        return step


def _kind(value) -> tuple:
    """What a sequence's guard tells apart (``same_kind_as``, the granted threads): a key per kind of input."""
    threads = onednn.library().threads(model_threads())
    if isinstance(value, onednn.Blocked):
        return (onednn.Blocked, value.shape, id(value.layout), threads)
    flags = getattr(value, "flags", None)
    return (type(value), getattr(value, "shape", None), getattr(value, "dtype", None),
            flags is not None and flags.c_contiguous, threads)


def _plain_float32(value) -> bool:
    return isinstance(value, np.ndarray) and value.dtype == np.float32 and value.flags.c_contiguous


def _threshold(members, shapes) -> float | None:
    """The largest input norm for which every member's guard passes, with bounds carried from layer to
    layer as each member's own path carries them (``bound_through``); None where even a tiny input's
    do not pass, or a bound is not known (a post-op whose effect on it is not)."""

    def passes(norm: float) -> bool:
        bounds = {members[0].node.inputs[0]: norm}
        for unit, in_shapes in zip(members, shapes):
            bound = unit.op.bound_through(in_shapes, [bounds[operand] for operand in unit.node.inputs])
            if bound is None:
                return False
            bounds[unit.node.outputs[0]] = bound
        return True

    low, high = 1e-30, 1.0
    if not passes(low):
        return None
    while passes(high):
        if high > FLOAT32_MAX:
            return FLOAT32_MAX  # (zero weights) any finite norm; an infinite one still fails the test
        low, high = high, high * 1e4
    for _ in range(BISECTION_STEPS):  # each bound grows with the input's norm: passes(low), not passes(high)
        middle = math.sqrt(low * high)
        low, high = (middle, high) if passes(middle) else (low, middle)
    return low


class OneDnnSequenceProvider(Provider):
    name = "onednn-sequence"
    takes_partitions = True  # the pointwise-depthwise pairs join a run as its members

    def claim(self, units, context):
        return runs(units, context.uses)

    def compile(self, members, inputs, outputs, target, node):
        return OneDnnSequence(node, target.backend, members)
