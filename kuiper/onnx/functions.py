"""ONNX ops that ONNX itself defines as functions of other ops, expanded into those ops before translation.

ONNX's operator schemas give many ops a function body (``Attention``, ``SoftmaxCrossEntropyLoss``,
``RotaryEmbedding``, the window functions ...), some of them built for the node's attributes and input
types (a context-dependent function). An op kuiper has no translation for is replaced by its body, for
the opset the model imports, and the body's ops go through the translation tables like any others:
ONNX's definition of the op, run on kuiper's op set. The expansion repeats for bodies that use
function ops themselves, a bounded number of rounds.
"""

from __future__ import annotations

from collections.abc import Callable

from .protobuf import onnx_package

MAX_ROUNDS = 8
_DEFAULT_DOMAINS = ("", "ai.onnx")


def expand_functions(model, translates: Callable[[str, str], bool], infer: Callable):
    """``model`` with every node that ``translates(domain, op_type)`` refuses but ONNX defines as a function
    replaced by the function's body. ``infer`` gives a model with inferred types (for context-dependent bodies)."""
    onnx = onnx_package()
    for _ in range(MAX_ROUNDS):
        pending = [node for node in model.graph.node if not translates(node.domain, node.op_type)]
        if not pending:
            return model
        types = _value_types(infer(model))
        opsets = {("" if entry.domain in _DEFAULT_DOMAINS else entry.domain): entry.version
                  for entry in model.opset_import}
        nodes, changed = [], False
        for index, node in enumerate(model.graph.node):
            body = None if translates(node.domain, node.op_type) else _body(onnx, node, opsets, types)
            if body is None:
                nodes.append(node)
                continue
            nodes.extend(_inline(onnx, node, body, f"{node.name or node.op_type}#{index}/",
                                 _schema_defaults(onnx, node, opsets)))
            _import_opsets(model, body)
            changed = True
        if not changed:
            return model
        expanded = type(model)()
        expanded.CopyFrom(model)
        del expanded.graph.node[:]
        expanded.graph.node.extend(nodes)
        model = expanded
    return model


def _value_types(model) -> dict:
    graph = model.graph
    types = {value.name: value.type for value in (*graph.input, *graph.value_info, *graph.output)}
    onnx = onnx_package()
    for tensor in graph.initializer:
        types.setdefault(tensor.name, onnx.helper.make_tensor_type_proto(tensor.data_type, list(tensor.dims)))
    return types


def _body(onnx, node, opsets: dict, types: dict):
    """The FunctionProto of ``node``'s op at the model's opset, or None when ONNX defines none."""
    domain = "" if node.domain in _DEFAULT_DOMAINS else node.domain
    version = opsets.get(domain)
    if version is None:
        return None
    try:
        schema = onnx.defs.get_schema(node.op_type, version, domain)
    except Exception:  # SchemaError: an op ONNX does not know at this opset
        return None
    plain = [v for v in schema.function_opset_versions if v <= version]
    dependent = [v for v in schema.context_dependent_function_opset_versions if v <= version]
    try:
        if dependent and (not plain or max(dependent) >= max(plain)):
            if any(name and name not in types for name in node.input):
                return None  # the body depends on input types that inference could not find
            input_types = [types[name].SerializeToString() if name else onnx.TypeProto().SerializeToString()
                           for name in node.input]
            serialized = schema.get_context_dependent_function_with_opset_version(
                max(dependent), node.SerializeToString(), input_types)
        elif plain:
            serialized = schema.get_function_with_opset_version(max(plain))
        else:
            return None
    except Exception:  # the body builder rejects this node (an attribute or type it does not cover)
        return None
    body = onnx.FunctionProto()
    body.ParseFromString(serialized)
    return body if body.node else None


def _schema_defaults(onnx, node, opsets: dict) -> dict:
    """The default value of each attribute of ``node``'s op that its schema gives one."""
    domain = "" if node.domain in _DEFAULT_DOMAINS else node.domain
    schema = onnx.defs.get_schema(node.op_type, opsets[domain], domain)
    return {name: attribute.default_value for name, attribute in schema.attributes.items()
            if attribute.default_value.type}


def _inline(onnx, node, body, prefix: str, schema_defaults: dict) -> list:
    """The body's nodes with the function's formal inputs and outputs renamed to the node's, the rest prefixed,
    and attribute references resolved (the node's attribute, else the function's or the schema's default). Names in
    the body's sub-graphs (a Scan's or If's) are renamed alike, so they still meet the values they read."""
    names = {formal: (node.input[i] if i < len(node.input) else "") for i, formal in enumerate(body.input)}
    names.update({formal: node.output[i] for i, formal in enumerate(body.output)
                  if i < len(node.output) and node.output[i]})
    given = {attribute.name: attribute for attribute in node.attribute}
    defaults = {**schema_defaults, **{attribute.name: attribute for attribute in body.attribute_proto}}

    def rename(name: str) -> str:
        return names.get(name, prefix + name if name else "")

    def rewrite_graph(graph) -> None:
        for values in (graph.input, graph.output, graph.value_info):
            for value in values:
                value.name = rename(value.name)
        for tensor in graph.initializer:
            tensor.name = rename(tensor.name)
        rewritten = [rewrite(inner) for inner in graph.node]
        del graph.node[:]
        graph.node.extend(rewritten)

    def rewrite(inner):
        copy = onnx.NodeProto()
        copy.CopyFrom(inner)
        copy.name = prefix + (inner.name or inner.op_type)
        del copy.input[:], copy.output[:], copy.attribute[:]
        copy.input.extend(rename(name) for name in inner.input)
        copy.output.extend(rename(name) for name in inner.output)
        for attribute in inner.attribute:
            if attribute.ref_attr_name:
                source = given.get(attribute.ref_attr_name) or defaults.get(attribute.ref_attr_name)
                if source is None:
                    continue
                resolved = onnx.AttributeProto()
                resolved.CopyFrom(source)
                resolved.name = attribute.name
                copy.attribute.append(resolved)
                continue
            resolved = onnx.AttributeProto()
            resolved.CopyFrom(attribute)
            if resolved.HasField("g"):
                rewrite_graph(resolved.g)
            for graph in resolved.graphs:
                rewrite_graph(graph)
            copy.attribute.append(resolved)
        return copy

    return [rewrite(inner) for inner in body.node]


def _import_opsets(model, body) -> None:
    """Domains the body uses that the model does not import yet (a body may call another domain's ops)."""
    imported = {("" if entry.domain in _DEFAULT_DOMAINS else entry.domain) for entry in model.opset_import}
    for entry in body.opset_import:
        domain = "" if entry.domain in _DEFAULT_DOMAINS else entry.domain
        if domain not in imported:
            model.opset_import.add(domain=entry.domain, version=entry.version)
            imported.add(domain)
