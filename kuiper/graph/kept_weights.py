"""After a model's first call, the weights its kernels keep in layouts of their own are let go as given.

oneDNN's convolutions reorder their weight into a blocked layout when their first plan is made, and keep
it; the array the file gave stayed alive beside it, held by the op, the kernel and the IR's nodes: 28 MB
of YOLOv5's 191 MiB peak.  ONNX Runtime frees an initializer once its prepacked copy exists.  Here each op
says which of its node's weights it has let go of (``Op.let_go_of_weights``), with a function remaking
each exactly, and every node holding that array (the step's, the IR the Model keeps) takes a
``RemadeWeight`` in its place, so nothing holds the array any more.
"""

from __future__ import annotations

from typing import Iterator, Sequence

from ..model_ir import ModelIR, OpNode, RemadeWeight
from .plan import Step
from .providers import Partition


def let_go_of_kept_weights(steps: Sequence[Step], ir: ModelIR | None) -> int:
    """Ask every op, and every member of a partition, to let go of the weights its kernels keep; replace each
    one let go, wherever a node holds it, by a ``RemadeWeight``.  The bytes let go."""
    remade: dict[int, tuple] = {}  # id of the array let go -> (the array, what takes its place)
    nodes = []
    for node, op in _ops(((step.node, step.op) for step in steps)):
        nodes.append(node)
        for key, remake in op.let_go_of_weights().items():
            given = node.attrs.get(key)
            if given is not None and not isinstance(given, RemadeWeight):
                remade[id(given)] = (given, RemadeWeight(given.shape, given.dtype, remake))
    if not remade:
        return 0
    for node in nodes + (list(ir.ops) if ir is not None else []):
        for key, value in node.attrs.items():
            entry = remade.get(id(value))
            if entry is not None and entry[0] is value:
                node.attrs[key] = entry[1]
    return sum(given.nbytes for given, _ in remade.values())


def _ops(pairs) -> Iterator[tuple[OpNode, object]]:
    """Each (node, op), and under a partition its members', depth first."""
    for node, op in pairs:
        yield node, op
        if isinstance(op, Partition):
            yield from _ops((unit.node, unit.op) for unit in op.members)
