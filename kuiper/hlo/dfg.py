"""The data-flow graph of an HLO module: instructions as nodes, operand -> user as edges.

Called computations are followed: the caller's operands flow into the callee's parameters
(``call``, ``fusion``, ``while``, ``conditional``) and the callee's root flows back into the
caller.  Computations applied element by element (``to_apply`` of reduce/sort/map/scatter)
get one edge from their root to the instruction that applies them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from .module import HloInstruction, HloModule

# Called computations whose parameters receive the caller's operands, in operand order.
_OPERANDS_TO_PARAMETERS = ("calls", "body", "condition")


@dataclass
class DataFlowGraph:
    nodes: list[dict] = field(default_factory=list)
    edges: list[dict] = field(default_factory=list)
    computations: list[dict] = field(default_factory=list)

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps({"nodes": self.nodes, "edges": self.edges, "computations": self.computations}, indent=indent)

    def to_dot(self) -> str:
        lines = ["digraph hlo {", '  node [shape=box, fontname="monospace", fontsize=10];']
        by_computation: dict[str, list[dict]] = {}
        for node in self.nodes:
            by_computation.setdefault(node["computation"], []).append(node)
        for index, computation in enumerate(self.computations):
            lines.append(f"  subgraph cluster_{index} {{")
            lines.append(f"    label={_quote(('ENTRY ' if computation['entry'] else '') + computation['name'])};")
            for node in by_computation.get(computation["name"], []):
                style = ", style=bold" if node["root"] else ""
                lines.append(f"    {_quote(node['id'])} [label={_quote(node['label'])}{style}];")
            lines.append("  }")
        for edge in self.edges:
            style = "" if edge["kind"] == "data" else f" [style=dashed, label={_quote(edge['kind'])}]"
            lines.append(f"  {_quote(edge['source'])} -> {_quote(edge['target'])}{style};")
        lines.append("}")
        return "\n".join(lines) + "\n"


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _node_id(instruction: HloInstruction) -> str:
    return f"{instruction.computation}/{instruction.name}"


def build_dfg(module: HloModule) -> DataFlowGraph:
    graph = DataFlowGraph()
    entry = module.entry
    for computation in module.computations.values():
        graph.computations.append(
            {"name": computation.name, "entry": computation is entry, "root": _node_id(computation.root)}
        )
        for instruction in computation.instructions:
            graph.nodes.append(
                {
                    "id": _node_id(instruction),
                    "label": f"{instruction.name}\n{instruction.opcode} {instruction.shape}",
                    "name": instruction.name,
                    "opcode": instruction.opcode,
                    "shape": str(instruction.shape),
                    "computation": computation.name,
                    "root": instruction is computation.root,
                }
            )
            for operand in instruction.operands:
                target = computation.by_name[operand]
                graph.edges.append({"source": _node_id(target), "target": _node_id(instruction), "kind": "data"})
            _call_edges(module, instruction, computation.by_name, graph.edges)
    return graph


def _call_edges(module: HloModule, instruction: HloInstruction, names: dict, edges: list[dict]) -> None:
    caller = _node_id(instruction)
    operands = [_node_id(names[o]) for o in instruction.operands]
    called: list[tuple[str, list[str]]] = []  # (computation, the operand ids feeding its parameters)
    if instruction.opcode in ("call", "fusion", "while", "async-start"):
        keys = _OPERANDS_TO_PARAMETERS + ("to_apply",)
        called = [(instruction.attributes[k], operands) for k in keys if isinstance(instruction.attributes.get(k), str)]
    elif instruction.opcode == "conditional":
        branches = instruction.attributes.get("branch_computations") or [
            instruction.attributes.get("true_computation"), instruction.attributes.get("false_computation")
        ]
        called = [(name, operands[1 + i : 2 + i]) for i, name in enumerate(branches) if isinstance(name, str)]
    for name, feeding in called:
        computation = module.computations[name]
        for parameter in computation.parameters():
            if parameter.parameter_number < len(feeding):
                edges.append({"source": feeding[parameter.parameter_number], "target": _node_id(parameter),
                              "kind": "parameter"})
        edges.append({"source": _node_id(computation.root), "target": caller, "kind": "return"})
    already = {name for name, _ in called}
    for name in instruction.called_computations():
        if name not in already:
            edges.append({"source": _node_id(module.computations[name].root), "target": caller, "kind": "applies"})
