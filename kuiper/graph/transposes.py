"""Transposes move below window reductions, and a transpose of a transpose becomes one (or none).

XLA's CPU convolutions compute NCHW, and a JAX program is NHWC, so the HLO lowering wraps every
conv in transposes: ``transpose(conv(transpose(x)))``.  A max pool between two convs then reads
a transposed view (a Flax CNN's 2x2 pools: 0.16 and 0.11 ms, copying the view first), and the
next conv's input transpose undoes the last conv's output one.  ``reduce_window(transpose(x, p))``
is ``transpose(reduce_window'(x), p)`` with the window's sizes, strides, padding and dilations
taken to the dims they apply to in x; once it is written so, the pool reads the conv's dense
output, and the two transposes meet: ``transpose(transpose(x, p), q)`` is ``transpose(x, p[q])``,
nothing at all when that is the identity.

A U-Net's skip connections join NHWC maps (``concat(transpose(a, p), transpose(b, p), axis)``) that
convs made NCHW and a conv reads back as NCHW: a join of inputs all transposed alike is the join of
the inputs along the dim the axis comes from, transposed once (``transpose(concat(a, b, p[axis]), p)``),
and that transpose then meets the next conv's.  The join then reads the convs' outputs where they lie
(in oneDNN's blocked layout, where the readers take it: kuiper/graph/native_layouts.py).

A transpose moves only when the window reduction is its one reader and neither is a model
output; a pair joins when the first has no other reader (else the second alone reads past it).
An identity transpose is dropped when its result is not a model output.  Runs after
hoist.py, which moves one-input elementwise ops (a ReLU) above the same transposes.  Reads only
the op set (Transpose, ReduceWindow), never a frontend.
"""

from __future__ import annotations

import dataclasses

from ..model_ir import OpNode
from .fusion import producers_and_readers

TRANSPOSE, REDUCE_WINDOW, CONCAT = "Transpose", "ReduceWindow", "Concat"
PER_DIM_PARAMS = ("window", "strides", "padding", "base_dilation", "window_dilation")


def move_transposes_down(order: list[OpNode], model_outputs: list[str]) -> list[OpNode]:
    """The op order with transposes moved below the window reductions and joins that read them, then joined."""
    kept = set(model_outputs)
    return _joined(_below_joins(_below_window_reductions(order, kept)), kept)


def _below_window_reductions(order: list[OpNode], kept: set[str]) -> list[OpNode]:
    producer, readers = producers_and_readers(order)
    names = {operand for node in order for operand in (*node.inputs, *node.outputs)}
    moved: dict[str, list[OpNode]] = {}  # reduction name -> (the reduction on x, the transpose after it)
    gone: set[str] = set()  # transposes now after their reductions
    for node in order:
        if node.type != REDUCE_WINDOW or len(node.inputs) != 2 or len(node.outputs) != 1:
            continue
        transpose = producer.get(node.inputs[0])
        if (transpose is None or transpose.type != TRANSPOSE or len(transpose.inputs) != 1 or transpose.name in gone
                or node.inputs[0] in kept or readers[node.inputs[0]] != 1):
            continue
        params = _params_on_input(node.params, list(transpose.params.get("dims", ())))
        if params is None:
            continue
        between = f"{node.outputs[0]}.before.{transpose.name}"
        while between in names:  # a name the model already uses
            between += "'"
        names.add(between)
        reduction = dataclasses.replace(node, inputs=[transpose.inputs[0], node.inputs[1]], outputs=[between],
                                        params=params)
        moved[node.name] = [reduction, dataclasses.replace(transpose, inputs=[between], outputs=list(node.outputs))]
        gone.add(transpose.name)
    result: list[OpNode] = []
    for node in order:
        if node.name not in gone:
            result.extend(moved.get(node.name, [node]))
    return result


