"""The PNNX frontend: ``.pnnx.param`` + ``.pnnx.bin`` -> a neutral ModelIR.

PNNX marks the model's inputs and outputs with ``pnnx.Input`` / ``pnnx.Output``
ops and returns several tensors as one (possibly nested) ``prim::TupleConstruct``.
This module turns those into the ModelIR's explicit ``inputs`` and ``outputs``
lists, and translates every other op's PNNX spelling into kuiper's canonical op set
(``pnnx_ops``), so the graph below never sees PNNX's type strings.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from ..errors import GraphError, ModelFormatError
from ..frontends import Frontend, is_content, read_content
from ..hookspecs import hookimpl
from ..model_ir import ModelIR, OpNode
from ..pnnx_expr import op as expression_op
from .files import read_regular_file
from .pnnx_bin import EXTRA_ENTRIES_ALLOWED, WeightArchive
from .pnnx_ops import PNNX_OPS, translate
from .pnnx_param import parse_param


def default_bin_path(param_path: str | os.PathLike) -> Path:
    """``x.pnnx.param`` -> ``x.pnnx.bin`` (any other ``.param`` -> ``.bin``)."""
    path = Path(param_path)
    if path.name.endswith(".param"):
        return path.with_name(path.name[: -len(".param")] + ".bin")
    return path.with_name(path.name + ".bin")


def load_pnnx(
    param_path: str | os.PathLike, bin_path: str | os.PathLike | bytes | None = None, strict: bool = False
) -> ModelIR:
    """Read both files; weights become read-only arrays copied from the .bin (see pnnx_bin).

    ``bin_path`` may also be the .bin's content (bytes or a binary file object).
    ``strict=True`` turns the warning about params kuiper does not know into an error.
    """
    param_path = Path(param_path)
    raw = read_regular_file(param_path, "model file")
    weights = bin_path if bin_path is not None else default_bin_path(param_path)
    return _read_model(raw, str(param_path), weights, strict)


def load_pnnx_content(param: bytes, name: str, bin_path=None, strict: bool = False) -> ModelIR:
    """The same from the .param's bytes (``name`` names them); ``bin_path`` is the .bin's path or
    content, needed when the model has weights (nothing says where the .bin would be)."""
    return _read_model(param, name, bin_path, strict)


def _read_model(raw: bytes, source: str, weights, strict: bool) -> ModelIR:
    """Parse the param text ``raw`` (``source`` names it) and read its weights from ``weights``."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ModelFormatError(f"{source}:{line}: not UTF-8 text (is this a .pnnx.bin?)") from None

    parsed = parse_param(text, source, strict=strict)

    if parsed.weights:
        if weights is None:
            raise ModelFormatError(f"{source}: the model declares weights; pass bin_path= (the .pnnx.bin's path, "
                                   "bytes or binary file object)")
        declared_count = sum(len(declared) for declared in parsed.weights.values())
        by_name = {op.name: op for op in parsed.ops}
        with _open_weights(weights, declared_count + EXTRA_ENTRIES_ALLOWED) as archive:
            for op_name, declared in parsed.weights.items():
                op = by_name[op_name]
                for attr, decl in declared.items():
                    try:
                        op.attrs[attr] = archive.read(f"{op_name}.{attr}", decl.shape, decl.dtype)
                    except ModelFormatError as exc:
                        raise ModelFormatError(f"{exc} [weight '{attr}' of op '{op_name}', {op.source}]") from None
    return neutral_ir(parsed.ops, parsed.operands, source)


def _open_weights(weights, max_entries: int) -> WeightArchive:
    if is_content(weights):
        content, name = read_content(weights, "weight file")
        return WeightArchive(content, max_entries=max_entries, name=name)
    return WeightArchive(weights, max_entries=max_entries)


MAGIC = b"7767517"  # the first line of every .pnnx.param
INPUT_TYPE = "pnnx.Input"
OUTPUT_TYPE = "pnnx.Output"
TUPLE_TYPES = ("prim::TupleConstruct", "prim::ListConstruct")


def neutral_ir(ops: list[OpNode], operands: dict, source: str) -> ModelIR:
    """Drop pnnx.Input/pnnx.Output ops in favour of explicit input and output lists; canonical op types."""
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
    outputs = _flatten_tuples(roots, compute, source)
    return ModelIR([translate(node) for node in compute], _batch_free(operands, inputs), inputs, outputs, source)


def _batch_free(operands: dict, inputs: list[str]) -> dict:
    """Operands with dim 0 of every input unknown (None): PNNX writes the batch it traced with
    (``(1,3,224,224)``) unless exported with a second shape (``(?,3,224,224)``), but a model runs
    at any batch (the Model checks every other dim), so ``model.inputs`` must not promise a 1."""
    free = dict(operands)
    for operand in inputs:
        info = free.get(operand)
        if info is not None and info.shape:
            free[operand] = replace(info, shape=(None, *info.shape[1:]))
    return free


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

    @classmethod
    def spellings(cls) -> dict[str, str]:
        return {spelling: translation.canonical for spelling, translation in PNNX_OPS.items()}

    @classmethod
    def claims_content(cls, content: bytes) -> bool:
        """A param file starts with PNNX's magic number line."""
        return content.lstrip()[: len(MAGIC)] == MAGIC

    @classmethod
    def load_content(cls, content: bytes, name: str, bin_path=None, strict: bool = False) -> ModelIR:
        return load_pnnx_content(content, name, bin_path, strict=strict)


@hookimpl
def kuiper_add_frontends():
    return [PnnxFrontend]


@hookimpl
def kuiper_add_ops():
    """PNNX's own op, ``pnnx.Expression``, which parses its expression language into IR math."""
    return expression_op.OPS
