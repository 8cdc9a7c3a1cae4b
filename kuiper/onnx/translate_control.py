"""ONNX If, Scan and Loop -> the canonical If, Scan and While, their graphs as sub-graph params.

A sub-graph takes the outer values it reads as inputs after its own (``Site.subgraph``), so each op
passes them on. A Loop becomes a While whose state is (iteration, trip limit, condition, the loop's
values, the outer values the body reads, a stack per scan output).
"""

from __future__ import annotations

import numpy as np

from ..model_ir import ModelIR, OpNode, OperandInfo
from .emit import Emit
from .site import Site


def translate_if(site: Site) -> list[OpNode]:
    """The canonical If of both branches; a condition known at load time takes its branch in place, so
    what the branch computes from known values (shapes, sizes) stays known to the nodes after it."""
    if site.is_known(0):
        condition = site.constant(0, "cond").reshape(-1)
        if condition.size != 1:
            raise site.error(f"the condition must hold one element, found {condition.size}")
        key = "then_branch" if bool(condition[0]) else "else_branch"
        branch = site.graph(key)
        if len(branch.output) != len(site.outputs):
            raise site.error(f"the {key} gives {len(branch.output)} value(s), the node {len(site.outputs)}")
        ops = site.inline(key)
        for made, output in zip(branch.output, site.outputs):
            if output:
                info = site.values.infos.get(made.name)
                site.values.declare(OperandInfo(output, site.values.shape(made.name), info.dtype if info else None))
                ops.append(site.op("Identity", [made.name], [output], suffix=f"out/{output}"))
        site.values.record(ops[-len(site.outputs):])
        return ops
    branches = [site.subgraph("then_branch"), site.subgraph("else_branch")]
    for branch in branches:
        if len(branch.outputs) != len(site.outputs):
            raise site.error(f"a branch gives {len(branch.outputs)} value(s), the node {len(site.outputs)}")
    params = {"selector": "pred", "branches": branches, "branch_input_counts": [len(b.inputs) for b in branches]}
    return [site.op("If", [site.input(0), *branches[0].inputs, *branches[1].inputs], site.outputs, params)]


def translate_scan(site: Site) -> list[OpNode]:
    if site.opset < 9:
        return _translate_batched_scan(site)
    body = site.graph("body")
    sequences = site.int_("num_scan_inputs")
    states = len(site.inputs) - sequences
    outputs = len(body.output) - states
    if states < 0 or outputs < 0 or len(body.input) != len(site.inputs):
        raise site.error(f"num_scan_inputs={sequences} does not fit {len(site.inputs)} inputs and a body of "
                         f"{len(body.input)} inputs, {len(body.output)} outputs")
    lowered = site.subgraph("body")
    extras = lowered.inputs[len(body.input):]
    _declare_scan_outputs(site, lowered, states, sequences, outputs)
    params = {
        "body": lowered, "state_count": states, "sequence_count": sequences,
        "input_axes": site.ints("scan_input_axes", [0] * sequences),
        "input_reverse": site.ints("scan_input_directions", [0] * sequences),
        "output_axes": site.ints("scan_output_axes", [0] * outputs),
        "output_reverse": site.ints("scan_output_directions", [0] * outputs),
    }
    return [site.op("Scan", [*site.inputs, *extras], site.outputs, params)]


