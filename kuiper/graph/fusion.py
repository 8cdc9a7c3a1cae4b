"""Elementwise fusion: connected elementwise ops become ONE ``kuiper.Elementwise`` op.

An op is elementwise when its class gives its math as IR (``Op.elementwise(node)``,
see kuiper/ops/elementwise.py).  A producer joins the group of its readers when
it is elementwise, every reader is an elementwise op of that one group and reads
its value elementwise (not its shape), and its result is not a model output, so
no intermediate value is needed anywhere else.  Groups are not only chains and
trees: a value several members read (``x * x`` in a polynomial, XLA's expansion
of erf) is one member, computed once.  Each group's math is the composition of
its members' math over the group's outside inputs; the backend then compiles it
into one kernel.

Ops whose type has a kernel override on the chosen backend are never fused:
the plugin's kernel runs, fused or not.

Groups are at most ``MAX_GROUP_DEPTH`` ops deep (from the root), so a chain of 10,000 ops
becomes a sequence of fused ops rather than one expression too deep to
compile; nothing here recurses on the graph's depth.

Then a convolution whose only reader is an elementwise op (fused or single) takes
that op's math as its ``epilogue`` (``attach_epilogues``), where the backend's kernel
for the conv says it can run one (``takes_epilogue(node)``): the conv node gains
the elementwise op's other inputs and outputs, and params ``epilogue`` (the
ElementwiseMath: data, like a fused op's ``math``) and ``epilogue_operand`` (where
the conv's own result goes among the math's inputs).  The kernel runs the math on
each output plane while it is in cache; where it cannot, the conv op runs it
afterwards, as the elementwise op would have.

A Linear whose output only ``torch.chunk(y, 2, dim=-1)`` reads, whose two halves only one
two-input elementwise op reads (SwiGLU's ``silu(a) * b``), takes that op's math the same way,
with param ``epilogue_halves`` (``attach_gated_epilogues``; kuiper/ops/epilogue.py): the chunk
goes, and a kernel may compute the gate and the product as two GEMMs with post-ops.

This is a rewrite of OpNodes before ops are instantiated: it knows the op
Target's op classes and kernel overrides, nothing else about backends.
"""

from __future__ import annotations

from collections import defaultdict

from ..errors import KuiperError
from ..model_ir import OpNode
from ..ops.elementwise import FUSED_TYPE, ElementwiseMath
from .target import Target

# Ops chained in one fused group at most (a fused op's math is a tree this deep, times
# each op's own depth); deep enough that real activation chains fuse whole.
MAX_GROUP_DEPTH = 32


def elementwise_maths(order: list[OpNode], target: Target) -> dict[str, ElementwiseMath]:
    """op name -> its math, for every op fusion may touch."""
    found = {}
    for node in order:
        registered = target.ops.get(node.type)
        if registered is None or target.overrides(node.type) or len(node.outputs) != 1:
            continue
        try:
            math = registered.obj.elementwise(node)
        except KuiperError:
            continue  # bad params: the op reports its own error when it is built
        if math is not None and math.arity == len(node.inputs):
            found[node.name] = math
    return found


def producers_and_readers(order: list[OpNode]) -> tuple[dict[str, OpNode], dict[str, int]]:
    """{operand: the node making it}, {operand: how many inputs of nodes read it}."""
    producer = {operand: node for node in order for operand in node.outputs}
    readers: dict[str, int] = defaultdict(int)
    for node in order:
        for operand in node.inputs:
            readers[operand] += 1
    return producer, readers


