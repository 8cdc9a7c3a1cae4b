"""ModelIR -> Model: check op types, order, fuse, instantiate on one backend, plan lifetimes."""

from __future__ import annotations

import heapq
from collections import defaultdict

from ..backends import get_backend
from ..backends.base import Backend
from ..errors import GraphError, UnsupportedOperatorError
from ..model_ir import ModelIR, OpNode
from ..plugins import kernel_registry, op_registry
from .model import Model, Step, TensorSpec


def check_supported(ir: ModelIR, backend_name: str) -> None:
    """Raise ONE error listing every unknown op type with the ops that use it."""
    registry = op_registry()
    kernels = kernel_registry(backend_name)
    unknown: dict[str, list[str]] = defaultdict(list)
    for node in ir.ops:
        if node.type not in registry and node.type not in kernels:
            unknown[node.type].append(node.name)
    if unknown:
        lines = [f"  {op_type}: used by {', '.join(names)}" for op_type, names in sorted(unknown.items())]
        raise UnsupportedOperatorError(
            f"{ir.source or 'model'}: {len(unknown)} op type(s) are not supported by kuiper or any installed plugin:\n"
            + "\n".join(lines)
            + "\n(`kuiper ops` lists the supported types; plugins add more)"
        )


TUPLE_TYPES = ("prim::TupleConstruct", "prim::ListConstruct")


def model_output_operands(ir: ModelIR) -> list[str]:
    """The operands the model returns, in pnnx.Output order.

    PNNX returns several tensors as one tuple (prim::TupleConstruct, possibly
    nested) feeding one pnnx.Output; the tuple is flattened so every tensor is
    a named output with its declared shape.
    """
    producer = {operand: node for node in ir.ops for operand in node.outputs}

    def flatten(operand: str) -> list[str]:
        node = producer.get(operand)
        if node is not None and node.type in TUPLE_TYPES:
            return [leaf for item in node.inputs for leaf in flatten(item)]
        return [operand]

    return [leaf for node in ir.ops if node.type == "pnnx.Output" for operand in node.inputs for leaf in flatten(operand)]


def topological_order(ir: ModelIR, roots: list[str]) -> list[OpNode]:
    """Ops ordered so every input is computed first; file order breaks ties.

    Only ops that the ``roots`` operands (the model outputs) depend on are kept.
    """
    producer = {operand: index for index, node in enumerate(ir.ops) for operand in node.outputs}
    needed: set[int] = set()
    stack = [producer[operand] for operand in roots]
    while stack:
        index = stack.pop()
        if index in needed:
            continue
        needed.add(index)
        stack.extend(producer[operand] for operand in ir.ops[index].inputs)
    # Inputs are always kept so feeds can be checked even if unused.
    needed.update(i for i, node in enumerate(ir.ops) if node.type == "pnnx.Input")

    waiting = {i: len({producer[o] for o in ir.ops[i].inputs}) for i in needed}
    consumers: dict[int, set[int]] = defaultdict(set)
    for i in needed:
        for operand in ir.ops[i].inputs:
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
        stuck = sorted(set(needed) - {ir.ops.index(node) for node in order})
        names = ", ".join(f"'{ir.ops[i].name}' ({ir.ops[i].source})" for i in stuck[:5])
        raise GraphError(f"{ir.source or 'model'}: the graph has a cycle through op(s) {names}")
    return order


def _tensor_spec(ir: ModelIR, operand: str) -> TensorSpec:
    info = ir.operands.get(operand)
    return TensorSpec(operand, info.shape if info else None, info.dtype if info else None)


def instantiate(node: OpNode, backend: Backend):
    kernels = kernel_registry(backend.name)
    registered = kernels.get(node.type) or op_registry()[node.type]
    return registered.obj(node, backend)


def _lend_dead_buffers(steps: list[Step], keep: set[str]) -> None:
    """Tell each op which inputs it may overwrite.

    An input is lent when this op is its ONLY reader (so no other op can have taken a
    view of it, e.g. a reshape whose result lives on), it is not a model output, and it
    was made by an op whose outputs are always fresh arrays.  Feeds are never lent:
    they belong to the caller.
    """
    fresh = {operand for step in steps if step.op.fresh_output for operand in step.node.outputs}
    reads: dict[str, int] = defaultdict(int)
    for step in steps:
        for operand in step.node.inputs:
            reads[operand] += 1
    for step in steps:
        step.op.donated_inputs = frozenset(
            position
            for position, operand in enumerate(step.node.inputs)
            if operand in fresh and operand not in keep and reads[operand] == 1
        )


def _instantiate_on_device(node: OpNode, backend: Backend):
    """Instantiate, turning device failures (weights that do not fit) into KuiperErrors."""
    try:
        return instantiate(node, backend)
    except Exception as exc:
        translated = backend.device_error(exc)
        if translated is not None:
            raise translated from exc
        raise


def build(ir: ModelIR, backend: str | Backend | None = None, fuse: bool = True) -> Model:
    """Build a runnable Model bound to one backend (see kuiper.config for how None is resolved)."""
    backend = backend if isinstance(backend, Backend) else get_backend(backend)
    check_supported(ir, backend.name)
    output_operands = model_output_operands(ir)
    order = topological_order(ir, output_operands)
    fused_groups: list[list[str]] = []
    if fuse:
        from .fusion import fuse_elementwise

        order, fused_groups = fuse_elementwise(order, output_operands)

    inputs = [node for node in order if node.type == "pnnx.Input"]
    compute = [node for node in order if node.type not in ("pnnx.Input", "pnnx.Output")]

    slot_of: dict[str, int] = {}
    for node in inputs:
        for operand in node.outputs:
            slot_of[operand] = len(slot_of)
    for node in compute:
        for operand in node.outputs:
            slot_of[operand] = len(slot_of)

    # The last step reading each slot frees it, unless it is a model output.
    last_use: dict[str, int] = {}
    for step_index, node in enumerate(compute):
        for operand in node.inputs:
            last_use[operand] = step_index
    frees: dict[int, list[int]] = defaultdict(list)
    keep = set(output_operands)
    for operand, step_index in last_use.items():
        if operand not in keep:
            frees[step_index].append(slot_of[operand])
    # Values nobody reads (unused outputs of multi-output ops) are dropped right away.
    for step_index, node in enumerate(compute):
        for operand in node.outputs:
            if operand not in last_use and operand not in keep:
                frees[step_index].append(slot_of[operand])

    steps = [
        Step(
            op=_instantiate_on_device(node, backend),
            node=node,
            input_slots=tuple(slot_of[o] for o in node.inputs),
            output_slots=tuple(slot_of[o] for o in node.outputs),
            free_slots=tuple(frees[i]),
        )
        for i, node in enumerate(compute)
    ]
    _lend_dead_buffers(steps, keep)
    return Model(
        backend=backend,
        inputs=[_tensor_spec(ir, node.outputs[0]) for node in inputs if node.outputs],
        outputs=[_tensor_spec(ir, operand) for operand in output_operands],
        input_slots=[slot_of[node.outputs[0]] for node in inputs if node.outputs],
        output_slots=[slot_of[operand] for operand in output_operands],
        slot_count=len(slot_of),
        steps=steps,
        source=ir.source,
        fused_groups=fused_groups,
        ir=ir,
    )
