"""A per-channel vector added after a convolution whose weight is an input becomes the convolution's bias input.

JAX passes every weight as an argument, and XLA writes a convolution's bias as its own add:
``add(transpose(conv(x, w)), broadcast(b))``, the conv computing NCHW, the transpose giving the
program's NHWC, the broadcast laying the (C,) bias along the channel axis.  That add read a
transposed view and a broadcast one (1.3 ns an element: 0.26 ms of a Flax CNN's 1.5 on an
8 x 28 x 28 x 32 activation), and it kept the ReLU after it in a fused step of its own.  Here it
becomes the conv's third input, ``conv(x, w, b)``, which the conv adds to its own NCHW output in
one contiguous pass (the same float32 sums), and the transpose gives the add's result.

Only a float32 ``add`` of the conv's result (directly or through one Transpose) and a Broadcast of
a 1-D operand of the conv's output channels along the channel axis (or of that vector reshaped with
dims of 1 around it, as JAX writes a (1, C) bias) is rewritten; the conv must take
no bias yet, read its inputs by position, and its result (and the transpose's) have no other reader
and not be a model output.  Constant weights and biases are constant_fold.py's: this reads only the
op set (kuiper.ops.conv's ConvNd, Transpose, Broadcast and elementwise math), never a frontend.
"""

from __future__ import annotations

import dataclasses

from ..model_ir import OperandInfo, OpNode
from ..ops.conv import ConvNd
from ..plugins import op_registry
from .constant_fold import is_float32_binary
from .fusion import elementwise_maths, producers_and_readers
from .target import Target

TRANSPOSE, BROADCAST, RESHAPE = "Transpose", "Broadcast", "Reshape"
CHANNEL_AXIS = 1  # a conv's output is (N, C, *spatial)


def fold_bias_inputs_into_convs(order: list[OpNode], operands: dict[str, OperandInfo], model_outputs: list[str],
                                target: Target) -> list[OpNode]:
    """The op order with each ``conv(x, w)`` + per-channel vector made ``conv(x, w, b)``."""
    maths = elementwise_maths(order, target)
    producer, readers = producers_and_readers(order)
    kept = set(model_outputs)
    replaced: dict[str, OpNode] = {}  # conv or transpose name -> its rewrite
    dropped: set[str] = set()  # the adds, and broadcasts no one else reads
    for node in order:
        math_of_node = maths.get(node.name)
        if math_of_node is None or len(node.inputs) != 2 or len(node.outputs) != 1 \
                or not is_float32_binary(math_of_node, "add"):
            continue
        for position, operand in enumerate(node.inputs):
            found = _conv_and_bias(operand, node.inputs[1 - position], producer, readers, kept, operands)
            if found is None or any(n.name in replaced for n in found[:2] if n is not None):
                continue
            conv, transpose, broadcast, vector = found
            replaced[conv.name] = dataclasses.replace(
                conv, inputs=[*conv.inputs, vector], input_keys=[None, None, None],
                outputs=conv.outputs if transpose is not None else list(node.outputs))
            if transpose is not None:
                replaced[transpose.name] = dataclasses.replace(transpose, outputs=list(node.outputs))
            dropped.add(node.name)
            if readers[broadcast.outputs[0]] == 1 and broadcast.outputs[0] not in kept:
                dropped.add(broadcast.name)
                reshape = producer.get(broadcast.inputs[0])
                if reshape is not None and vector != broadcast.inputs[0] and readers[broadcast.inputs[0]] == 1 \
                        and broadcast.inputs[0] not in kept:
                    dropped.add(reshape.name)  # the (1, C) view of the vector the conv now reads itself
            break
    return [replaced.get(node.name, node) for node in order if node.name not in dropped]


def _conv_and_bias(operand: str, other: str, producer: dict[str, OpNode], readers: dict[str, int], kept: set[str],
                   operands: dict[str, OperandInfo]):
    """(conv, its transpose or None, the broadcast of the bias) when ``operand`` is a bias-free conv's
    result (through one transpose) and ``other`` a broadcast of a vector along its channel axis; else None."""
    if operand in kept or readers[operand] != 1:
        return None
    node = producer.get(operand)
    transpose = None
    channel_at = CHANNEL_AXIS
    if node is not None and node.type == TRANSPOSE and len(node.inputs) == 1:
        transpose, dims = node, list(node.params.get("dims", ()))
        if node.inputs[0] in kept or readers[node.inputs[0]] != 1 or CHANNEL_AXIS not in dims:
            return None
        channel_at = dims.index(CHANNEL_AXIS)
        node = producer.get(node.inputs[0])
    if not _bias_free_conv(node, operands):
        return None
    broadcast = producer.get(other)
    if broadcast is None or broadcast.type != BROADCAST or len(broadcast.inputs) != 1:
        return None
    result = operands.get(other)
    if result is None or result.shape != operands[operand].shape:
        return None
    vector = _channel_vector(broadcast, channel_at, operands[node.outputs[0]].shape[CHANNEL_AXIS], producer, operands)
    return None if vector is None else (node, transpose, broadcast, vector)


def _channel_vector(broadcast: OpNode, channel_at: int, channels: int, producer: dict[str, OpNode],
                    operands: dict[str, OperandInfo]) -> str | None:
    """The float32 (channels,) operand ``broadcast`` lays along result axis ``channel_at``: its own input,
    or, when that is the vector reshaped with dims of 1 around it (JAX's (1, C) bias), the vector the
    reshape read; else None."""
    source = broadcast.inputs[0]
    info, dims = operands.get(source), list(broadcast.params.get("dims", ()))
    if info is None or info.dtype != "float32" or info.shape is None or len(dims) != len(info.shape):
        return None
    if info.shape == (channels,):
        return source if dims == [channel_at] else None
    if sorted(info.shape) != [1] * (len(info.shape) - 1) + [channels] or channels == 1:
        return None
    if dims[list(info.shape).index(channels)] != channel_at:
        return None
    reshape = producer.get(source)
    if reshape is None or reshape.type != RESHAPE or len(reshape.inputs) != 1:
        return None
    vector = operands.get(reshape.inputs[0])
    return reshape.inputs[0] if vector is not None and vector.shape == (channels,) else None


def _bias_free_conv(node: OpNode | None, operands: dict[str, OperandInfo]) -> bool:
    """Whether ``node`` is a convolution (not transposed) of two positional inputs, x and a weight input,
    with no bias and a float32 output of declared shape with a known channel count."""
    if node is None or len(node.inputs) != 2 or len(node.outputs) != 1 or any(node.input_keys):
        return False
    registered = op_registry().get(node.type)
    if registered is None or not issubclass(registered.obj, ConvNd):  # transposed convs are not ConvNds
        return False
    if node.attrs or node.params.get("bias") not in (None, False) or "epilogue" in node.params:
        return False
    info = operands.get(node.outputs[0])
    return (info is not None and info.dtype == "float32" and info.shape is not None and len(info.shape) > CHANNEL_AXIS
            and isinstance(info.shape[CHANNEL_AXIS], int))