def fuse_elementwise(
    order: list[OpNode], model_outputs: list[str], target: Target
) -> tuple[list[OpNode], list[list[str]]]:
    """Return the new op order and, for `kuiper info`, the op names merged into each fused op."""
    maths = elementwise_maths(order, target)
    producer = {operand: node for node in order for operand in node.outputs}
    readers: dict[str, list[tuple[OpNode, int]]] = defaultdict(list)  # operand -> (reader, input position)
    for node in order:
        for position, operand in enumerate(node.inputs):
            readers[operand].append((node, position))
    kept = set(model_outputs)

    # Pass 1, readers before producers: an elementwise op joins the group of its readers when they
    # all belong to one group and read its value elementwise; else it starts a group of its own.
    group_of: dict[str, str] = {}  # member -> the group's root
    depth: dict[str, int] = {}  # ops between a member and its group's root
    for node in reversed(order):
        if node.name not in maths:
            continue
        group_of[node.name], depth[node.name] = node.name, 0
        operand = node.outputs[0]
        reading = readers.get(operand, [])
        if operand in kept or not reading:
            continue
        roots = {group_of.get(reader.name) for reader, _ in reading}
        if len(roots) != 1 or None in roots:
            continue
        farthest = max(depth[reader.name] for reader, _ in reading)
        if farthest + 1 < MAX_GROUP_DEPTH and all(position not in maths[reader.name].whole_inputs
                                                  for reader, position in reading):
            group_of[node.name], depth[node.name] = roots.pop(), farthest + 1

    # Pass 2: emit every op that was not absorbed; a group root becomes one fused op.
    members: dict[str, list[OpNode]] = defaultdict(list)  # root -> its members, producers first
    for node in order:
        if node.name in group_of:
            members[group_of[node.name]].append(node)
    new_order: list[OpNode] = []
    groups: list[list[str]] = []
    for node in order:
        if group_of.get(node.name, node.name) != node.name:
            continue  # absorbed: its root computes it
        if len(members.get(node.name, ())) < 2:
            new_order.append(node)  # not elementwise, or elementwise with nothing to absorb
            continue
        fused = _fused_node(members[node.name], maths, producer)
        new_order.append(fused)
        groups.append(fused.params["members"])
    with_epilogues = attach_epilogues(new_order, model_outputs, target, maths)
    return attach_gated_epilogues(with_epilogues, model_outputs, target, maths), groups


def attach_epilogues(order: list[OpNode], model_outputs: list[str], target: Target,
                     maths: dict[str, ElementwiseMath]) -> list[OpNode]:
    """Merge each conv whose only reader is elementwise into one conv node with that math as its epilogue.

    ``maths`` are the single ops' math by name (fused ops carry theirs).  The merged node
    takes the reader's place in the order, where all of both nodes' inputs exist.  A one-input math
    may also reach its op through one rearranging op (``Op.rearranges``: a reshape, a permute) that
    only it reads, reading nothing else: ``f(reshape(dot(x, w) + b))`` is ``reshape(f(dot(x, w) + b))``
    (JAX's Dense folds its rows into one product and unfolds them after); the op then takes the math
    in its own place and the rearranging op writes the math's outputs.
    """
    producer, readers = producers_and_readers(order)
    kept = set(model_outputs)
    position_in_order = {node.name: index for index, node in enumerate(order)}
    merged_into: dict[str, OpNode] = {}  # reader name -> the conv node that replaces it
    replaced: dict[str, OpNode] = {}  # conv or rearranging op -> what stands in its place
    taken: set[str] = set()  # convs merged into a reader
    for node in order:
        math = node.params.get("math") if node.type == FUSED_TYPE else maths.get(node.name)
        if not isinstance(math, ElementwiseMath) or len(node.outputs) != 1 or math.arity != len(node.inputs):
            continue
        candidates = [
            (position_in_order[source.name], position)
            for position, operand in enumerate(node.inputs)
            for source in (producer.get(operand),)
            if source is not None
            and source.name not in taken
            and _takes_epilogue(target, source, math)
            and operand not in kept
            and readers[operand] == 1
            and position not in math.whole_inputs
        ]
        if not candidates:
            through = _through_rearranging(node, math, producer, readers, kept, target, taken)
            if through is not None:
                conv, rearranging = through
                taken.add(conv.name)
                replaced[conv.name] = _with_epilogue(conv, math, 0, [], list(conv.outputs), node)
                replaced[rearranging.name] = OpNode(
                    type=rearranging.type, name=rearranging.name, inputs=list(rearranging.inputs),
                    outputs=list(node.outputs), params=rearranging.params, attrs=rearranging.attrs,
                    input_keys=list(rearranging.input_keys), source=rearranging.source)
                merged_into[node.name] = None  # gone: the op and the rearranging op compute it
            continue
        _, operand_position = max(candidates)  # the latest conv: its output is the one still in cache
        conv = producer[node.inputs[operand_position]]
        taken.add(conv.name)
        others = [operand for position, operand in enumerate(node.inputs) if position != operand_position]
        merged_into[node.name] = _with_epilogue(conv, math, operand_position, others, list(node.outputs), node)
    new_order = []
    for node in order:
        if node.name in replaced:
            new_order.append(replaced[node.name])
        elif node.name in merged_into:
            if merged_into[node.name] is not None:
                new_order.append(merged_into[node.name])
        elif node.name not in taken:
            new_order.append(node)
    return new_order


