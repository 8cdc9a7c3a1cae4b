"""Elementwise functions of one input move above reshapes and permutes, next to what they read.

``f(permute(reshape(conv(x))))`` is ``permute(reshape(f(conv(x))))`` for any elementwise f of one
input: a reshape or a permute moves each element once and changes none.  Written the second way,
f reads the conv's output directly, so the fusion pass can make it the conv's epilogue (YOLO's
detection heads: conv, reshape to (3, 85, H, W), permute, sigmoid) or fuse it with the elementwise
op before it, and f reads a dense array instead of a permuted view.

An op moves above the one before it when that op rearranges (``Op.rearranges``: its one input's
elements, each once, in another shape or order), the function reads that op's output as values
(not its shape), nobody else reads that output or the rearranging op's input, and neither is a
model output.  It keeps moving while the next op up rearranges too.  The work stays the same, so
nothing is lost where no fusion follows.

Like the fusion pass, this rewrites OpNodes before ops are instantiated.  The operand it makes between
the two is declared in ``operands`` with the shape of the rearranging op's input (later passes read it:
kuiper/graph/channels_last.py).
"""

from __future__ import annotations

from ..model_ir import OperandInfo, OpNode
from .fusion import elementwise_maths, producers_and_readers
from .target import Target


def hoist_unary_elementwise(order: list[OpNode], model_outputs: list[str], target: Target,
                            operands: dict | None = None) -> list[OpNode]:
    """The op order with each one-input elementwise op moved above the rearranging ops before it (each operand
    made between them declared in ``operands`` where that is given)."""
    maths = elementwise_maths(order, target)
    registry = target.ops
    order = list(order)
    producer, readers = producers_and_readers(order)
    place = {node.name: index for index, node in enumerate(order)}
    kept = set(model_outputs)

    def rearranging_source(operand: str) -> OpNode | None:
        """The op making ``operand`` if the function reading it may move above that op; else None."""
        source = producer.get(operand)
        if source is None or operand in kept or readers[operand] != 1:
            return None
        registered = registry.get(source.type)
        if registered is None or not getattr(registered.obj, "rearranges", False):
            return None
        if len(source.inputs) != 1 or len(source.outputs) != 1:
            return None
        below = source.inputs[0]
        return source if below not in kept and readers[below] == 1 else None

    for name in [node.name for node in order]:
        math = maths.get(name)
        if math is None or math.arity != 1 or 0 in math.whole_inputs:
            continue
        function = order[place[name]]
        while (source := rearranging_source(function.inputs[0])) is not None:
            between = f"{function.outputs[0]}.before.{source.name}"  # a new operand: f of the source's input
            while between in producer or between in readers:  # a name the model already uses
                between += "'"
            moved = OpNode(type=function.type, name=function.name, inputs=list(source.inputs), outputs=[between],
                           params=function.params, attrs=function.attrs, input_keys=list(function.input_keys),
                           source=function.source)
            rearranged = OpNode(type=source.type, name=source.name, inputs=[between], outputs=list(function.outputs),
                                params=source.params, attrs=source.attrs, input_keys=list(source.input_keys),
                                source=source.source)
            # The function takes the source's place (its input exists there); the source takes the
            # function's, where the function's readers expect its output.
            up, down = place[source.name], place[function.name]
            order[up], order[down] = moved, rearranged
            place[moved.name], place[rearranged.name] = up, down
            producer[between], producer[rearranged.outputs[0]] = moved, rearranged
            readers[between] = 1
            if operands is not None:
                below, result = operands.get(source.inputs[0]), operands.get(function.outputs[0])
                operands[between] = OperandInfo(between, below.shape if below else None,
                                                result.dtype if result else None)
            function = moved
    return order
