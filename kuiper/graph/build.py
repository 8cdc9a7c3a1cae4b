"""ModelIR -> Model: check op types, order, fold constants, fuse, build sub-graphs, instantiate on one
Target (the backend resolved once, kuiper/graph/target.py), offer runs to its providers, plan lifetimes.

A param that holds a ModelIR (or a list of them) is a sub-graph: a loop body, a reducer,
a branch.  It is built here, on the same backend, before the op that uses it is made, and
handed to that op; ops themselves never build graphs.
"""

from __future__ import annotations

from collections import defaultdict

from ..backends.base import NUMPY_ARRAYS, OUT_BUFFERS, Backend
from ..errors import UnsupportedOperatorError
from ..ir import dtypes
from ..limits import check_size
from ..model_ir import ModelIR, OpNode
from .build_order import topological_order
from .channels_last import write_channels_last
from .constant_fold import fold_constants
from .constant_subgraphs import fold_constant_subgraphs
from .bias_inputs import fold_bias_inputs
from .conv_crop import fold_crops_into_convs
from .fusion import fuse_elementwise
from .heap import keep_freed_memory
from .hoist import hoist_unary_elementwise
from .kept_weights import hand_over_weights
from .loop_invariants import hoist_loop_invariants
from .model import Model, TensorSpec
from .native_layouts import agree_on_layouts
from .nested_joins import join_nested_concats
from .patch_convs import convs_as_patch_products
from .plan import Step
from .providers import Unit, offer_to_providers
from .row_normalizations import fuse_row_normalizations
from .shape_chains import drop_shape_no_ops
from .sibling_convs import merge_sibling_convs
from .slice_groups import join_slices
from .target import Target, resolve_target
from .transposes import move_transposes_down


def check_supported(ir: ModelIR, target: Target) -> None:
    """Raise ONE error listing every unknown op type with the ops that use it."""
    unknown: dict[str, list[str]] = defaultdict(list)
    for node in ir.ops:
        if not target.knows(node.type):
            unknown[node.type].append(_named_with_place(node, ir.source))
    if unknown:
        lines = [f"  {op_type}: used by {', '.join(names)}" for op_type, names in sorted(unknown.items())]
        raise UnsupportedOperatorError(
            f"{ir.source or 'model'}: {len(unknown)} op type(s) are not supported by kuiper or any installed plugin:\n"
            + "\n".join(lines)
            + "\n(`kuiper ops` lists the supported types; plugins add more)"
        )


def _named_with_place(node: OpNode, model_source: str) -> str:
    """``f1 (line 4)`` when the node comes from the model's own file, else ``f1 (other.file:4)``."""
    if not node.source:
        return node.name
    place = node.source.removeprefix(f"{model_source}:") if model_source else node.source
    return f"{node.name} (line {place})" if place != node.source else f"{node.name} ({place})"


def check_declared_sizes(ir: ModelIR) -> None:
    """Refuse, before anything is built, a graph whose declared operand shapes exceed the size budget."""
    for info in ir.operands.values():
        if info.shape and all(isinstance(d, int) for d in info.shape) and info.dtype:
            try:
                itemsize = dtypes.itemsize(info.dtype)
            except KeyError:
                continue  # a dtype name kuiper does not know: its ops check what they make
            check_size(info.shape, itemsize, f"{ir.source or 'model'}: operand '{info.name}' as declared")


def _tensor_spec(ir: ModelIR, operand: str) -> TensorSpec:
    info = ir.operands.get(operand)
    return TensorSpec(operand, info.shape if info else None, info.dtype if info else None)


def build_subgraphs(node: OpNode, target: Target, fuse: bool, providers: bool) -> dict:
    """Each sub-graph param of ``node`` built as a Model on ``target`` (a list param: a list of Models); a
    While's body as one whose state the loop owns (``build``'s ``carries_state``)."""
    built: dict = {}
    for key, value in node.params.items():
        if isinstance(value, ModelIR):
            built[key] = build(value, target, fuse, providers, carries_state=node.type == "While" and key == "body")
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, ModelIR) for v in value):
            built[key] = [build(v, target, fuse, providers) for v in value]
    return built


def instantiate(node: OpNode, target: Target, fuse: bool = True, providers: bool = True):
    op_class = target.op_class(node.type)
    subgraphs = build_subgraphs(node, target, fuse, providers)
    if subgraphs:
        return op_class(node, target.backend, subgraphs=subgraphs)
    return op_class(node, target.backend)


def _lend_dead_buffers(steps: list[Step], keep: set[str], owned: frozenset[str] = frozenset()) -> None:
    """Tell each op which inputs it may overwrite.

    An input is lent when this op is its ONLY reader (so no other op can have taken a
    view of it, e.g. a reshape whose result lives on), it is not a model output, and it
    was made by an op whose outputs are always fresh arrays.  Feeds are never lent:
    they belong to the caller, except ``owned`` ones (a loop's state that the loop copied for itself).
    """
    fresh = _fresh_operands(steps) | owned
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


def _fresh_operands(steps: list[Step]) -> set[str]:
    """The operands made by ops whose outputs are always fresh arrays (``Op.fresh_output``)."""
    return {operand for step in steps if step.op.fresh_output for operand in step.node.outputs}


