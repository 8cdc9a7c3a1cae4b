"""Elementwise fusion: chains and trees of elementwise ops become ONE pnnx.Expression node.

(A lone elementwise op becomes an expression of its own, so every elementwise
op runs compiled; only merged chains are reported as fused.)

An op is elementwise when its class gives an equivalent expression
(``Op.elementwise_expression(node)``: activations, clamp, pnnx.Expression
itself).  A producer is absorbed into its consumer when both are elementwise,
the consumer is the producer's only reader, and the producer's result is not a
model output, so no intermediate value is needed anywhere else.  Each group is
rewritten as one expression over the group's outside inputs; the backend then
compiles it into one kernel (one CUDA kernel on CuPy, one buffer-reusing
evaluation on NumPy).

This is a rewrite of OpNodes before ops are instantiated: it knows nothing
about backends.
"""

from __future__ import annotations

from collections import defaultdict

from ..errors import KuiperError
from ..expr import Input, parse, substitute, to_string
from ..expr.parser import MAX_DEPTH
from ..expr.transform import canonicalize_inputs, depth, input_indices, uses_size_of
from ..model_ir import OpNode
from ..plugins import op_registry


def _elementwise_expressions(order: list[OpNode]) -> dict[str, object]:
    """op name -> parsed expression over that op's own inputs, for every fusible op."""
    registry = op_registry()
    found = {}
    for node in order:
        registered = registry.get(node.type)
        if registered is None or len(node.outputs) != 1:
            continue
        try:
            text = registered.obj.elementwise_expression(node)
            expression = None if text is None else parse(text, num_inputs=len(node.inputs))
            # An op whose expression ignores some of its inputs (an nn.ReLU given two) is malformed:
            # left unfused, its own setup reports it.
            if expression is not None and set(input_indices(expression)) == set(range(len(node.inputs))):
                found[node.name] = expression
        except KuiperError:
            continue  # the op reports its own error when it is built unfused
    return found


def fuse_elementwise(order: list[OpNode], model_outputs: list[str]) -> tuple[list[OpNode], list[list[str]]]:
    """Return the new op order and, for `kuiper info`, the op names merged into each fused node.

    ``model_outputs`` are never absorbed: the model returns them.
    """
    expressions = _elementwise_expressions(order)
    producer = {operand: node for node in order for operand in node.outputs}
    readers: dict[str, set[str]] = defaultdict(set)
    for node in order:
        for operand in node.inputs:
            readers[operand].add(node.name)
    model_outputs = set(model_outputs)

    def absorbable(operand: str, consumer: OpNode, position: int) -> bool:
        source = producer.get(operand)
        return (
            source is not None
            and source.name in expressions
            and consumer.name in expressions
            and operand not in model_outputs
            and readers[operand] == {consumer.name}
            and not uses_size_of(expressions[consumer.name], position)
        )

    absorbed: set[str] = set()
    for node in order:
        if node.name in expressions:
            for position, operand in enumerate(node.inputs):
                if absorbable(operand, node, position):
                    absorbed.add(producer[operand].name)

    new_order: list[OpNode] = []
    groups: list[list[str]] = []
    for node in order:
        if node.name in absorbed:
            continue  # emitted inside its consumer's fused node
        if node.name not in expressions:
            new_order.append(node)
            continue
        if not any(absorbable(operand, node, i) for i, operand in enumerate(node.inputs)):
            # A lone elementwise op still runs as a compiled expression: one pass,
            # buffers reused, and it can write into a buffer the graph lends it.
            new_order.append(node if node.type == "pnnx.Expression" else _as_expression(node, expressions[node.name]))
            continue
        fused = _fuse_group(node, expressions, producer, absorbable)
        if fused is None:
            new_order.append(node)
            continue
        fused_node, members = fused
        new_order.append(fused_node)
        groups.append(members)
    return new_order, groups


def _as_expression(node: OpNode, expression) -> OpNode:
    return OpNode(
        type="pnnx.Expression",
        name=node.name,
        inputs=list(node.inputs),
        outputs=list(node.outputs),
        params={"expr": to_string(expression)},
        source=node.source,
    )


def _fuse_group(root: OpNode, expressions, producer, absorbable):
    """Build the root's expression with every absorbable producer substituted in."""
    outside: dict[str, int] = {}  # outside operand -> provisional input number
    members: list[str] = []

    def expand(node: OpNode):
        members.append(node.name)
        replacements = {}
        for position, operand in enumerate(node.inputs):
            if absorbable(operand, node, position):
                replacements[position] = expand(producer[operand])
            else:
                replacements[position] = Input(outside.setdefault(operand, len(outside)))
        return substitute(expressions[node.name], replacements)

    expression = expand(root)
    if depth(expression) > MAX_DEPTH // 2:
        return None  # absurdly long chains stay unfused rather than hit the parser's depth limit
    expression, order = canonicalize_inputs(expression)
    by_number = {number: operand for operand, number in outside.items()}
    inputs = [by_number[old] for old in order]
    members.reverse()  # producers first, in the order they ran
    return _as_expression(OpNode(root.type, root.name, inputs, list(root.outputs), source=root.source), expression), members
