"""An ONNX ModelProto -> ModelIR: initializers as Constant ops, each node through its family's translator.

Shape inference (ONNX's own, with data propagation) first gives every value its element type and
what is known of its shape; an unknown dim is a free dim (None). Node order is the file's (ONNX
requires it to be topological); kuiper's graph orders and prunes again.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import KuiperError, ModelFormatError, UnsupportedOperatorError
from ..model_ir import ModelIR, OpNode, OperandInfo
from . import partial_shapes
from .functions import expand_functions
from .protobuf import onnx_package
from .site import Site
from .tensors import ELEMENT_TYPES, dtype_name
from .translators import TRANSLATORS, UNSUPPORTED, translator_key
from .values import Values

DEFAULT_DOMAINS = ("", "ai.onnx")


def opsets_of(model) -> dict[str, int]:
    opsets = {}
    for entry in model.opset_import:
        domain = "" if entry.domain in DEFAULT_DOMAINS else entry.domain
        opsets[domain] = int(entry.version)
    return opsets


def with_known_inputs(model, known_inputs: dict[str, np.ndarray]):
    """A copy of ``model`` whose graph inputs named in ``known_inputs`` are initializers holding those values."""
    onnx = onnx_package()
    if not known_inputs:
        return model
    names = {value.name for value in model.graph.input}
    unknown = sorted(set(known_inputs) - names)
    if unknown:
        raise ModelFormatError(f"known_inputs names {', '.join(unknown)}, which the graph does not take as inputs")
    bound = type(model)()
    bound.CopyFrom(model)
    kept = [value for value in bound.graph.input if value.name not in known_inputs]
    del bound.graph.input[:]
    bound.graph.input.extend(kept)
    for name, value in known_inputs.items():
        bound.graph.initializer.append(onnx.numpy_helper.from_array(np.asarray(value), name))
    return bound


def inferred(model, source: str):
    """``model`` with ONNX's shape inference applied (the model as it is when inference fails on it)."""
    onnx = onnx_package()
    try:
        return onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=True)
    except Exception:  # inference rejects some valid models (and all invalid ones): translate what is declared
        return model


def _tensor_info(value_info, where: str) -> OperandInfo | None:
    kind = value_info.type.WhichOneof("value")
    if kind != "tensor_type":
        return None
    tensor_type = value_info.type.tensor_type
    dtype = dtype_name(tensor_type.elem_type, where) if tensor_type.elem_type else None
    shape = None
    if tensor_type.HasField("shape"):
        shape = tuple(d.dim_value if d.HasField("dim_value") else None for d in tensor_type.shape.dim)
    return OperandInfo(value_info.name, shape, dtype)


def _translates(domain: str, op_type: str) -> bool:
    return translator_key(domain, op_type) in TRANSLATORS


def lower_model(model, source: str, folder: Path | None, known_inputs: dict | None = None) -> ModelIR:
    model = with_known_inputs(model, dict(known_inputs or {}))
    model = expand_functions(model, _translates, lambda m: inferred(m, source))
    model = inferred(model, source)
    opsets = opsets_of(model)
    return lower_graph(model.graph, opsets, source, folder)


def lower_graph(graph, opsets: dict[str, int], source: str, folder: Path | None,
                outer: Values | None = None) -> ModelIR:
    """A graph as a ModelIR. A sub-graph (``outer`` given: the enclosing graph's values) also takes the
    outer values it reads as inputs after its own, or as constants where they are known at load time."""
    initializer_names = {tensor.name for tensor in graph.initializer}
    inputs = [value.name for value in graph.input if value.name not in initializer_names]
    values = Values(folder, set(inputs))
    if outer is not None:
        values.step_inputs = set(inputs)
    returned = {value.name for value in graph.output}
    for value_info in (*graph.input, *graph.value_info, *graph.output):
        info = _tensor_info(value_info, f"{source}: value '{value_info.name}'")
        if info is not None:
            values.declare(info)
        elif value_info.name in inputs or value_info.name in returned:
            raise UnsupportedOperatorError(f"{source}: '{value_info.name}' is a "
                                           f"{value_info.type.WhichOneof('value')}; kuiper runs tensors only")
    _check_op_types(graph, opsets, source)

    ops: list[OpNode] = []
    for tensor in graph.initializer:
        value = values.tensor_value(tensor, f"{source}: initializer '{tensor.name}'")
        values.know(tensor.name, value)
        ops.append(OpNode("Constant", tensor.name, [], [tensor.name], {}, {"data": value}, source=source))
    if outer is not None:
        for name in captured_names(graph):
            # Known outer values (and small shape-like ones computed from known values) become constants,
            # so that the sub-graph's translators can read a shape the outer graph computes.
            known = outer.known.get(name)
            if known is None:
                known = outer.shape_like_value(name, source)
            if known is not None:
                values.know(name, known)
                ops.append(OpNode("Constant", name, [], [name], {}, {"data": known}, source=source))
            else:
                values.declare(outer.infos.get(name, OperandInfo(name)))
                values.graph_inputs.add(name)
                inputs.append(name)
    values.record(ops)

    def lower_subgraph(subgraph) -> ModelIR:
        return lower_graph(subgraph, opsets, source, folder, outer=values)

    used_names: set[str] = set()

    def translate_nodes(nodes, prefix: str = "") -> list[OpNode]:
        translated_ops: list[OpNode] = []
        for index, node in enumerate(nodes):
            name = prefix + (node.name or f"{node.op_type}_{index}")
            if name in used_names:
                name = f"{name}#{index}"
            used_names.add(name)
            domain = "" if node.domain in DEFAULT_DOMAINS else node.domain
            site = Site(node, name, index, opsets.get(domain, 0), values, source, lower_subgraph, inline_subgraph)
            if any(output and _partly_known(values.shape(output)) for output in node.output):
                _infer_node(site, opsets)
            translated = TRANSLATORS[translator_key(node.domain, node.op_type)](site)
            for output in node.output:
                if output and output not in values.infos:
                    values.declare(OperandInfo(output))
            values.record(translated)
            partial_shapes.follow(node, values)
            translated_ops.extend(translated)
        return translated_ops

    def inline_subgraph(subgraph, prefix: str) -> list[OpNode]:
        """A sub-graph without inputs (an If's branch chosen at load time) translated into this graph, its
        values beside this graph's, so what it computes from known values is known too."""
        for value_info in (*subgraph.value_info, *subgraph.output):
            info = _tensor_info(value_info, f"{source}: value '{value_info.name}'")
            if info is not None and value_info.name not in values.infos:
                values.declare(info)
        _check_op_types(subgraph, opsets, source)
        inlined = []
        for tensor in subgraph.initializer:
            value = values.tensor_value(tensor, f"{source}: initializer '{tensor.name}'")
            values.know(tensor.name, value)
            inlined.append(OpNode("Constant", tensor.name, [], [tensor.name], {}, {"data": value}, source=source))
        values.record(inlined)
        return inlined + translate_nodes(subgraph.node, prefix)

    ops.extend(translate_nodes(graph.node))

    outputs = []
    for value in graph.output:
        name = value.name
        if name in inputs:  # a graph input returned as it is: kuiper's outputs are computed values
            copy = f"{name}/output"
            ops.append(OpNode("Identity", copy, [name], [copy], source=source))
            values.declare(OperandInfo(copy, values.shape(name), values.infos[name].dtype))
            name = copy
        outputs.append(name)
    return ModelIR(ops, dict(values.infos), inputs, outputs, source=source)


