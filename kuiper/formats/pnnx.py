"""The PNNX frontend: ``.pnnx.param`` + ``.pnnx.bin`` -> a neutral ModelIR.

PNNX marks the model's inputs and outputs with ``pnnx.Input`` / ``pnnx.Output``
ops and returns several tensors as one (possibly nested) ``prim::TupleConstruct``.
This module turns those into the ModelIR's explicit ``inputs`` and ``outputs``
lists, so the graph below never sees PNNX's type strings.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import GraphError, ModelFormatError
from ..frontends import Frontend
from ..hookspecs import hookimpl
from ..model_ir import ModelIR, OpNode
from ..pnnx_expr import op as expression_op
from .files import read_regular_file
from .pnnx_bin import EXTRA_ENTRIES_ALLOWED, WeightArchive
from .pnnx_param import parse_param


def default_bin_path(param_path: str | os.PathLike) -> Path:
    """``x.pnnx.param`` -> ``x.pnnx.bin`` (any other ``.param`` -> ``.bin``)."""
    path = Path(param_path)
    if path.name.endswith(".param"):
        return path.with_name(path.name[: -len(".param")] + ".bin")
    return path.with_name(path.name + ".bin")


def load_pnnx(
    param_path: str | os.PathLike, bin_path: str | os.PathLike | None = None, strict: bool = False
) -> ModelIR:
    """Read both files; weights become read-only arrays copied from the .bin (see pnnx_bin).

    ``strict=True`` turns the warning about params kuiper does not know into an error.
    """
    param_path = Path(param_path)
    raw = read_regular_file(param_path, "model file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ModelFormatError(f"{param_path}:{line}: not UTF-8 text (is this a .pnnx.bin?)") from None

    parsed = parse_param(text, str(param_path), strict=strict)

    if parsed.weights:
        declared_count = sum(len(declared) for declared in parsed.weights.values())
        bin_path = bin_path if bin_path is not None else default_bin_path(param_path)
        by_name = {op.name: op for op in parsed.ops}
        with WeightArchive(bin_path, max_entries=declared_count + EXTRA_ENTRIES_ALLOWED) as archive:
            for op_name, declared in parsed.weights.items():
                op = by_name[op_name]
                for attr, decl in declared.items():
                    try:
                        op.attrs[attr] = archive.read(f"{op_name}.{attr}", decl.shape, decl.dtype)
                    except ModelFormatError as exc:
                        raise ModelFormatError(f"{exc} [weight '{attr}' of op '{op_name}', {op.source}]") from None
    return neutral_ir(parsed.ops, parsed.operands, str(param_path))


INPUT_TYPE = "pnnx.Input"
OUTPUT_TYPE = "pnnx.Output"
TUPLE_TYPES = ("prim::TupleConstruct", "prim::ListConstruct")


def neutral_ir(ops: list[OpNode], operands: dict, source: str) -> ModelIR:
    """Drop pnnx.Input/pnnx.Output ops in favour of explicit input and output lists."""
    inputs = [operand for node in ops if node.type == INPUT_TYPE for operand in node.outputs]
    output_nodes = [node for node in ops if node.type == OUTPUT_TYPE]
    for node in output_nodes:
        if node.outputs:
            raise GraphError(
                f"{node.source or source}: {node.describe()} declares output operand(s) {node.outputs}; "
                "a pnnx.Output only reads the values the model returns"
            )
    roots = [operand for node in output_nodes for operand in node.inputs]
    compute = [node for node in ops if node.type not in (INPUT_TYPE, OUTPUT_TYPE)]
    return ModelIR(compute, operands, inputs, _flatten_tuples(roots, compute, source), source)


def _flatten_tuples(roots: list[str], ops: list[OpNode], source: str) -> list[str]:
    """Every tensor inside the returned tuples, depth-first (PyTorch's output order).

    Iterative, so a file cannot make it recurse as deep as it likes; a tuple
    that contains itself is a GraphError.
    """
    producer = {operand: node for node in ops for operand in node.outputs}
    leaves: list[str] = []
    stack: list[tuple[str, tuple[str, ...]]] = [(operand, ()) for operand in reversed(roots)]
    while stack:
        operand, path = stack.pop()
        node = producer.get(operand)
        if node is None or node.type not in TUPLE_TYPES:
            leaves.append(operand)
            continue
        if node.name in path:
            raise GraphError(f"{node.source or source}: tuple op '{node.name}' contains itself")
        stack.extend((item, path + (node.name,)) for item in reversed(node.inputs))
    return leaves


class PnnxFrontend(Frontend):
    name = "pnnx"
    description = "PNNX models: NAME.pnnx.param + NAME.pnnx.bin (the .bin is found beside the .param)"
    suffixes = (".pnnx.param", ".param")

    @classmethod
    def load(cls, path: Path, bin_path: str | os.PathLike | None = None, strict: bool = False) -> ModelIR:
        return load_pnnx(path, bin_path, strict=strict)


@hookimpl
def kuiper_add_frontends():
    return [PnnxFrontend]


@hookimpl
def kuiper_add_ops():
    """PNNX's own op, ``pnnx.Expression``, which parses its expression language into IR math."""
    return expression_op.OPS
