"""How a Model describes itself: ``repr`` in one line, ``summary()`` as a table (as torchinfo does).

A Model holds every weight, so the dataclass repr would print them all (hundreds of
kilobytes for a small ResNet); ``one_line`` names what a REPL user wants to see first
and stays under REPR_LIMIT characters however many inputs or however long the names.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..limits import _human as human_bytes  # one byte-size formatter for every message

REPR_LIMIT = 300
_SHOWN_NAME = 48  # longest file, input or backend name shown in the one-line repr
_SHOWN_TENSORS = 3  # inputs (and outputs) listed by name in the repr; more are counted


def shape_text(shape) -> str:
    """``(None, 3, 64, 64)`` -> ``(?, 3, 64, 64)``; an unknown shape is ``?``."""
    if shape is None:
        return "?"
    return "(" + ", ".join("?" if dim is None else str(dim) for dim in shape) + ")"


def _clipped(text: str, limit: int = _SHOWN_NAME) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _tensors(specs, shown: int) -> str:
    listed = [_clipped(f"{spec.name}: {shape_text(spec.shape)} {spec.dtype or '?'}") for spec in specs[:shown]]
    if len(specs) > shown:
        listed.append(f"+{len(specs) - shown} more")
    return "[" + ", ".join(listed) + "]"


def one_line(model) -> str:
    """``<kuiper.Model pnnx 'x.pnnx.param' inputs=[...] outputs=[...] backend=numpy nodes=52>``."""
    origin = getattr(model, "origin", None)
    format_name = origin.arguments.get("format") if origin is not None else None
    head = "<kuiper.Model" + (f" {_clipped(str(format_name), 16)}" if format_name else "")
    if model.source:
        head += f" {_clipped(os.path.basename(model.source))!r}"
    tail = f"backend={_clipped(model.backend.name, 24)} nodes={len(model.steps)}>"
    for shown in (_SHOWN_TENSORS, 1):
        text = f"{head} inputs={_tensors(model.inputs, shown)} outputs={_tensors(model.outputs, shown)} {tail}"
        if len(text) < REPR_LIMIT:
            return text
    return f"{head} inputs={len(model.inputs)} outputs={len(model.outputs)} {tail}"


@dataclass(frozen=True)
class SummaryRow:
    """One executed node: its name, op type, output shapes and the weights it holds."""

    name: str
    type: str
    output_shapes: tuple
    parameters: int
    parameter_bytes: int


@dataclass(frozen=True)
class ModelSummary:
    """``model.summary()``: rows in execution order and totals; prints as a table."""

    title: str
    rows: tuple[SummaryRow, ...]

    @property
    def total_parameters(self) -> int:
        return sum(row.parameters for row in self.rows)

    @property
    def total_parameter_bytes(self) -> int:
        return sum(row.parameter_bytes for row in self.rows)

    def __str__(self) -> str:
        header = ("#", "node", "type", "output shape", "parameters")
        body = [
            (str(index), row.name, row.type, ", ".join(shape_text(s) for s in row.output_shapes),
             f"{row.parameters:,}" if row.parameters else "-")
            for index, row in enumerate(self.rows)
        ]
        widths = [max(len(line[column]) for line in [header, *body]) for column in range(len(header))]
        right_aligned = {0, 4}

        def line(cells) -> str:
            return "  ".join(
                cell.rjust(width) if column in right_aligned else cell.ljust(width)
                for column, (cell, width) in enumerate(zip(cells, widths))
            ).rstrip()

        rule = "-" * len(line(header))
        totals = (f"{len(self.rows)} nodes, {self.total_parameters:,} parameters "
                  f"({human_bytes(self.total_parameter_bytes)})")
        return "\n".join([self.title, rule, line(header), rule, *map(line, body), rule, totals])

    __repr__ = __str__  # a REPL or notebook shows the table


def summarize(model, seen_shapes: dict | None = None) -> ModelSummary:
    """The summary of ``model``; ``seen_shapes`` ({node name: [shape, ...]}) replaces the declared shapes."""
    nodes_by_name = {node.name: node for node in model.ir.ops} if model.ir is not None else {}
    operands = model.ir.operands if model.ir is not None else {}
    rows = []
    for step in model.steps:
        node = step.node
        # A fused elementwise chain (graph/fusion.py lists its ops in params["members"]) holds no
        # weights itself; its members may (e.g. a PReLU slope).
        members = [nodes_by_name[name] for name in _members(node) if name in nodes_by_name]
        holders = members or [node]
        # A conv with an epilogue (graph/fusion.py) holds the weights of the ops merged into it too.
        holders += [nodes_by_name[name] for name in _epilogue_members(node) if name in nodes_by_name]
        arrays = [array for holder in holders for array in holder.attrs.values()]
        if seen_shapes is not None and node.name in seen_shapes:
            shapes = tuple(None if s is None else tuple(s) for s in seen_shapes[node.name])
        else:
            shapes = tuple(getattr(operands.get(operand), "shape", None) for operand in node.outputs)
        kind = f"{node.type} ({len(members)} ops)" if members else node.type
        rows.append(SummaryRow(node.name, kind, shapes, sum(int(a.size) for a in arrays),
                               sum(int(a.nbytes) for a in arrays)))
    title = f"{os.path.basename(model.source) or 'model'} on backend {model.backend.name}"
    return ModelSummary(title, tuple(rows))



def _epilogue_members(node) -> list[str]:
    members = node.params.get("epilogue_members")
    return members if isinstance(members, list) and all(isinstance(name, str) for name in members) else []


def _members(node) -> list[str]:
    members = node.params.get("members") if not node.attrs else None
    return members if isinstance(members, list) and all(isinstance(name, str) for name in members) else []