def captured_names(graph) -> list[str]:
    """Values a (sub-)graph reads from enclosing graphs: read by its nodes or theirs, made by none of them."""
    own = {value.name for value in graph.input} | {tensor.name for tensor in graph.initializer}
    captured: list[str] = []
    for node in graph.node:
        reads = list(node.input)
        for attribute in node.attribute:
            for subgraph in (*([attribute.g] if attribute.HasField("g") else []), *attribute.graphs):
                reads += captured_names(subgraph)
        for name in reads:
            if name and name not in own and name not in captured:
                captured.append(name)
        own.update(node.output)
    return captured


def _partly_known(shape) -> bool:
    return shape is None or None in shape


def _infer_node(site: Site, opsets: dict[str, int]) -> None:
    """Shapes of ``site``'s outputs that the model-wide inference left unknown, from ONNX's inference of this
    one node given what kuiper knows of its inputs: their shapes, and their values where known at load time."""
    onnx = onnx_package()
    node, values = site.node, site.values
    input_types, input_data = {}, {}
    for name in node.input:
        if not name:
            continue
        info = values.infos.get(name)
        if info is None or info.dtype is None or info.dtype not in ELEMENT_TYPES:
            return
        shape = values.shape(name)
        input_types[name] = onnx.helper.make_tensor_type_proto(ELEMENT_TYPES[info.dtype], shape)
        if values.is_known(name) and shape is not None and len(shape) <= 1:  # small shape-like values only
            try:
                input_data[name] = onnx.numpy_helper.from_array(values.value(name, site, "value"), name)
            except KuiperError:
                pass
    domain = "" if node.domain in DEFAULT_DOMAINS else node.domain
    try:
        schema = onnx.defs.get_schema(node.op_type, opsets.get(domain, 1), domain)
        imports = [onnx.helper.make_opsetid(d, v) for d, v in opsets.items()]
        inferred_types = onnx.shape_inference.infer_node_outputs(schema, node, input_types, input_data,
                                                                 opset_imports=imports)
    except Exception:  # ONNX cannot infer this node: its translator asks for what it needs
        return
    for name, type_proto in inferred_types.items():
        info = _tensor_info(onnx.helper.make_value_info(name, type_proto), site.where())
        known = values.shape(name)
        if info is not None and info.shape is not None and (known is None or len(known) == len(info.shape)):
            if known is not None:  # keep what was known, add what this inference found
                info.shape = tuple(k if k is not None else d for k, d in zip(known, info.shape))
            if info.dtype is None and name in values.infos:
                info.dtype = values.infos[name].dtype
            values.declare(info)


def _check_op_types(graph, opsets: dict[str, int], source: str) -> None:
    """One error naming every node whose op kuiper cannot run, before anything is translated."""
    missing: dict[str, list[str]] = {}
    for index, node in enumerate(graph.node):
        key = translator_key(node.domain, node.op_type)
        if key not in TRANSLATORS:
            missing.setdefault(key, []).append(node.name or f"node {index}")
    if missing:
        lines = []
        for key, nodes in sorted(missing.items()):
            why = UNSUPPORTED.get(key, "no translation into kuiper's op set yet")
            shown = ", ".join(nodes[:5]) + (f" and {len(nodes) - 5} more" if len(nodes) > 5 else "")
            lines.append(f"  {key}: {why} (used by {shown})")
        raise UnsupportedOperatorError(f"{source}: {len(missing)} ONNX op type(s) kuiper cannot run:\n"
                                       + "\n".join(lines))

