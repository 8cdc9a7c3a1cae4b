"""Load a PNNX model (``.pnnx.param`` + ``.pnnx.bin``) into a ModelIR."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import ModelFormatError
from ..model_ir import ModelIR
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
    return ModelIR(ops=parsed.ops, operands=parsed.operands, source=str(param_path))
