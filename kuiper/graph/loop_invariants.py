"""Work a loop's body repeats on values the loop never changes moves out of the loop.

A While's state holds what its body reads; state that the body returns untouched (its output i
is its input i) is the same at every iteration: JAX threads a scanned function's weights
through the loop that way, and the body of a Flax LSTM concatenates its four gate kernels
from them at every step.  An op of the body whose inputs are all such invariants (or
constants, or the results of ops moved before it) computes the same thing every time, so it
runs once before the loop instead: its results enter the loop as new state that the body
returns untouched, and its readers in the body read that state.  XLA's while-loop invariant
code motion does the same.

What stays in the loop: ops with sub-graphs, ops that draw random numbers, and ops whose result
is larger than their inputs (a broadcast), which would hold more memory across the loop than
they save (XLA keeps those in too).

A constant that only the start indexes of dynamic slices in the loop read (jax's ``xs[i]`` and
``ys.at[i].set(y)`` start at ``(i, 0, 0)``) leaves the loop too, as new state the body returns
untouched: a step of its own in the body cost 0.35 us an iteration (two of a Flax LSTM's
fourteen steps), a value more in the state next to nothing.  Constants that other ops read stay:
the fusion pass writes those into the elementwise math that reads them (a counter's ``i + 1``),
and the build folds the ops that read only constants.

A loop that runs no iteration still runs what moved out; ops are pure, so only the time differs.
Like the fusion pass, this rewrites OpNodes before ops are instantiated; the outer graph's operand
facts gain the moved values'.
"""

from __future__ import annotations

import math

from ..model_ir import ModelIR, OperandInfo, OpNode
from .build_order import topological_order

STAYS_IN = frozenset({"RandomBits", "RandomNumbers"})  # a fresh draw at every iteration
# Ops that read their inputs from this position on as start indexes, whole (never fused into other math).
START_INDEXES = {"DynamicSlice": 1, "DynamicUpdateSlice": 2}


def hoist_loop_invariants(order: list[OpNode], operands: dict[str, OperandInfo]) -> list[OpNode]:
    """The op order with each While's invariant work moved in front of it."""
    result: list[OpNode] = []
    taken = {operand for node in order for operand in (*node.inputs, *node.outputs)} | set(operands)
    node_names = {node.name for node in order}
    for node in order:
        if node.type == "While":
            moved, node = _hoist(node, operands, taken, node_names)
            result.extend(moved)
        result.append(node)
    return result


def _hoist(loop: OpNode, operands: dict[str, OperandInfo], taken: set[str],
           node_names: set[str]) -> tuple[list[OpNode], OpNode]:
    """(the ops moved out of ``loop``, renamed for the outer graph; the loop that reads their results)."""
    body, condition = loop.params.get("body"), loop.params.get("condition")
    if not isinstance(body, ModelIR) or not isinstance(condition, ModelIR):
        return [], loop
    if not (len(body.inputs) == len(body.outputs) == len(loop.inputs) == len(condition.inputs)):
        return [], loop  # the op's own checks report it
    outside = {name: loop.inputs[i] for i, name in enumerate(body.inputs) if body.outputs[i] == name}
    body_order = topological_order(body, body.outputs)
    moved, constants = _movable(body, body_order, set(outside)) if outside else ([], [])
    indexes = _start_index_constants(body_order)
    if not moved and not indexes:
        return [], loop
    moved_names = {node.name for node in (*moved, *indexes)}
    staying = [node for node in body_order if node.name not in moved_names]
    read_inside = {operand for node in staying for operand in node.inputs} | set(body.outputs)
    carried = [operand for node in (*moved, *indexes) for operand in node.outputs if operand in read_inside]
    constants = [node for node in constants if node.name not in moved_names]

    renamed = dict(outside)  # body operand -> its name in the outer graph
    for node in (*indexes, *constants, *moved):
        for operand in node.outputs:
            if operand not in outside:
                renamed[operand] = _fresh(f"{loop.name}/{operand}", taken)
                _copy_info(body.operands, operand, operands, renamed[operand])
    outer_ops = [_renamed(node, renamed, _fresh(f"{loop.name}/{node.name}", node_names))
                 for node in (*indexes, *constants, *moved)]

    # The carried values are new state: the body takes and returns them, the condition takes them unread.
    extra_outputs = [_fresh(f"{loop.name}/{operand}.after", taken) for operand in carried]
    unread = [_fresh(f"{loop.name}/{operand}.unread", taken) for operand in carried]
    for name, operand in zip(extra_outputs, carried):
        _copy_info(body.operands, operand, operands, name)
    new_body = ModelIR(ops=staying, operands=dict(body.operands), inputs=[*body.inputs, *carried],
                       outputs=[*body.outputs, *carried], source=body.source)
    condition_operands = dict(condition.operands)
    for name, operand in zip(unread, carried):
        _copy_info(body.operands, operand, condition_operands, name)
    new_condition = ModelIR(ops=list(condition.ops), operands=condition_operands,
                            inputs=[*condition.inputs, *unread], outputs=list(condition.outputs),
                            source=condition.source)
    new_loop = OpNode(type=loop.type, name=loop.name, inputs=[*loop.inputs, *(renamed[o] for o in carried)],
                      outputs=[*loop.outputs, *extra_outputs],
                      params={**loop.params, "body": new_body, "condition": new_condition},
                      attrs=loop.attrs, input_keys=[*loop.input_keys, *([None] * len(carried))], source=loop.source)
    return outer_ops, new_loop


