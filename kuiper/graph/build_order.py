"""The order a graph's ops run in: every operand made once, every op after what it reads."""

from __future__ import annotations

import heapq
from collections import defaultdict

from ..errors import GraphError
from ..model_ir import ModelIR, OpNode


def check_operands(ir: ModelIR) -> dict[str, int]:
    """Every operand has one producer (an op or a model input); returns operand -> op index."""
    where = ir.source or "model"
    producer: dict[str, int] = {}
    fed = set(ir.inputs)
    if len(fed) != len(ir.inputs):
        raise GraphError(f"{where}: an input operand is declared twice in {ir.inputs}")
    for index, node in enumerate(ir.ops):
        for operand in node.outputs:
            if operand in producer or operand in fed:
                raise GraphError(f"{where}: operand '{operand}' is produced twice (again by {node.describe()})")
            producer[operand] = index
    for node in ir.ops:
        for operand in node.inputs:
            if operand not in producer and operand not in fed:
                raise GraphError(f"{where}: {node.describe()} reads operand '{operand}', which nothing produces")
    for operand in ir.outputs:
        if operand not in producer and operand not in fed:
            raise GraphError(f"{where}: model output '{operand}' is not produced by any op or input")
    return producer


def topological_order(ir: ModelIR, roots: list[str]) -> list[OpNode]:
    """Ops ordered so every input is computed first; file order breaks ties.

    Only ops that the ``roots`` operands (the model outputs) depend on are kept.
    """
    producer = check_operands(ir)
    needed: set[int] = set()
    stack = [producer[operand] for operand in roots if operand in producer]
    while stack:
        index = stack.pop()
        if index in needed:
            continue
        needed.add(index)
        stack.extend(producer[operand] for operand in ir.ops[index].inputs if operand in producer)

    waiting = {i: len({producer[o] for o in ir.ops[i].inputs if o in producer}) for i in needed}
    consumers: dict[int, set[int]] = defaultdict(set)
    for i in needed:
        for operand in ir.ops[i].inputs:
            if operand in producer:
                consumers[producer[operand]].add(i)
    ready = [i for i, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    order: list[OpNode] = []
    while ready:
        index = heapq.heappop(ready)
        order.append(ir.ops[index])
        for consumer in consumers[index]:
            waiting[consumer] -= 1
            if waiting[consumer] == 0:
                heapq.heappush(ready, consumer)
    if len(order) != len(needed):
        done = {id(node) for node in order}
        stuck = sorted(i for i in needed if id(ir.ops[i]) not in done)
        names = ", ".join(f"'{ir.ops[i].name}' ({ir.ops[i].source})" for i in stuck[:5])
        raise GraphError(f"{ir.source or 'model'}: the graph has a cycle through op(s) {names}")
    return order