def _owned_state(ir: ModelIR, steps: list[Step], outputs: list[str]) -> frozenset[str]:
    """The inputs of a loop body that the loop may hand it as arrays of its own: input i where output i is
    a fresh array (an op's ``fresh_output``) returned once.  The loop copies such a value once when it
    starts (While.forward); after that each iteration's value is the array the last one made, which
    nothing else holds, so an op may overwrite it: a scan's ``ys[t] = y`` in place, where a copy of the
    whole ``ys`` at every step made the loop quadratic in its length."""
    if len(ir.inputs) != len(outputs) or len(set(ir.inputs)) != len(ir.inputs):
        return frozenset()
    fresh = _fresh_operands(steps)
    made_from_nothing = {operand for step in steps if not step.node.inputs for operand in step.node.outputs}
    if not all(result in fresh or result in ir.inputs or result in made_from_nothing for result in outputs):
        return frozenset()  # an output may be a view of another (a reshape of it): overwriting one changes both
    return frozenset(name for name, result in zip(ir.inputs, outputs)
                     if result in fresh and outputs.count(result) == 1 and result not in ir.inputs)


def _instantiate_on_device(node: OpNode, target: Target, fuse: bool, providers: bool):
    """Instantiate, turning device failures (weights that do not fit) into KuiperErrors."""
    try:
        return instantiate(node, target, fuse, providers)
    except Exception as exc:
        translated = target.backend.device_error(exc)
        if translated is not None:
            raise translated from exc
        raise


def build(ir: ModelIR, backend: str | Backend | Target | None = None, fuse: bool = True,
          providers: bool = True, carries_state: bool = False) -> Model:
    """Build a runnable Model bound to one backend (see kuiper.config for how None is resolved).

    ``fuse=False`` keeps every elementwise op separate; ``providers=False`` leaves every step to its op
    (no partitions: kuiper/graph/providers.py).  Sub-graphs are built the same way.  ``carries_state``:
    the graph is a loop's body, whose input i becomes its output i at the next iteration; the inputs
    it may then overwrite are the Model's ``owned_inputs`` (``_owned_state``).
    """
    ir = ir.copy()  # the passes, and the Model letting go of weights, change the copy only
    target = resolve_target(backend)
    backend = target.backend
    check_supported(ir, target)
    check_declared_sizes(ir)
    output_operands = list(ir.outputs)
    order = topological_order(ir, output_operands)
    fused_groups: list[list[str]] = []
    if fuse:
        order = fold_crops_into_convs(order, ir.operands, output_operands)
        order = drop_shape_no_ops(order, ir.operands, output_operands)
        order = fuse_row_normalizations(order, ir.operands, output_operands)
        order = hoist_loop_invariants(order, ir.operands)
        order = fold_constant_subgraphs(order, output_operands)
        order = fold_constants(order, ir.operands, output_operands, target)
        order = merge_sibling_convs(order, output_operands, target)
        order = fold_bias_inputs(order, ir.operands, output_operands, target)
        order = convs_as_patch_products(order, ir.operands)
        order = hoist_unary_elementwise(order, output_operands, target, ir.operands)
        order = move_transposes_down(order, output_operands)
        order = join_slices(order, ir.operands)
        order, fused_groups = fuse_elementwise(order, output_operands, target)
        order = join_nested_concats(order, output_operands)

    units = [Unit(node, _instantiate_on_device(node, target, fuse, providers)) for node in order]
    if providers:
        units = offer_to_providers(units, target, output_operands, ir.operands)
    compute = [unit.node for unit in units]
    slot_of: dict[str, int] = {operand: slot for slot, operand in enumerate(ir.inputs)}
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
            op=unit.op,
            node=unit.node,
            input_slots=tuple(slot_of[o] for o in unit.node.inputs),
            output_slots=tuple(slot_of[o] for o in unit.node.outputs),
            free_slots=tuple(frees[i]),
        )
        for i, unit in enumerate(units)
    ]
    owned_inputs: tuple[int, ...] = ()
    if OUT_BUFFERS in backend.capabilities:
        owned = _owned_state(ir, steps, output_operands) if carries_state else frozenset()
        _lend_dead_buffers(steps, keep, owned)
        lent = {step.node.inputs[position] for step in steps for position in step.op.donated_inputs}
        owned_inputs = tuple(position for position, operand in enumerate(ir.inputs) if operand in owned & lent)
    agree_on_layouts(steps, keep)
    if NUMPY_ARRAYS in backend.capabilities:
        write_channels_last(steps, keep, ir.operands)
        keep_freed_memory()  # activations live in the process heap: keep it between calls
    hand_over_weights([(step.node, step.op) for step in steps], ir)
    return Model(
        backend=backend,
        inputs=[_tensor_spec(ir, operand) for operand in ir.inputs],
        outputs=[_tensor_spec(ir, operand) for operand in output_operands],
        input_slots=[slot_of[operand] for operand in ir.inputs],
        output_slots=[slot_of[operand] for operand in output_operands],
        slot_count=len(slot_of),
        steps=steps,
        source=ir.source,
        fused_groups=fused_groups,
        ir=ir,
        owned_inputs=owned_inputs,
    )
