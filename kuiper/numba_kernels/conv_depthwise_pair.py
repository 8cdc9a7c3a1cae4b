"""The pointwise-depthwise provider: a 1x1 convolution and the 3x3 depthwise convolution that alone reads
it (MobileNet's expansion, then its depthwise conv) as one oneDNN primitive.

oneDNN runs a depthwise convolution as a post-op of a 1x1 one (``("depthwise", 3, stride, 1)``,
kuiper/onednn/conv.py): the expanded tensor, six times the block's width in MobileNetV2, is never
written out whole and read back.  Batch 8, 1 thread, oneDNN 3.2 on nChw16c: the 16 -> 96 channel
pair on 112 x 112 takes 4.4 ms fused against 6.5 ms as two primitives, 24 -> 144 on 56 x 56 3.6
against 4.5; on 14 x 14 and 7 x 7 maps it runs the two kernels back to back (its
``ref_fused_convolution``), at about the pair's time, still one call where there were two.

The provider claims each such pair of oneDNN convolutions (activations as post-ops, no residual sum);
the partition runs them fused where the special-value guard allows (every output of both convs
finite, as each conv's own guard requires: conv_native.py) and op by op otherwise
(``Partition.run_members``), exactly as without the provider.
"""

from __future__ import annotations

import numpy as np

from .. import onednn
from ..graph.providers import Partition, Provider
from ..limits import budget_bytes, check_size, nbytes
from ..thread_limits import requested as model_threads
from .conv_native import NATIVE_LAYOUT, OneDnnPath, blocked_shape, same_kind_as, finite_outputs

DEPTHWISE_KERNEL = 3
DEPTHWISE_STRIDES = (1, 2)  # what oneDNN 3.2's depthwise post-op takes, with a padding of 1 on each side


def _eltwise_only(op) -> bool:
    """Whether an op's post-ops are activations alone (no residual sum, no fused conv of its own)."""
    return all(step[0].startswith("eltwise_") for step in op.native.post_ops)


def _on_onednn(unit) -> bool:
    op = unit.op
    return (isinstance(op, OneDnnPath) and op.native is not None and not op.epilogue_after
            and op.native.output_padding is None and getattr(op, "spatial", 2) == 2 and len(op.native.kernel) == 2
            and op.static_weight is not None and _eltwise_only(op) and len(unit.node.inputs) == 1
            and len(unit.node.outputs) == 1)


def _pointwise(op) -> bool:
    native = op.native
    return (native.kernel == (1, 1) and native.stride == (1, 1) and native.groups == 1
            and native.pads == ((0, 0), (0, 0)))


def _depthwise(op, channels: int) -> bool:
    native = op.native
    stride = native.stride[0]
    return (native.kernel == (DEPTHWISE_KERNEL,) * 2 and native.groups == channels == native.in_channels
            == native.out_channels and native.stride == (stride, stride) and stride in DEPTHWISE_STRIDES
            and native.dilation == (1, 1) and native.pads == ((1, 1), (1, 1)))


def pairs(units, uses) -> list[tuple[int, int]]:
    """(start, stop) of each 1x1 conv followed by the depthwise conv that alone reads its output."""
    found, index = [], 0
    while index + 1 < len(units):
        first, second = units[index], units[index + 1]
        if (_on_onednn(first) and _on_onednn(second) and _pointwise(first.op)
                and _depthwise(second.op, first.op.native.out_channels)
                and second.node.inputs[0] == first.node.outputs[0] and uses.get(first.node.outputs[0], 0) == 1):
            found.append((index, index + 2))
            index += 2
        else:
            index += 1
    return found


