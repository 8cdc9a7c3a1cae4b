"""At the end of a build, ops hand the weights their kernels keep in layouts of their own over to them.

oneDNN's kernels reorder a constant weight into their own layout (a convolution's blocked one, a matrix
product's packed one) when their first plan is made, and keep it; the array the file gave stayed alive
beside it, held by the op, the kernel and the IR's nodes: 28 MB of YOLOv5's 191 MiB peak, 226 MB of
ViT-B/16's 762.  ONNX Runtime frees an initializer once its prepacked copy exists.  Here each op says
which of its node's weights it hands over (``Op.hand_over_weights``), with a function giving each as
given, and every node holding that array (the steps', the partitions' members', the IR the Model keeps)
takes a ``RemadeWeight`` in its place.  The kernel then holds the only reference and drops the array as
soon as its own layout exists (``onednn.WeightLayouts``).
"""

from __future__ import annotations

from typing import Iterable, Iterator

from ..model_ir import ModelIR, OpNode, RemadeWeight
from .providers import Partition


def hand_over_weights(pairs: Iterable[tuple[OpNode, object]], ir: ModelIR) -> None:
    """Ask every op, and every member of a partition, which weights it hands over (``pairs``: each step's node
    and op); put a ``RemadeWeight`` wherever a node holds one of them."""
    remade: dict[int, tuple] = {}  # id of the array handed over -> (the array, what takes its place)
    nodes = []
    for node, op in _ops(pairs):
        nodes.append(node)
        for key, give in op.hand_over_weights().items():
            given = node.attrs.get(key)
            if given is not None and not isinstance(given, RemadeWeight):
                remade[id(given)] = (given, RemadeWeight(given.shape, given.dtype, give))
    for node in nodes + list(ir.ops):
        for key, value in node.attrs.items():
            entry = remade.get(id(value))
            if entry is not None and entry[0] is value:
                node.attrs[key] = entry[1]


def _ops(pairs) -> Iterator[tuple[OpNode, object]]:
    """Each (node, op), and under a partition its members', depth first."""
    for node, op in pairs:
        yield node, op
        if isinstance(op, Partition):
            yield from _ops((unit.node, unit.op) for unit in op.members)