def _with_epilogue(conv: OpNode, math: ElementwiseMath, operand_position: int, others: list[str],
                   outputs: list[str], reader: OpNode) -> OpNode:
    """``conv`` with ``math`` (read by ``reader``) as its epilogue: its inputs then ``others``, writing ``outputs``."""
    return OpNode(
        type=conv.type,
        name=conv.name,
        inputs=list(conv.inputs) + others,
        outputs=outputs,
        params={**conv.params, "epilogue": math, "epilogue_operand": operand_position,
                "epilogue_members": _members_of(reader)},
        attrs=conv.attrs,
        input_keys=list(conv.input_keys) + [None] * len(others),
        source=conv.source,
    )


def _through_rearranging(node: OpNode, math: ElementwiseMath, producer, readers, kept: set[str], target: Target,
                         taken: set[str]) -> tuple[OpNode, OpNode] | None:
    """(the op taking ``node``'s one-input math as its epilogue, the rearranging op between them), where
    ``node`` reads the op's output through one rearranging op that only it reads; else None."""
    if math.arity != 1 or math.whole_inputs:
        return None
    operand = node.inputs[0]
    rearranging = producer.get(operand)
    if rearranging is None or operand in kept or readers[operand] != 1:
        return None
    registered = target.ops.get(rearranging.type)
    if (registered is None or not getattr(registered.obj, "rearranges", False) or len(rearranging.inputs) != 1
            or len(rearranging.outputs) != 1):
        return None
    below = rearranging.inputs[0]
    conv = producer.get(below)
    if (conv is None or conv.name in taken or below in kept or readers[below] != 1
            or not _takes_epilogue(target, conv, math)):
        return None
    return conv, rearranging