def _movable(body: ModelIR, body_order: list[OpNode], invariant: set[str]) -> tuple[list[OpNode], list[OpNode]]:
    """(the body's ops that may run once before the loop, in order; the constants they read, to copy out).
    ``invariant``: the body inputs it returns untouched; it grows by what the moved ops and constants make."""
    moved: list[OpNode] = []
    for node in body_order:
        if node.inputs and all(operand in invariant for operand in node.inputs) and _may_move(node, body):
            moved.append(node)
            invariant.update(node.outputs)
        elif not node.inputs and not _has_subgraph(node) and node.type not in STAYS_IN:
            invariant.update(node.outputs)  # a constant: copied out where a moved op reads it
    read_by_moved = {operand for node in moved for operand in node.inputs}
    constants = [node for node in body_order if not node.inputs and set(node.outputs) & read_by_moved]
    return moved, constants


def _start_index_constants(body_order: list[OpNode]) -> list[OpNode]:
    """The body's constants that only dynamic slices read, each as a start index (``START_INDEXES``)."""
    readings: dict[str, list[bool]] = {}
    for node in body_order:
        first = START_INDEXES.get(node.type)
        for position, operand in enumerate(node.inputs):
            readings.setdefault(operand, []).append(first is not None and position >= first)
    return [node for node in body_order
            if not node.inputs and len(node.outputs) == 1 and not _has_subgraph(node) and node.type not in STAYS_IN
            and readings.get(node.outputs[0]) and all(readings[node.outputs[0]])]


def _copy_info(source: dict[str, OperandInfo], operand: str, target: dict[str, OperandInfo], name: str) -> None:
    """What ``source`` says of ``operand``, under ``name`` in ``target`` (nothing where it says nothing)."""
    info = source.get(operand)
    if info is not None:
        target[name] = OperandInfo(name, info.shape, info.dtype)


def _may_move(node: OpNode, body: ModelIR) -> bool:
    """Whether ``node`` (all of whose inputs are invariant) runs once outside the loop: it is pure, has no
    sub-graph, and its results are no larger than its inputs (where the sizes are declared)."""
    if node.type in STAYS_IN or _has_subgraph(node):
        return False
    sizes_in = [_size(body, operand) for operand in node.inputs]
    sizes_out = [_size(body, operand) for operand in node.outputs]
    if None in sizes_in or None in sizes_out:
        return False
    return sum(sizes_out) <= sum(sizes_in)


def _size(graph: ModelIR, operand: str) -> int | None:
    info = graph.operands.get(operand)
    if info is None or info.shape is None or any(dim is None for dim in info.shape):
        return None
    return math.prod(info.shape)


def _has_subgraph(node: OpNode) -> bool:
    return any(isinstance(value, ModelIR) or (isinstance(value, (list, tuple)) and value
                                              and all(isinstance(v, ModelIR) for v in value))
               for value in node.params.values())


def _renamed(node: OpNode, renamed: dict[str, str], name: str) -> OpNode:
    return OpNode(type=node.type, name=name, inputs=[renamed[o] for o in node.inputs],
                  outputs=[renamed[o] for o in node.outputs], params=node.params, attrs=node.attrs,
                  input_keys=list(node.input_keys), source=node.source)


def _fresh(name: str, taken: set[str]) -> str:
    """``name``, primed until no operand of the graph has it."""
    while name in taken:
        name += "'"
    taken.add(name)
    return name
