"""ONNX's inverse and hyperbolic trigonometric functions, Hardmax, OneHot, LpNormalization and BitCast ->
chains of the canonical Elementwise op (and Normalize, ArgExtremum, Iota, BitcastConvert); Einsum -> Einsum
(bfloat16 and float8 computed in float32); Det -> Determinant.

The trigonometric functions the op set lacks are their textbook identities in the functions it has
(``asin(x) = atan2(x, sqrt(1 - x^2))``).
"""

from __future__ import annotations

import numpy as np

from ..model_ir import OpNode
from .emit import NARROW_FLOATS, Emit
from .site import Site

TRIGONOMETRIC = ("Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh")


def translate_trigonometric(site: Site) -> list[OpNode]:
    emit = Emit(site)
    x, out, dtype = site.input(0), site.outputs[0], site.dtype(0)

    def const(value):
        return emit.const(value, dtype)

    def fn(name, *args, out=None):
        return emit.fn(name, list(args), out=out)

    square = fn("multiply", x, x)
    op = site.op_type
    if op in ("Asin", "Acos"):
        root = fn("sqrt", fn("subtract", const(1), square))
        fn("atan2", *((x, root) if op == "Asin" else (root, x)), out=out)
    elif op == "Atan":
        fn("atan2", x, const(1), out=out)
    elif op in ("Sinh", "Cosh"):
        grow, decay = fn("exp", x), fn("exp", fn("negate", x))
        both = fn("subtract" if op == "Sinh" else "add", grow, decay)
        fn("multiply", both, const(0.5), out=out)
    elif op in ("Asinh", "Acosh"):
        root = fn("sqrt", fn("add" if op == "Asinh" else "subtract", square, const(1)))
        fn("log", fn("add", x, root), out=out)
    else:  # Atanh: log((1 + x) / (1 - x)) / 2
        ratio = fn("divide", fn("add", const(1), x), fn("subtract", const(1), x))
        fn("multiply", fn("log", ratio), const(0.5), out=out)
    return emit.ops


def _axis_iota(emit: Emit, length: int, axis: int, rank: int) -> str:
    """0 .. length-1 along ``axis`` of a rank-``rank`` tensor of ones elsewhere (broadcasts against it)."""
    shape = [1] * rank
    shape[axis] = length
    return emit.op("Iota", [], {"shape": shape, "dim": axis, "dtype": "int64"}, dtype="int64")


def translate_hardmax(site: Site) -> list[OpNode]:
    """1 at the first maximum along ``axis``, 0 elsewhere."""
    shape = site.static_shape(0)
    axis = site.int_("axis", -1) % len(shape)
    if site.opset < 13:
        raise site.error("Hardmax before opset 13 (over flattened trailing dims) is not supported")
    emit = Emit(site)
    index = emit.op("ArgExtremum", [site.input(0)], {"dim": [axis], "keepdim": True, "reduction": "max"},
                    dtype="int64")
    hits = emit.compare("eq", _axis_iota(emit, shape[axis], axis, len(shape)), index)
    emit.convert(hits, site.dtype(0), out=site.outputs[0])
    return emit.ops


def translate_one_hot(site: Site) -> list[OpNode]:
    depth = int(site.constant(1, "depth").reshape(-1)[0])
    rank = site.rank(0) + 1
    axis = site.int_("axis", -1) % rank
    emit = Emit(site)
    indices = emit.convert(site.input(0), "int64")
    negative = emit.compare("lt", indices, emit.const(0, "int64"))
    indices = emit.fn("select", [negative, emit.fn("add", [indices, emit.const(depth, "int64")]), indices])
    indices = emit.op("Unsqueeze", [indices], {"dim": axis}, dtype="int64")
    hits = emit.compare("eq", _axis_iota(emit, depth, axis, rank), indices)
    values = site.input(2)
    dtype = site.dtype(2)
    off = emit.op("Slice", [values], {"starts": [0], "limits": [1], "strides": [1]}, dtype=dtype)
    on = emit.op("Slice", [values], {"starts": [1], "limits": [2], "strides": [1]}, dtype=dtype)
    scalar_off = emit.op("Reshape", [off], {"shape": []}, dtype=dtype)
    scalar_on = emit.op("Reshape", [on], {"shape": []}, dtype=dtype)
    emit.fn("select", [hits, scalar_on, scalar_off], out=site.outputs[0])
    return emit.ops


def translate_lp_normalization(site: Site) -> list[OpNode]:
    p = site.int_("p", 2)
    if p not in (1, 2):
        raise site.error(f"p={p} must be 1 or 2")
    params = {"p": float(p), "dim": site.int_("axis", -1), "eps": float(np.finfo(np.float32).tiny)}
    return [site.op("Normalize", [site.input(0)], site.outputs, params)]


def translate_bitcast(site: Site) -> list[OpNode]:
    return [site.op("BitcastConvert", [site.input(0)], site.outputs, {"dtype": site.out_dtype(0)})]


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


def translate_det(site: Site) -> list[OpNode]:
    return [site.op("Determinant", [site.input(0)], site.outputs)]


TRANSLATORS = {
    **{op_type: translate_trigonometric for op_type in TRIGONOMETRIC},
    "Hardmax": translate_hardmax, "OneHot": translate_one_hot, "LpNormalization": translate_lp_normalization,
    "BitCast": translate_bitcast, "Einsum": translate_einsum, "Det": translate_det,
}
