"""ONNX reductions -> canonical Reduction (sum, mean, prod), Extremum (max, min), ArgExtremum and LogSumExp,
with the L1/L2/log/square variants as elementwise ops around them; CumSum and CumProd -> CumulativeScan.

The axes come as an input from opset 13 (ReduceSum) or 18 (the others), an attribute before; no axes
means every axis unless ``noop_with_empty_axes`` says the input passes through.
"""

from __future__ import annotations

from ..model_ir import OpNode
from .emit import Emit
from .site import Site

# op type -> (elementwise function before, canonical op, its reduction, elementwise function after)
REDUCTIONS = {
    "ReduceSum": (None, "Reduction", "sum", None), "ReduceMean": (None, "Reduction", "mean", None),
    "ReduceProd": (None, "Reduction", "prod", None), "ReduceMax": (None, "Extremum", "max", None),
    "ReduceMin": (None, "Extremum", "min", None), "ReduceL1": ("abs", "Reduction", "sum", None),
    "ReduceL2": ("square", "Reduction", "sum", "sqrt"), "ReduceSumSquare": ("square", "Reduction", "sum", None),
    "ReduceLogSum": (None, "Reduction", "sum", "log"), "ReduceLogSumExp": (None, "LogSumExp", None, None),
}


def _axes(site: Site) -> list[int] | None:
    """The axes to reduce (0-based), None for all; raises nothing for an absent input."""
    if site.has_input(1):
        axes = site.constant_ints(1, "axes")
    else:
        axes = site.ints("axes", [])
    rank = site.rank(0)
    for axis in axes:
        if not -rank <= axis < rank:
            raise site.error(f"axis {axis} is out of range for rank {rank}")
    return sorted(a % rank for a in axes) if axes else None


def translate_reduce(site: Site) -> list[OpNode]:
    before, op_type, reduction, after = REDUCTIONS[site.op_type]
    axes = _axes(site)
    emit = Emit(site)
    final = site.outputs[0]
    if axes is None and site.int_("noop_with_empty_axes", 0):
        emit.op("Identity", [site.input(0)], dtype=site.dtype(0), out=final)
        return emit.ops
    value = site.input(0)
    if before == "abs":
        value = emit.fn("abs", [value])
    elif before == "square":
        value = emit.fn("multiply", [value, value])
    params = {"dim": axes, "keepdim": bool(site.int_("keepdims", 1))}
    if reduction is not None:
        params["reduction"] = reduction
    value = emit.op(op_type, [value], params, dtype=site.dtype(0), out=None if after else final)
    if after:
        emit.fn(after, [value], out=final)
    return emit.ops


def translate_arg_extremum(site: Site) -> list[OpNode]:
    shape = site.static_shape(0)
    rank = len(shape)
    axis = site.int_("axis", 0)
    if not -rank <= axis < rank:
        raise site.error(f"axis {axis} is out of range for rank {rank}")
    axis %= rank
    emit = Emit(site)
    params = {"dim": [axis], "keepdim": bool(site.int_("keepdims", 1)),
              "reduction": "max" if site.op_type == "ArgMax" else "min"}
    if not site.int_("select_last_index", 0):
        emit.op("ArgExtremum", [site.input(0)], params, dtype="int64", out=site.outputs[0])
        return emit.ops
    # The last index of the extremum: the first one in the reversed axis, counted from the end.
    reversed_input = emit.op("Reverse", [site.input(0)], {"dims": [axis]}, dtype=site.dtype(0))
    first = emit.op("ArgExtremum", [reversed_input], params, dtype="int64")
    emit.fn("subtract", [emit.const(shape[axis] - 1, "int64"), first], out=site.outputs[0])
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


TRANSLATORS = {
    **{op_type: translate_reduce for op_type in REDUCTIONS},
    "ArgMax": translate_arg_extremum, "ArgMin": translate_arg_extremum,
    "CumSum": translate_cumulative, "CumProd": translate_cumulative,
}
