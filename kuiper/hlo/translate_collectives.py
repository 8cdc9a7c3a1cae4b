"""Collectives on one device, synchronous or as ``*-start``/``*-done`` pairs -> Identity and Constant.

kuiper runs a module on one device, as replica 0 of one. With every replica group holding one
participant, XLA's collectives give each participant its own data back: all-reduce reduces one
value, all-gather and reduce-scatter gather and scatter one shard, all-to-all and
collective-broadcast exchange with itself. collective-permute copies along the pair ``{0,0}`` and,
as XLA defines it, gives zeros to a device that no pair sends to. A module written for more
participants than one cannot run here: it is refused, naming the group.

An asynchronous pair runs at its start. ``all-reduce-start`` has the result's shape; the other
starts return ``(operands, results, contexts...)``; each ``*-done`` returns the results. A context
(a u32 or s32 scalar XLA uses to track the transfer) holds 0.
"""

from __future__ import annotations

import numpy as np

from ..model_ir import OpNode
from .shapes import ArrayShape
from .site import Site
from .translate_common import attribute

COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-broadcast",
               "collective-permute")


def group_size(site: Site) -> int:
    """The participants per replica group: ``{{0},{1}}`` lists them, ``[groups,size]<=[...]`` and
    ``mesh['x'=2,'y'=2] {'y'}`` (the sizes of the named axes) count them."""
    groups = attribute(site, "replica_groups", [])
    if isinstance(groups, tuple) and len(groups) == 2 and groups[0]:  # the iota form
        return groups[0][-1]
    if isinstance(groups, tuple) and len(groups) == 3 and groups[0] == "maximal_mesh":  # one device
        return 1
    if isinstance(groups, tuple) and len(groups) == 3 and groups[0] == "mesh":  # ``mesh['x'=2,'y'=4] {'y'}``
        return int(np.prod(groups[2] or [], dtype=np.int64))  # the sizes of the axes a group spans
    if not isinstance(groups, list) or not all(isinstance(g, list) for g in groups):
        raise site.error(f"replica_groups={groups!r} must be {{{{ids}},...}} or [groups,size]<=[dims]")
    return max((len(g) for g in groups), default=1)


def reaches_itself(site: Site) -> bool:
    """collective-permute: True when the pair {0,0} is listed, False when no pair sends to device 0."""
    pairs = attribute(site, "source_target_pairs", [])
    if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 for p in pairs):
        raise site.error(f"source_target_pairs={pairs!r} must be {{{{source,target}},...}}")
    devices = {device for pair in pairs for device in pair}
    if devices - {0}:
        raise site.error(f"source_target_pairs={pairs} name devices {sorted(devices - {0})}: kuiper runs on "
                         "one device (device 0)")
    return [0, 0] in pairs


def base_opcode(site: Site) -> str:
    return site.instruction.opcode.removesuffix("-start").removesuffix("-done")


def check_one_participant(site: Site) -> None:
    size = group_size(site)
    if size > 1:
        raise site.error(f"replica groups of {size} participants need {size} devices: kuiper runs on one")


def operand_leaves(site: Site) -> list[ArrayShape]:
    return [leaf for index in range(len(site.instruction.operands)) for leaf in site.operand_shape(index).leaves()]


def collective_ops(site: Site, inputs: list[str], outputs: list[str], results: list[ArrayShape]) -> list[OpNode]:
    """The collective's results on one device: each operand itself (or zeros, for a permute to no one)."""
    if len(inputs) != len(outputs):
        raise site.error(f"gives {len(outputs)} result(s) for {len(inputs)} operand(s)")
    check_one_participant(site)
    for source, target in zip(operand_leaves(site), results):
        if source.dims != target.dims:
            raise site.error(f"gives {target} from {source}: a collective over more than one participant "
                             "(kuiper runs on one device)")
    copy = base_opcode(site) != "collective-permute" or reaches_itself(site)
    ops = []
    for index, (source, target) in enumerate(zip(inputs, outputs)):
        suffix = f"leaf{index}" if len(outputs) > 1 else ""
        if copy:
            ops.append(site.op("Identity", [source], [target], suffix=suffix))
        else:
            shape = site.operand_shape(index)  # a permute has array operands, each the shape of its result
            ops.append(site.op("Constant", [], [target], attrs={"data": np.zeros(shape.dims, shape.dtype)},
                               suffix=suffix))
    return ops


def translate_collective(site: Site) -> list[OpNode]:
    return collective_ops(site, site.inputs, site.outputs, site.instruction.shape.leaves())


def translate_start(site: Site) -> list[OpNode]:
    """``all-reduce-start`` gives the results; the others ``(operands, results, contexts...)``."""
    count = len(site.inputs)
    if site.instruction.opcode == "all-reduce-start":
        return collective_ops(site, site.inputs, site.outputs, site.instruction.shape.leaves())
    shape = site.instruction.shape
    if not shape.is_tuple or len(shape.elements) < 2 or len(site.outputs) < 2 * count:
        raise site.error(f"expects a result (operands, results, contexts...), found {shape}")
    ops = [site.op("Identity", [source], [target], suffix=f"operand{index}")
           for index, (source, target) in enumerate(zip(site.inputs, site.outputs))]
    ops += collective_ops(site, site.inputs, site.outputs[count:2 * count], shape.leaves()[count:2 * count])
    for index, target in enumerate(site.outputs[2 * count:]):
        context = shape.leaves()[2 * count + index]
        ops.append(site.op("Constant", [], [target], attrs={"data": np.zeros(context.dims, context.dtype)},
                           suffix=f"context{index}"))
    return ops


def translate_done(site: Site) -> list[OpNode]:
    """The results of the start: all of it for all-reduce, else its second element."""
    source = site.operand_shape(0)
    first = 0
    if site.instruction.opcode != "all-reduce-done":
        if not source.is_tuple or len(source.elements) < 2:
            raise site.error(f"expects the (operands, results, ...) tuple of its start, found {source}")
        first = len(source.elements[0].leaves())
    inputs = site.inputs[first:first + len(site.outputs)]
    return [site.op("Identity", [leaf], [target], suffix=f"leaf{index}" if len(site.outputs) > 1 else "")
            for index, (leaf, target) in enumerate(zip(inputs, site.outputs))]


TRANSLATORS = {
    **{opcode: translate_collective for opcode in COLLECTIVES},
    **{f"{opcode}-start": translate_start for opcode in COLLECTIVES},
    **{f"{opcode}-done": translate_done for opcode in COLLECTIVES},
}