class PointwiseDepthwise(Partition):
    """A 1x1 conv and its depthwise reader as one oneDNN primitive."""

    def setup(self):
        self.pointwise, self.depthwise = (unit.op for unit in self.members)
        first, second = self.pointwise.native, self.depthwise.native
        dw_weight = second.weight_layouts.given[1]
        dw_weight = dw_weight.reshape((first.out_channels, 1) + dw_weight.shape[-2:])
        steps = first.post_ops + (("depthwise", DEPTHWISE_KERNEL, second.stride[0], 1),) + second.post_ops
        self.native = onednn.Convolution(first.library, first.weight_layouts, None if first.bias is None
                                         else first.bias[1], first.stride, first.dilation, first.pads, 1, steps,
                                         depthwise=(dw_weight, None if second.bias is None else second.bias[1]))
        self._shapes: dict = {}  # input shape -> (output shape, the pointwise conv's output shape, budget bytes)
        self.kernel_note = (f"oneDNN: the 1x1 conv with the depthwise conv as its post-op "
                            f"({', '.join(unit.node.name for unit in self.members)})")

    def native_layout(self) -> str | None:
        return NATIVE_LAYOUT

    def takes_layout(self, position: int, layout: str) -> bool:
        return position == 0 and layout == NATIVE_LAYOUT

    def forward(self, x):
        if not isinstance(x, onednn.Blocked) and not (isinstance(x, np.ndarray) and x.dtype == np.float32):
            return self.run_members(x)
        shapes = self._shapes.get(x.shape)
        if shapes is None:
            shapes = self._shapes_for(x.shape)
        if shapes is None:
            return self.run_members(x)  # the ops take what oneDNN does not, and raise their errors
        out_shape, inner_shape, largest = shapes
        if largest > budget_bytes():
            check_size(blocked_shape(inner_shape), 4, self.node.describe())
            check_size(blocked_shape(out_shape), 4, self.node.describe())
        # Each conv's guard in turn: the pointwise conv's on x, the depthwise conv's on a bound of its input.
        norms = self.pointwise.tame(x, None)
        if norms is None:
            return self.run_members(x)
        inner_bound = self.pointwise.norm_bound(inner_shape, *norms)
        if inner_bound is None or not finite_outputs((inner_bound, 0.0), self.depthwise.output_bound()):
            return self.run_members(x)
        blocked = self.output_layout == NATIVE_LAYOUT
        try:
            out = self.native(x, model_threads(), blocked=blocked)
        except onednn.OneDnnError:
            return self.run_members(x)  # refused once: it remembers
        if blocked:
            out.norm_bound = self.depthwise.norm_bound(out_shape, inner_bound, 0.0)
        return out

    def specialized(self, inputs):
        """The fused call as one sequence for inputs like ``inputs`` (``Convolution.sequence_for``), behind
        ``forward``'s budget and special-value guards; anything else takes ``forward``."""
        x = inputs[0]
        shapes = self._shapes.get(getattr(x, "shape", None))
        if shapes is None or len(inputs) != 1:
            return None
        out_shape, inner_shape, largest = shapes
        library = self.native.library
        threads = library.threads(model_threads())  # what this call gets: 1 in a child forked after OpenMP ran
        blocked = self.output_layout == NATIVE_LAYOUT
        call = self.native.sequence_for(x, threads, None, blocked)
        if call is None:
            return None
        like, forward, pointwise, depthwise = same_kind_as(x), self.forward, self.pointwise, self.depthwise
        depthwise_bound = depthwise.output_bound()

        def step(x):
            if like(x) and library.threads(model_threads()) == threads and largest <= budget_bytes():
                norms = pointwise.tame(x, None)
                inner_bound = None if norms is None else pointwise.norm_bound(inner_shape, *norms)
                if inner_bound is not None and finite_outputs((inner_bound, 0.0), depthwise_bound):
                    out = call(x)
                    if blocked:
                        out.norm_bound = depthwise.norm_bound(out_shape, inner_bound, 0.0)
                    return out
            return forward(x)

        return step

    def bound_through(self, in_shapes, norms) -> float | None:
        """``OneDnnPath.bound_through`` of the two convs in turn: the depthwise conv's output bound, where both
        guards pass."""
        inner = self.pointwise.bound_through(in_shapes, norms)
        return None if inner is None else self.depthwise.bound_through([self.native._own_output_shape(in_shapes[0])],
                                                                       [inner])

    def emit_call(self, builder, inputs, threads: int, blocked: bool):
        """``OneDnnPath.emit_call`` of the fused primitive."""
        value, layout, shape = inputs[0]
        emitted = self.native.emit(builder, value, layout, shape, threads, blocked=blocked)
        return None if emitted is None else (*emitted, self.native.output_shape(shape))

    def _shapes_for(self, shape):
        """(output shape, the 1x1 conv's output shape, the bytes of the larger) for a batch of images of
        ``shape``; None where oneDNN is not asked (not a batch of images of the channels the 1x1 takes)."""
        if len(shape) != 4 or shape[0] == 0 or shape[1] != self.native.in_channels:
            return None
        inner_shape = self.native._own_output_shape(shape)
        out_shape = self.native.output_shape(shape)
        if min(out_shape[2:]) < 1:
            return None
        largest = max(nbytes(blocked_shape(inner_shape), 4), nbytes(blocked_shape(out_shape), 4))
        if len(self._shapes) >= 64:
            self._shapes.clear()
        self._shapes[shape] = found = (out_shape, inner_shape, largest)
        return found


class PointwiseDepthwiseProvider(Provider):
    name = "onednn-pointwise-depthwise"

    def claim(self, units, context):
        return pairs(units, context.uses)

    def compile(self, members, inputs, outputs, target, node):
        return PointwiseDepthwise(node, target.backend, members)