def attach_gated_epilogues(order: list[OpNode], model_outputs: list[str], target: Target,
                           maths: dict[str, ElementwiseMath]) -> list[OpNode]:
    """Merge each Linear -> chunk(2, dim=-1) -> two-input elementwise op into one Linear node whose
    epilogue reads the halves of its output, where the backend's kernel takes such an epilogue
    (``takes_split_epilogue`` beside ``takes_epilogue``).  Nothing else may read the Linear's output
    or either half, and neither may be a model output."""
    producer, readers = producers_and_readers(order)
    kept = set(model_outputs)
    merged_into: dict[str, OpNode] = {}  # the elementwise op's name -> the Linear node that replaces it
    removed: set[str] = set()  # the Linear and chunk nodes merged
    for node in order:
        math = node.params.get("math") if node.type == FUSED_TYPE else maths.get(node.name)
        if not isinstance(math, ElementwiseMath) or math.arity != 2 or len(node.inputs) != 2 or math.whole_inputs:
            continue
        chunk = producer.get(node.inputs[0])
        if (chunk is None or chunk.type != "Chunk" or chunk.params.get("chunks") != 2
                or chunk.params.get("dim") != -1 or sorted(chunk.outputs) != sorted(node.inputs)
                or len(set(node.inputs)) != 2 or any(readers[half] != 1 or half in kept for half in chunk.outputs)):
            continue
        linear = producer.get(chunk.inputs[0]) if len(chunk.inputs) == 1 else None
        if (linear is None or linear.name in removed or chunk.inputs[0] in kept or readers[chunk.inputs[0]] != 1
                or "epilogue" in linear.params or not _takes_split_epilogue(target, linear)):
            continue
        removed.update((linear.name, chunk.name))
        merged_into[node.name] = OpNode(
            type=linear.type,
            name=linear.name,
            inputs=list(linear.inputs),
            outputs=list(node.outputs),
            params={**linear.params, "epilogue": math, "epilogue_operand": node.inputs.index(chunk.outputs[0]),
                    "epilogue_halves": True, "epilogue_members": [chunk.name, *_members_of(node)]},
            attrs=linear.attrs,
            input_keys=list(linear.input_keys),
            source=linear.source,
        )
    return [merged_into.get(node.name, node) for node in order if node.name not in removed]


def _takes_split_epilogue(target: Target, node: OpNode) -> bool:
    """Whether this backend's kernel for the node's type runs an epilogue of its output's halves for this node."""
    registered = target.kernels.get(node.type)
    if registered is None or not getattr(registered.obj, "takes_split_epilogue", False):
        return False
    return len(node.outputs) == 1 and registered.obj.takes_epilogue(node)


def _members_of(node: OpNode) -> list[str]:
    """The op names an elementwise node stands for (a fused node lists its members)."""
    members = node.params.get("members") if node.type == FUSED_TYPE else None
    return list(members) if isinstance(members, list) else [node.name]


def _takes_epilogue(target: Target, node: OpNode, math: ElementwiseMath) -> bool:
    """Whether this backend's kernel for the node's type runs this epilogue for this node (a kernel
    whose op has inputs of its own besides x says ``unary_epilogues_only``: no extra inputs after them;
    a class attribute, or a classmethod of the node where that depends on the node)."""
    registered = target.kernels.get(node.type)
    takes = getattr(registered.obj, "takes_epilogue", None) if registered is not None else None
    if takes is None or len(node.outputs) != 1:
        return False
    unary_only = getattr(registered.obj, "unary_epilogues_only", False)
    if callable(unary_only):
        unary_only = unary_only(node)
    return (math.arity == 1 or not unary_only) and takes(node)


def _fused_node(members: list[OpNode], maths, producer) -> OpNode:
    """One op computing the group's root (its last member) from the members, producers first: the
    group's outside inputs in first-use order, math composed, each member computed once."""
    root = members[-1]
    names = [node.name for node in members]
    inside = set(names)
    outside: list[str] = []
    for node in members:
        for operand in node.inputs:
            if producer.get(operand) is None or producer[operand].name not in inside:
                if operand not in outside:
                    outside.append(operand)
    slot = {operand: index for index, operand in enumerate(outside)}
    plan = [
        (maths[node.name], [("member", producer[operand].name) if operand not in slot else ("input", slot[operand])
                            for operand in node.inputs])
        for node in members
    ]

    def build(*inputs):
        values: dict[str, object] = {}
        for name, (math, sources) in zip(names, plan):
            args = [inputs[ref] if kind == "input" else values[ref] for kind, ref in sources]
            values[name] = math.build(*args)
        return values[names[-1]]

    whole = frozenset(
        slot[operand]
        for node in members
        for position, operand in enumerate(node.inputs)
        if position in maths[node.name].whole_inputs and operand in slot
    )
    return OpNode(
        type=FUSED_TYPE,
        name=root.name,
        inputs=outside,
        outputs=list(root.outputs),
        params={"math": ElementwiseMath(build, len(outside), whole), "members": names},
        source=root.source,
    )
