"""Reshapes and broadcasts that change nothing leave the graph, and a reshape of a reshape becomes one.

JAX writes a bias add as four shape ops: reshape the bias to (1, n), broadcast it to (1, n)
(the same shape), reshape it back to (n,), broadcast it to the activation's shape.  Only the
last does anything, yet each costs a step of the plan at every call (3-5 us: a fifth of a small
MLP's call).  Here an op whose result is its input unchanged (a Reshape to the input's own
shape, a Broadcast to it in dim order) is dropped and its readers read the input, and a
Reshape of a Reshape reads the first one's input.  Shapes are the declared ones: an op whose
shapes are not all known stays.  An op whose result is a model output stays (the output is
then its own array, not the caller's input).  Like the other passes, this rewrites OpNodes
before ops are instantiated.
"""

from __future__ import annotations

import dataclasses

from ..model_ir import OperandInfo, OpNode

RESHAPE, BROADCAST = "Reshape", "Broadcast"


def drop_shape_no_ops(order: list[OpNode], operands: dict[str, OperandInfo], model_outputs: list[str]) -> list[OpNode]:
    """The op order without reshapes and broadcasts that change nothing, reshape chains made one."""
    kept = set(model_outputs)
    same_as: dict[str, str] = {}  # a dropped op's result -> the operand it equals
    producer: dict[str, OpNode] = {}
    result: list[OpNode] = []
    for node in order:
        inputs = [same_as.get(operand, operand) for operand in node.inputs]
        if inputs != node.inputs:
            node = dataclasses.replace(node, inputs=inputs)
        if _one_to_one(node) and node.type in (RESHAPE, BROADCAST):
            if node.type == RESHAPE:
                node = _past_reshape(node, producer.get(node.inputs[0]), operands)
            target = node.outputs[0]
            if target not in kept and _unchanged(node, operands.get(node.inputs[0]), operands.get(target)):
                same_as[target] = node.inputs[0]
                continue
        for operand in node.outputs:
            producer[operand] = node
        result.append(node)
    return _read_only(result, kept)


def _one_to_one(node: OpNode) -> bool:
    return len(node.inputs) == 1 and len(node.outputs) == 1


def _known(info: OperandInfo | None) -> tuple[int, ...] | None:
    if info is None or info.shape is None or any(not isinstance(dim, int) for dim in info.shape):
        return None
    return tuple(info.shape)


def _past_reshape(node: OpNode, source: OpNode | None, operands: dict[str, OperandInfo]) -> OpNode:
    """A Reshape reading another Reshape's result, made to read that one's input (to its declared shape)."""
    if source is None or source.type != RESHAPE or not _one_to_one(source):
        return node
    shape = _known(operands.get(node.outputs[0]))
    if shape is None:
        return node
    return dataclasses.replace(node, inputs=list(source.inputs), params={**node.params, "shape": list(shape)})


def _unchanged(node: OpNode, given: OperandInfo | None, made: OperandInfo | None) -> bool:
    """Whether ``node`` (a one-input Reshape or Broadcast) gives its input back: the same declared shape,
    and for a broadcast each input dim at its own place."""
    shape_in, shape_out = _known(given), _known(made)
    if shape_in is None or shape_in != shape_out:
        return False
    if node.type == BROADCAST:
        return list(node.params.get("dims", ())) == list(range(len(shape_in)))
    return True


def _read_only(order: list[OpNode], kept: set[str]) -> list[OpNode]:
    """``order`` without the reshapes no op reads any more (a chain's first link), last to first."""
    read = set(kept)
    result: list[OpNode] = []
    for node in reversed(order):
        if node.type == RESHAPE and _one_to_one(node) and node.outputs[0] not in read:
            continue
        read.update(node.inputs)
        result.append(node)
    return result[::-1]
