"""Execution providers: plugins that claim runs of a model's steps and run each run as one call.

After the graph passes, the build has the model as an ordered list of units, each an OpNode and
the op instantiated for it.  Every provider the Target lists (``kuiper_add_providers``, built-ins
first) is offered each maximal run of units no earlier provider took, and claims sub-runs it
can compile whole, as ONNX Runtime's ``GetCapability`` claims subgraphs.  For each claim it
compiles a ``Partition``: one op whose ``forward`` takes the run's outside inputs and returns the
values later steps (or the caller) read, computed however the provider likes (one native call,
a compiled program, a vendor library's graph).  What no provider claims runs op by op as before.

A partition keeps its members' ops: ``run_members`` computes the run exactly as the unclaimed
steps would, the fallback for inputs the provider does not compile (an unusual shape, a dtype)
and the reference its tests compare with.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..errors import PluginError
from ..model_ir import OperandInfo, OpNode
from ..ops.base import Op
from .target import Target

PARTITION_TYPE = "Partition"


@dataclass
class Unit:
    """One step of the model before slots are planned: its node and the op made for it."""

    node: OpNode
    op: Any


@dataclass(frozen=True)
class ClaimContext:
    """What a provider may know of the whole model when it claims: the Target, how many step inputs
    read each operand (plus one if the caller gets it: an operand used once inside a claim is private
    to it), and each operand's declared shape and dtype (None dims free; the batch, dim 0 of an
    input, may differ at run time)."""

    target: Target
    uses: Mapping[str, int]
    operands: Mapping[str, OperandInfo]

    def declared_shape(self, operand: str) -> tuple | None:
        info = self.operands.get(operand)
        return None if info is None or info.shape is None else tuple(info.shape)


class Provider:
    """Subclass, and return an instance from the ``kuiper_add_providers`` hook.

    ``claim`` returns half-open ``(start, stop)`` index ranges of ``units`` (a run of consecutive
    steps) that this provider runs whole.  ``compile`` makes the Partition op for one claimed
    range: ``node`` stands for it (its inputs are the operands the members read from outside, its
    outputs those that later steps or the caller read).
    """

    name: str = ""
    # Whether earlier providers' partitions are offered too, as units a claim may take in whole (a provider
    # that runs other partitions' compiled calls in sequence); else runs stop at them.
    takes_partitions: bool = False

    def claim(self, units: Sequence[Unit], context: ClaimContext) -> list[tuple[int, int]]:
        return []

    def compile(self, members: Sequence[Unit], inputs: list[str], outputs: list[str], target: Target,
                node: OpNode) -> Partition:
        raise NotImplementedError


class Partition(Op):
    """A claimed run of steps as one op.  Subclasses override ``forward``; ``run_members`` is the run
    step by step (the fallback), reading ``inputs`` and returning ``outputs`` as the node names them."""

    types = (PARTITION_TYPE,)

    def __init__(self, node: OpNode, backend, members: Sequence[Unit]):
        self.members = tuple(members)
        super().__init__(node, backend)
        # The values each member reads for the last time (none the partition returns), dropped after it as
        # the model's plan frees its slots: run step by step, MobileNetV2's one partition held all its
        # activations to the end (its first call peaked 14 MiB above the activations alive at once).
        last_read = {operand: index for index, member in enumerate(self.members) for operand in member.node.inputs}
        returned = set(node.outputs)
        self._dead_after = [[operand for operand, index in last_read.items() if index == position
                             and operand not in returned] for position in range(len(self.members))]

    def forward(self, *inputs):
        return self.run_members(*inputs)

    def run_members(self, *inputs):
        values = dict(zip(self.node.inputs, inputs))
        for member, dead in zip(self.members, self._dead_after):
            result = member.op.forward(*[values[operand] for operand in member.node.inputs])
            if len(member.node.outputs) == 1:
                values[member.node.outputs[0]] = result
            else:
                values.update(zip(member.node.outputs, result))
            for operand in dead:
                del values[operand]
        results = tuple(values[operand] for operand in self.node.outputs)
        return results[0] if len(results) == 1 else results


def partition_node(provider: Provider, members: Sequence[Unit], inputs: list[str], outputs: list[str]) -> OpNode:
    """The node standing for a claimed run: named after its first and last member, listing them all."""
    first, last = members[0].node, members[-1].node
    name = first.name if len(members) == 1 else f"{first.name}..{last.name}"
    return OpNode(type=PARTITION_TYPE, name=name, inputs=list(inputs), outputs=list(outputs),
                  params={"provider": provider.name, "members": [unit.node.name for unit in members]},
                  source=first.source)


def offer_to_providers(units: list[Unit], target: Target, model_outputs: Sequence[str],
                       operands: Mapping[str, OperandInfo]) -> list[Unit]:
    """``units`` with every run a provider claims replaced by one unit running its Partition."""
    kept = set(model_outputs)
    uses = Counter(operand for unit in units for operand in unit.node.inputs)
    uses.update(kept)
    context = ClaimContext(target, uses, operands)
    for provider in target.providers:
        units = _offer(provider, units, context, kept)
    return units


def _offer(provider: Provider, units: list[Unit], context: ClaimContext, kept: set[str]) -> list[Unit]:
    result: list[Unit] = []
    start = 0
    offered = (lambda unit: True) if provider.takes_partitions else (lambda unit: unit.node.type != PARTITION_TYPE)
    while start < len(units):
        if not offered(units[start]):  # an earlier provider's: not offered again
            result.append(units[start])
            start += 1
            continue
        stop = start
        while stop < len(units) and offered(units[stop]):
            stop += 1
        run = units[start:stop]
        result += _claimed(provider, run, units[stop:], context, kept)
        start = stop
    return result


def _claimed(provider: Provider, run: list[Unit], later: list[Unit], context: ClaimContext,
             kept: set[str]) -> list[Unit]:
    """The run with the provider's claims compiled; ``later`` units read what the run makes."""
    claims = sorted(provider.claim(run, context))
    done, result = 0, []
    for begin, end in claims:
        if not (done <= begin < end <= len(run)):
            raise PluginError(f"provider '{provider.name}' claimed steps {begin}..{end} of a run of {len(run)}, "
                              "which is out of range or overlaps another claim")
        result += run[done:begin]
        members = run[begin:end]
        after = [unit.node for unit in run[end:] + later]
        inputs, outputs = _boundary(members, after, kept)
        node = partition_node(provider, members, inputs, outputs)
        result.append(Unit(node=node, op=provider.compile(members, inputs, outputs, context.target, node)))
        done = end
    return result + run[done:]


def _boundary(members: Sequence[Unit], after: Sequence[OpNode], kept: set[str]) -> tuple[list[str], list[str]]:
    """(operands the members read but do not make, in first-use order; operands they make that a later
    node reads or the caller gets, in the order they are made)."""
    made: set[str] = set()
    inputs: list[str] = []
    for unit in members:
        for operand in unit.node.inputs:
            if operand not in made and operand not in inputs:
                inputs.append(operand)
        made.update(unit.node.outputs)
    read_later = {operand for node in after for operand in node.inputs} | kept
    outputs = [operand for unit in members for operand in unit.node.outputs if operand in read_later]
    return inputs, outputs
