"""Slices that cut one value into consecutive pieces along one dim become one Split step.

An LSTM cell written in JAX takes its four gates out of one product as four slices, and a Flax
``OptimizedLSTMCell`` does so twice per step: eight steps of the plan at every iteration, each a
step's cost (0.3 us) around a 0.3 us view.  Here the Slice ops that read one operand, with unit
strides, whose windows differ in one dim only, take the whole of every other dim and together
cover that dim piece after piece without overlap, become one ``Split`` (torch.split's canonical
op: the same views, one step, its outputs in the pieces' order).  The Split stands where the first
of them stood (they read only that operand, there already).  Shapes are the declared ones: slices of
an operand whose shape is not known stay.  Like the other passes, this rewrites OpNodes before ops
are instantiated.
"""

from __future__ import annotations

from collections import defaultdict

from ..model_ir import OperandInfo, OpNode

SLICE, SPLIT = "Slice", "Split"


def join_slices(order: list[OpNode], operands: dict[str, OperandInfo]) -> list[OpNode]:
    """The op order with each group of slices that partition one dim of one operand made one Split."""
    readers: dict[str, list[OpNode]] = defaultdict(list)
    for node in order:
        if node.type == SLICE and len(node.inputs) == 1 and len(node.outputs) == 1:
            readers[node.inputs[0]].append(node)
    replaced: dict[str, OpNode | None] = {}  # a slice's name -> the Split standing in its place, or None
    for source, slices in readers.items():
        split = _as_split(source, slices, operands.get(source)) if len(slices) > 1 else None
        if split is not None:
            replaced.update({node.name: None for node in slices})
            replaced[slices[0].name] = split  # the first in the order
    if not replaced:
        return order
    return [replaced[node.name] if node.name in replaced else node for node in order
            if replaced.get(node.name, node) is not None]


def _as_split(source: str, slices: list[OpNode], info: OperandInfo | None) -> OpNode | None:
    """The Split that gives what ``slices`` give, or None where they do not partition one dim of ``source``."""
    if info is None or info.shape is None or not all(isinstance(dim, int) for dim in info.shape):
        return None
    shape = tuple(info.shape)
    windows, axes = [], set()
    for node in slices:
        starts, limits = node.params.get("starts"), node.params.get("limits")
        strides = node.params.get("strides", 1)
        if not isinstance(starts, (list, tuple)) or not isinstance(limits, (list, tuple)) \
                or len(starts) != len(shape) or len(limits) != len(shape):
            return None
        if strides != 1 and (not isinstance(strides, (list, tuple)) or any(s != 1 for s in strides)):
            return None
        cut = [d for d, (b, e, size) in enumerate(zip(starts, limits, shape)) if (b, e) != (0, size)]
        if len(cut) != 1:
            return None
        axes.add(cut[0])
        windows.append((starts[cut[0]], limits[cut[0]], node))
    if len(axes) != 1:
        return None
    (axis,) = axes
    windows.sort(key=lambda window: window[0])
    edge = 0
    for start, limit, _ in windows:
        if start != edge or limit <= start:
            return None
        edge = limit
    if edge != shape[axis]:
        return None
    first = slices[0]
    return OpNode(type=SPLIT, name=f"{first.name}/joined", inputs=[source],
                  outputs=[node.outputs[0] for _, _, node in windows],
                  params={"split_size_or_sections": [limit - start for start, limit, _ in windows], "dim": axis},
                  source=first.source)