def _translate_batched_scan(site: Site) -> list[OpNode]:
    """Scan before opset 9: input 0 is sequence_lens, every other input and output has a batch dim first, and
    the body sees one batch entry. Each entry becomes its own canonical Scan (the opset-9 form over that
    entry's slices; its ``directions`` the scan inputs' directions), their results stacked along the batch
    dim. sequence_lens must be known and give every entry the whole sequence."""
    body = site.graph("body")
    sequences = site.int_("num_scan_inputs")
    inputs = site.inputs[1:]
    states = len(inputs) - sequences
    outputs = len(body.output) - states
    if states < 0 or outputs < 0 or len(body.input) != len(inputs) or not inputs:
        raise site.error(f"num_scan_inputs={sequences} does not fit {len(inputs)} inputs (after sequence_lens) and "
                         f"a body of {len(body.input)} inputs, {len(body.output)} outputs")
    batch = site.static_shape(1)[0]
    if site.has_input(0):
        steps = site.static_shape(1 + states)[1] if sequences else 0
        lengths = site.constant(0, "sequence_lens").reshape(-1)
        if lengths.shape != (batch,) or any(int(n) != steps for n in lengths):
            raise site.error(f"sequence_lens {lengths.tolist()} shorter than the sequence ({steps} steps) are not "
                             "supported")
    lowered = site.subgraph("body")
    extras = lowered.inputs[len(body.input):]
    params = {
        "body": lowered, "state_count": states, "sequence_count": sequences,
        "input_axes": [0] * sequences, "input_reverse": site.ints("directions", [0] * sequences),
        "output_axes": [0] * outputs, "output_reverse": [0] * outputs,
    }
    emit = Emit(site)
    per_entry: list[list[str]] = [[] for _ in site.outputs]
    for entry in range(batch):
        sliced = []
        for position, name in enumerate(inputs, start=1):
            shape = list(site.static_shape(position))
            row = emit.op("Slice", [name], {"starts": [entry] + [0] * (len(shape) - 1),
                                           "limits": [entry + 1] + shape[1:]}, dtype=site.dtype(position))
            sliced.append(emit.op("Squeeze", [row], {"dim": [0]}, dtype=site.dtype(position)))
        results = [site.temporary(f"entry{entry}_{k}", lowered.operands[lowered.outputs[k]].dtype
                                  if lowered.outputs[k] in lowered.operands else None)
                   for k in range(len(site.outputs))]
        emit.op_many("Scan", [*sliced, *extras], results, params)
        for k, result in enumerate(results):
            per_entry[k].append(emit.op("Unsqueeze", [result], {"dim": 0}, dtype=emit.dtype(result)))
    for k, name in enumerate(site.outputs):
        if name:
            emit.op("Concat", per_entry[k], {"dim": 0}, dtype=emit.dtype(per_entry[k][0]), out=name)
    return emit.ops


def _declare_scan_outputs(site: Site, lowered: ModelIR, states: int, sequences: int, outputs: int) -> None:
    """What is known of the Scan's outputs: the states keep the body's shapes; a stacked output has the
    body's per-step shape with the number of steps inserted at its axis."""
    steps = None
    axes = site.ints("scan_input_axes", [0] * sequences)
    first = site.shape(states) if sequences else None
    if first is not None and axes:
        steps = first[axes[0] % len(first)]
    output_axes = site.ints("scan_output_axes", [0] * outputs)
    for position, name in enumerate(site.outputs):
        if not name:
            continue
        body_info = lowered.operands.get(lowered.outputs[position])
        if body_info is None or body_info.shape is None or body_info.dtype is None:
            continue
        shape = list(body_info.shape)
        if position >= states:
            axis = output_axes[position - states] % (len(shape) + 1)
            shape.insert(axis, steps)
        site.values.declare(OperandInfo(name, tuple(shape), body_info.dtype))


def _elementwise(name: str, function: str, inputs: list[str], dtypes: list[str], dtype: str, **extra) -> OpNode:
    params = {"function": function, "operand_dtypes": dtypes, "dtype": dtype, **extra}
    return OpNode("Elementwise", name, inputs, [name], params)


def _unknown(graph: ModelIR, name: str) -> bool:
    info = graph.operands.get(name)
    return info is None or info.shape is None or None in info.shape or info.dtype is None


def _with_steady_shapes(site: Site, body, carried: int) -> ModelIR | None:
    """The body lowered again with each loop value's shape taken from its initial value, where the body
    declares none; kept only if the body then gives every loop value back with that same shape, which by
    induction holds on every iteration (ONNX lets a loop value change shape, so this is checked, not assumed)."""
    seeded = type(body)()
    seeded.CopyFrom(body)
    shapes = {}
    for position, value in enumerate(seeded.input):
        outer = () if position < 2 else site.shape(position) if site.has_input(position) else None
        tensor = value.type.tensor_type
        if tensor.HasField("shape") or outer is None or None in outer or position >= 2 + carried:
            continue
        tensor.shape.SetInParent()  # a known rank, even 0
        for size in outer:
            tensor.shape.dim.add().dim_value = size
        shapes[position] = tuple(outer)
    if not any(position >= 2 for position in shapes):
        return None
    lowered = site.lower_subgraph(seeded)
    for position, shape in shapes.items():
        if position >= 2 and (_unknown(lowered, lowered.outputs[position - 1])
                              or tuple(lowered.operands[lowered.outputs[position - 1]].shape) != shape):
            return None
    return lowered