def _below_joins(order: list[OpNode]) -> list[OpNode]:
    """Each Concat of inputs that are all transposes by one permutation as a Concat of the transposes' inputs
    and one transpose after it.  The transposes stay where other ops read them (else _read_only drops them)."""
    producer, _ = producers_and_readers(order)
    names = {operand for node in order for operand in (*node.inputs, *node.outputs)}
    result: list[OpNode] = []
    for node in order:
        sources = [producer.get(operand) for operand in node.inputs]
        dims = list(sources[0].params.get("dims", ())) if sources and sources[0] is not None else []
        dim = node.params.get("dim", 0)
        if (node.type != CONCAT or len(node.outputs) != 1 or not dims or sorted(dims) != list(range(len(dims)))
                or not isinstance(dim, int) or not -len(dims) <= dim < len(dims)
                or set(node.params) - {"dim"}
                or any(source is None or source.type != TRANSPOSE or len(source.inputs) != 1
                       or list(source.params.get("dims", ())) != dims for source in sources)):
            result.append(node)
            continue
        between = f"{node.outputs[0]}.before.transpose"
        while between in names:  # a name the model already uses
            between += "'"
        names.add(between)
        result.append(dataclasses.replace(node, inputs=[source.inputs[0] for source in sources], outputs=[between],
                                          params={"dim": dims[dim % len(dims)]}))
        result.append(OpNode(TRANSPOSE, f"{node.name}/transpose", [between], list(node.outputs), {"dims": dims},
                             source=node.source))
    return result


def _params_on_input(params: dict, dims: list) -> dict | None:
    """A window reduction's params over a transpose's result (dim i is the input's dim ``dims[i]``) as
    params over the transpose's input; None where a per-dim param does not have one value per dim."""
    rank = len(dims)
    if sorted(dims) != list(range(rank)):
        return None
    moved = dict(params)
    for key in PER_DIM_PARAMS:
        values = params.get(key)
        if values is None or not isinstance(values, (list, tuple)):
            continue  # absent or one value for every dim: the same on the input
        if len(values) != rank:
            return None
        on_input = [None] * rank
        for axis, source in enumerate(dims):
            on_input[source] = values[axis]
        moved[key] = on_input
    return moved


def _joined(order: list[OpNode], kept: set[str]) -> list[OpNode]:
    """Each transpose of a transpose as one transpose of the first one's input; identities dropped."""
    producer, _ = producers_and_readers(order)
    same_as: dict[str, str] = {}  # a dropped identity's result -> its input
    result: list[OpNode] = []
    for node in order:
        inputs = [same_as.get(operand, operand) for operand in node.inputs]
        if inputs != node.inputs:
            node = dataclasses.replace(node, inputs=inputs)
        if node.type == TRANSPOSE and len(node.inputs) == 1 and len(node.outputs) == 1:
            inner = producer.get(node.inputs[0])
            if inner is not None and inner.type == TRANSPOSE and len(inner.inputs) == 1:
                first, second = list(inner.params.get("dims", ())), list(node.params.get("dims", ()))
                if len(first) == len(second) and sorted(second) == list(range(len(second))):
                    node = dataclasses.replace(node, inputs=list(inner.inputs),
                                               params={**node.params, "dims": [first[axis] for axis in second]})
            dims = list(node.params.get("dims", ()))
            if dims == list(range(len(dims))) and node.outputs[0] not in kept:
                same_as[node.outputs[0]] = node.inputs[0]
                continue
        for operand in node.outputs:
            producer[operand] = node
        result.append(node)
    return _read_only(result, kept)


def _read_only(order: list[OpNode], kept: set[str]) -> list[OpNode]:
    """``order`` without the transposes no op reads any more (the first of a joined pair), last to first."""
    read = set(kept)
    result: list[OpNode] = []
    for node in reversed(order):
        if node.type == TRANSPOSE and len(node.outputs) == 1 and node.outputs[0] not in read:
            continue
        read.update(node.inputs)
        result.append(node)
    return result[::-1]
