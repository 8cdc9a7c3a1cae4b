"""A concat of reshaped concats is one ``ConcatNested`` op, so its pieces can go straight into one output.

YOLOv5's detect head joins, per level, the boxes' xy, wh and the class scores along the last axis
(``cat((xy, wh, conf), -1)``), reshapes each level to (N, rows, no) and joins the levels along the
rows::

    out = concat(reshape(concat(xy_0, wh_0, conf_0)), reshape(concat(xy_1, ...)), ..., dim=1)

Op by op, each level's join makes an array that the last join copies again (at batch 8 of a
640x640 YOLOv5s: 22 MB of level joins, copied into a 68 MB output).  Written as one op, a kernel
can write each piece where it ends up in the output (kuiper/numba_kernels/concat_nested.py); the
reference op computes exactly the ops it replaces.

An outer ``Concat`` takes an operand this way when that operand is the output of a ``Reshape``
with its shape as a param (or of a ``Concat`` directly) whose input is a ``Concat``'s output, and
nobody else reads either, and neither is a model output.  Reads only the op set.
"""

from __future__ import annotations

from collections import Counter

from ..model_ir import OpNode

CONCAT, RESHAPE, NESTED = "Concat", "Reshape", "ConcatNested"


def join_nested_concats(order: list[OpNode], model_outputs: list[str]) -> list[OpNode]:
    """The op order with each concat of reshaped concats written as one ``ConcatNested``."""
    producer = {operand: node for node in order for operand in node.outputs}
    readers = Counter(operand for node in order for operand in node.inputs)
    kept = set(model_outputs)

    def private(operand: str) -> OpNode | None:
        """The op making ``operand`` when only one op reads it and it is no model output."""
        return None if operand in kept or readers[operand] != 1 else producer.get(operand)

    def plain(node: OpNode | None, kind: str) -> bool:
        return (node is not None and node.type == kind and len(node.outputs) == 1 and not node.attrs
                and not any(node.input_keys))

    replaced: dict[str, OpNode] = {}  # outer concat's name -> its ConcatNested
    dropped: set[str] = set()
    for node in order:
        if not plain(node, CONCAT) or not node.inputs:
            continue
        inputs, pieces, inner_dims, ranks, shapes, taken = [], [], [], [], [], []
        for operand in node.inputs:
            reshape, target = private(operand), None
            if plain(reshape, RESHAPE) and len(reshape.inputs) == 1 and _static_shape(reshape) is not None:
                target, operand_below = _static_shape(reshape), reshape.inputs[0]
            else:
                reshape, operand_below = None, operand
            inner = private(operand_below)
            if plain(inner, CONCAT) and inner.inputs and inner.name not in replaced and inner.name not in dropped:
                inputs.extend(inner.inputs)
                pieces.append(len(inner.inputs))
                inner_dims.append(int(inner.params.get("dim", 0)))
                taken.extend(n for n in (reshape, inner) if n is not None)
            else:
                inputs.append(operand)
                pieces.append(1)
                inner_dims.append(0)
                target = None
            ranks.append(-1 if target is None else len(target))
            shapes.extend(target or ())
        if not taken:
            continue
        dropped.update(n.name for n in taken)
        replaced[node.name] = OpNode(
            type=NESTED, name=node.name, inputs=inputs, outputs=list(node.outputs),
            params={"dim": int(node.params.get("dim", 0)), "pieces": pieces, "inner_dims": inner_dims,
                    "ranks": ranks, "shapes": shapes},
            source=node.source)
    if not replaced:
        return order
    return [replaced.get(node.name, node) for node in order if node.name not in dropped]


def _static_shape(reshape: OpNode) -> list[int] | None:
    shape = reshape.params.get("shape")
    if isinstance(shape, (list, tuple)) and all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
        return list(shape)
    return None
