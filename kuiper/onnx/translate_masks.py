"""ONNX Trilu and EyeLike -> masks of column - row from two canonical Iota ops, with Elementwise compare,
select and convert."""

from __future__ import annotations

from ..model_ir import OpNode
from .emit import Emit
from .site import Site
from .tensors import dtype_name


def translate_trilu(site: Site) -> list[OpNode]:
    """Keep the elements on and above (upper=1) or below the k-th diagonal: a mask of column - row."""
    shape = site.static_shape(0)
    if len(shape) < 2:
        raise site.error(f"needs a matrix (rank 2 or more), found shape {list(shape)}")
    k = site.constant_ints(1, "k")[0] if site.has_input(1) else 0
    emit = Emit(site)
    rows, columns = shape[-2:]
    row = emit.op("Iota", [], {"shape": [rows, columns], "dim": 0, "dtype": "int64"}, dtype="int64")
    column = emit.op("Iota", [], {"shape": [rows, columns], "dim": 1, "dtype": "int64"}, dtype="int64")
    offset = emit.fn("subtract", [column, row])
    keep = emit.compare("ge" if site.int_("upper", 1) else "le", offset, emit.const(k, "int64"))
    emit.fn("select", [keep, site.input(0), emit.const(0, site.dtype(0))], out=site.outputs[0])
    return emit.ops


def translate_eye_like(site: Site) -> list[OpNode]:
    shape = site.static_shape(0)
    if len(shape) != 2:
        raise site.error(f"needs a matrix, found shape {list(shape)}")
    code = site.int_("dtype", 0)
    dtype = dtype_name(code, site.where()) if code else site.dtype(0)
    emit = Emit(site)
    row = emit.op("Iota", [], {"shape": list(shape), "dim": 0, "dtype": "int64"}, dtype="int64")
    column = emit.op("Iota", [], {"shape": list(shape), "dim": 1, "dtype": "int64"}, dtype="int64")
    diagonal = emit.compare("eq", emit.fn("subtract", [column, row]), emit.const(site.int_("k", 0), "int64"))
    emit.convert(diagonal, dtype, out=site.outputs[0])
    return emit.ops


TRANSLATORS = {"Trilu": translate_trilu, "EyeLike": translate_eye_like}
