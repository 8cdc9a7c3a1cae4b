"""ONNX Pad, Trilu, CumSum, TopK and Einsum -> canonical PadWithMode, Iota masks with Elementwise select,
CumulativeScan, TopKDim and Einsum."""

from __future__ import annotations

import numpy as np

from ..model_ir import OpNode
from .emit import NARROW_FLOATS, Emit
from .site import Site
from .tensors import dtype_name

PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "replicate", "wrap": "circular"}


def translate_pad(site: Site) -> list[OpNode]:
    rank = site.rank(0)
    mode = site.string("mode", "constant")
    if mode not in PAD_MODES:
        raise site.error(f"mode={mode!r} is not one of {', '.join(PAD_MODES)}")
    pads = site.constant_ints(1, "pads") if site.opset >= 11 else site.ints("pads")
    axes = site.constant_ints(3, "axes") if site.has_input(3) else list(range(rank))
    axes = [a % rank for a in axes]
    if len(pads) != 2 * len(axes):
        raise site.error(f"pads {pads} must give a begin and an end for each of the {len(axes)} axes")
    before, after = [0] * rank, [0] * rank
    for i, axis in enumerate(axes):
        before[axis], after[axis] = pads[i], pads[i + len(axes)]
    torch_order = [amount for axis in reversed(range(rank)) for amount in (before[axis], after[axis])]
    value = 0.0
    if site.opset >= 11 and site.has_input(2):
        value = float(site.constant(2, "constant_value").reshape(-1)[0])
    elif site.opset < 11:
        value = site.float_("value", 0.0)
    params = {"pad": torch_order, "mode": PAD_MODES[mode], "value": value}
    return [site.op("PadWithMode", [site.input(0)], site.outputs, params)]


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


def translate_cumulative(site: Site) -> list[OpNode]:
    rank = site.rank(0)
    axis = site.constant_ints(1, "axis")[0] % rank
    reduction = "sum" if site.op_type == "CumSum" else "prod"
    emit = Emit(site)
    dtype = site.dtype(0)
    # The canonical scan accumulates small integers in int64 (as NumPy does); ONNX keeps the input's type.
    wide = "int64" if dtype.startswith(("int", "uint")) else dtype
    value = site.input(0)
    reverse = site.int_("reverse", 0)
    if reverse:
        value = emit.op("Reverse", [value], {"dims": [axis]}, dtype=dtype)
    if site.int_("exclusive", 0):  # step i sums the steps before it: shift by one, the identity first
        low, high = [0] * rank, [0] * rank
        low[axis], high[axis] = 1, -1
        identity = 0.0 if reduction == "sum" else 1.0
        value = emit.op("Pad", [value], {"low": low, "high": high, "value": identity}, dtype=dtype)
    value = emit.op("CumulativeScan", [value], {"dim": axis, "reduction": reduction}, dtype=wide)
    if reverse:
        value = emit.op("Reverse", [value], {"dims": [axis]}, dtype=wide)
    emit.fn("convert", [value], dtype, out=site.outputs[0])
    return emit.ops


def translate_top_k(site: Site) -> list[OpNode]:
    k = site.constant_ints(1, "k")[0] if site.opset >= 10 else site.int_("k")
    params = {"k": k, "dim": site.int_("axis", -1), "largest": bool(site.int_("largest", 1)),
              "sorted": bool(site.int_("sorted", 1))}
    return [site.op("TopKDim", [site.input(0)], site.outputs, params)]


def translate_einsum(site: Site) -> list[OpNode]:
    operands = [name for name in site.inputs if name]
    params = {"equation": site.string("equation")}
    dtype = site.dtype(0)
    if dtype not in NARROW_FLOATS:
        return [site.op("Einsum", operands, site.outputs, params)]
    emit = Emit(site)  # bfloat16 and float8: in float32, rounded back
    wide = [emit.convert(name, "float32") for name in operands]
    emit.convert(emit.op("Einsum", wide, params, dtype="float32"), dtype, out=site.outputs[0])
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


def translate_gather_nd(site: Site) -> list[OpNode]:
    """data[indices[..., :]]: the canonical gather with the index vector in the last dim (batch_dims=0)."""
    if site.int_("batch_dims", 0):
        raise site.error("batch_dims other than 0 is not supported")
    shape = site.static_shape(0)
    index_shape = site.static_shape(1)
    depth = index_shape[-1]
    if depth > len(shape):
        raise site.error(f"index vectors of length {depth} for data of rank {len(shape)}")
    emit = Emit(site)
    indices = site.input(1)
    index_dtype = site.dtype(1)
    sizes = emit.const(np.asarray(shape[:depth]), index_dtype)
    negative = emit.compare("lt", indices, emit.const(0, index_dtype))
    indices = emit.fn("select", [negative, emit.fn("add", [indices, sizes]), indices])
    batch = len(index_shape) - 1
    params = {"offset_dims": list(range(batch, batch + len(shape) - depth)), "collapsed_slice_dims": list(range(depth)),
              "start_index_map": list(range(depth)), "index_vector_dim": batch,
              "slice_sizes": [1] * depth + list(shape[depth:])}
    emit.op("Gather", [site.input(0), indices], params, dtype=site.dtype(0), out=site.outputs[0])
    return emit.ops


TRANSLATORS = {
    "EyeLike": translate_eye_like, "GatherND": translate_gather_nd,
    "Pad": translate_pad, "Trilu": translate_trilu, "CumSum": translate_cumulative,
    "CumProd": translate_cumulative, "TopK": translate_top_k, "Einsum": translate_einsum,
}
