"""At the end of a build, ops hand the weights their kernels keep in layouts of their own over to them.

oneDNN's kernels reorder a constant weight into their own layout (a convolution's blocked one, a matrix
product's packed one) when their first plan is made, and keep it; the array the file gave stayed alive
beside it, held by the op, the kernel and the IR's nodes: 28 MB of YOLOv5's 191 MiB peak, 226 MB of
ViT-B/16's 762.  ONNX Runtime frees an initializer once its prepacked copy exists.  Here each op says
which of its node's weights it hands over (``Op.hand_over_weights``), with a function giving each as
given, and every node holding that array (the steps', the partitions' members', the IR the Model keeps)
takes a ``RemadeWeight`` in its place.  The kernel then holds the only reference and drops the array as
soon as its own layout exists (``onednn.WeightLayouts``).

The IR a Model keeps is the one before the graph passes.  Where a pass folded a weight into another op's (a
layer scale into its conv, a batch norm into a Linear), the file's array stayed there beside the folded one
that the steps read: 18 MB of PoolFormer-S12's 48.  At the model's first call, when the IR its loader read
is gone, ``drop_weights_no_step_reads`` puts a ``DroppedWeight`` (shape and dtype only) in its place.
"""

from __future__ import annotations

import functools
import sys
from typing import Iterable, Iterator

import numpy as np

from ..model_ir import DroppedWeight, ModelIR, OpNode, RemadeWeight
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
            if isinstance(given, np.ndarray):
                remade[id(given)] = (given, RemadeWeight(given.shape, given.dtype, give))
    for node in nodes + list(ir.ops):
        for key, value in node.attrs.items():
            entry = remade.get(id(value))
            if entry is not None and entry[0] is value:
                node.attrs[key] = entry[1]


def drop_weights_no_step_reads(pairs: Iterable[tuple[OpNode, object]], ir: ModelIR) -> None:
    """Put a ``DroppedWeight`` in place of each array of ``ir``'s nodes whose memory nothing else holds: no
    step's node (nor a partition member's: ``pairs`` as for ``hand_over_weights``), in any view, and no op
    (an elementwise chain's math keeps its constants)."""
    held = {id(_root(value)) for node, _ in _ops(pairs) for value in node.attrs.values()
            if isinstance(value, np.ndarray)}
    for node in ir.ops:
        for key in list(node.attrs):
            if _only_this_entry_holds(node.attrs, key, held):
                value = node.attrs[key]
                node.attrs[key] = DroppedWeight(value.shape, value.dtype, f"{node.describe()}, weight '@{key}'")


def _only_this_entry_holds(attrs: dict, key: str, held: set) -> bool:
    """Whether dropping ``attrs[key]`` frees its memory: an array that no step's node holds a view of, held
    by this entry alone, whose memory's owner nothing else holds (an op's own view of it, or a compiled
    chain's constant, would add a reference)."""
    if not isinstance(attrs[key], np.ndarray) or id(_root(attrs[key])) in held:
        return False
    # No local holds the array here, as none does where the sole holder's counts are measured.
    return _reference_counts(attrs, key) == _sole_holder_counts(attrs[key].base is not None)


def _reference_counts(attrs: dict, key: str) -> tuple[int, int]:
    """The reference counts of ``attrs[key]`` and of the array owning its memory, as this function sees them."""
    value = attrs[key]
    root = _root(value)
    return sys.getrefcount(value), sys.getrefcount(root)


@functools.cache
def _sole_holder_counts(view: bool) -> tuple[int, int]:
    """What ``_reference_counts`` gives for an array (or a view of one) that one dict entry alone holds: measured
    rather than written down, since how an interpreter counts its locals differs between versions."""
    owner = np.empty(2, np.uint8)
    attrs = {"probe": owner[1:] if view else owner}
    del owner
    return _reference_counts(attrs, "probe")


def _root(array: np.ndarray) -> np.ndarray:
    """The array that owns ``array``'s memory (NumPy points a view's ``base`` at it, or at a view of it)."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


def _ops(pairs) -> Iterator[tuple[OpNode, object]]:
    """Each (node, op), and under a partition its members', depth first."""
    for node, op in pairs:
        yield node, op
        if isinstance(op, Partition):
            yield from _ops((unit.node, unit.op) for unit in op.members)