def translate_loop(site: Site) -> list[OpNode]:
    """A While over (iteration, trip limit, condition, the loop's values, outer values read, and one growing
    stack per scan output: each step appends its slice along a new first dim)."""
    body = site.graph("body")
    carried = len(body.input) - 2
    scanned = len(body.output) - 1 - carried
    if carried < 0 or scanned < 0:
        raise site.error("the body must take (iteration, condition, values...) and give (condition, values...)")
    lowered = site.subgraph("body")
    if any(_unknown(lowered, name) for name in lowered.outputs[1 + carried:]):
        lowered = _with_steady_shapes(site, body, carried) or lowered
    extras = lowered.inputs[len(body.input):]
    emit = Emit(site)
    limit = site.input(0) if site.has_input(0) else emit.const(np.iinfo(np.int64).max, "int64")
    condition = site.input(1) if site.has_input(1) else emit.const(True, "bool")
    slices = lowered.outputs[1 + carried:]
    empty = []
    for name in slices:  # each stack starts with no slices: (0, *the slice's shape)
        info = lowered.operands.get(name)
        if _unknown(lowered, name):
            raise site.error(f"the scan output '{name}' has no static shape, which its stack needs")
        empty.append(emit.const(np.zeros((0, *info.shape), dtype=info.dtype), info.dtype))
    state = [emit.const(0, "int64"), limit, condition, *site.inputs[2:2 + carried], *extras, *empty]
    dtypes = [emit.dtype(name) for name in state]
    operands = {f"s{i}": OperandInfo(f"s{i}", None, dtype) for i, dtype in enumerate(dtypes)}

    # condition(state): condition and iteration < limit
    below = _elementwise("below", "compare", ["s0", "s1"], ["int64", dtypes[1]], "bool", direction="lt")
    keep = _elementwise("keep", "and", ["below", "s2"], ["bool", dtypes[2]], "bool")
    check = ModelIR([below, keep], {**operands, "below": OperandInfo("below", None, "bool"),
                                    "keep": OperandInfo("keep", None, "bool")}, list(operands), ["keep"], site.source)

    # body(state): the ONNX body on (iteration, condition, values, extras); the iteration counts up. The names
    # this adds to the body's own start with "while/", which keeps them apart from the body's ONNX names.
    iteration, condition_in = lowered.inputs[0], lowered.inputs[1]
    stacks = [f"while/stack{k}" for k in range(scanned)]
    names = [iteration, "while/limit", condition_in, *lowered.inputs[2:], *stacks]
    one = OpNode("Constant", "while/one", [], ["while/one"], {}, {"data": np.asarray(1, dtype=np.int64)})
    step = _elementwise("while/next_iteration", "add", [iteration, "while/one"], ["int64", "int64"], "int64")
    passed = [OpNode("Identity", f"{name}/next", [name], [f"{name}/next"]) for name in ["while/limit", *extras]]
    grown = []
    for stack, piece in zip(stacks, slices):
        grown += [OpNode("Unsqueeze", f"{stack}/slice", [piece], [f"{stack}/slice"], {"dim": 0}),
                  OpNode("Concat", f"{stack}/next", [stack, f"{stack}/slice"], [f"{stack}/next"], {"dim": 0})]
    made = [node.outputs[0] for node in (*passed, *grown)]
    wrapper_operands = {**lowered.operands, "while/limit": OperandInfo("while/limit", None, dtypes[1]),
                        "while/one": OperandInfo("while/one", (), "int64"),
                        "while/next_iteration": OperandInfo("while/next_iteration", (), "int64"),
                        **{name: OperandInfo(name) for name in (*stacks, *made)}}
    outputs = ["while/next_iteration", "while/limit/next", *lowered.outputs[:1 + carried],
               *[f"{name}/next" for name in extras], *[f"{stack}/next" for stack in stacks]]
    wrapped = ModelIR([*lowered.ops, one, step, *passed, *grown], wrapper_operands, names, outputs, site.source)

    results = [site.temporary("iteration", "int64"), site.temporary("limit", dtypes[1]),
               site.temporary("condition", "bool"), *site.outputs[:carried],
               *[site.temporary(f"extra{i}", emit.dtype(name)) for i, name in enumerate(extras)],
               *[site.outputs[carried + k] if site.has_output(carried + k) else site.temporary(f"stacked{k}", dtype)
                 for k, dtype in enumerate(dtypes[len(dtypes) - scanned:])]]
    emit.op_many("While", state, results, {"condition": check, "body": wrapped})
    return emit.ops


TRANSLATORS = {"If": translate_if, "Scan": translate_scan, "Loop": translate_loop}
