"""Typed constructors: the one place where PyTorch's dtype rules meet the IR.

Each function takes IR expressions (or Python scalars, which become weak
constants), decides the dtype the operation computes in (dtypes.promote),
and inserts explicit casts, so that every Binary/Compare/Call node's operands
already have the computation dtype.  Code generators then never have to
think about promotion.

Type errors (e.g. ``sub`` of two bool tensors, which PyTorch rejects too)
raise IRError; a frontend re-raises them naming its file and expression.
Which functions exist and their dtype rules come from functions.py.
"""

from __future__ import annotations

import functools
import math

import numpy

from kuiper.errors import IRError
from kuiper.ir import dtypes
from kuiper.ir.functions import FLOAT, INTRINSICS, ROUNDING
from kuiper.ir.nodes import Binary, Call, Cast, Compare, Const, Indexing, IRExpr, Select, Unary, Var


def as_expr(value) -> IRExpr:
    if isinstance(value, IRExpr):
        return value
    if isinstance(value, (bool, int, float, complex)):
        return const(value)
    raise TypeError(f"cannot use {value!r} as an IR expression")


def var(name: str, dtype: str) -> Var:
    _check_dtype(dtype)
    return Var(name, dtype)


def const(value: bool | int | float, dtype: str | None = None) -> Const:
    """A constant converted to ``dtype`` (default: its Python scalar dtype)."""
    if dtype is None:
        dtype = dtypes.of_python_value(value)
    _check_dtype(dtype)
    return Const(convert_scalar(value, dtype), dtype)


def convert_scalar(value: bool | int | float | complex, dtype: str) -> bool | int | float | complex:
    """What ``value`` becomes when cast to ``dtype``, as a Python scalar (PyTorch casts)."""
    category = dtypes.category(dtype)
    if category == dtypes.COMPLEX:
        return complex(numpy.asarray(value).astype(dtypes.storage_dtype(dtype)))
    if isinstance(value, complex):
        value = value.real  # complex to real keeps the real part (PyTorch warns, NumPy too)
    if category == dtypes.BOOL:
        return bool(value)
    if category == dtypes.INT:
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"cannot convert {value} to an integer")
        number = int(value)  # truncates toward zero, like a C cast and Python int()
        if dtype == "pyint":
            return number
        bits = dtypes.TENSOR_DTYPES[dtype][1]
        if dtype == "uint8":
            return number % 256
        half = 1 << (bits - 1)
        return (number + half) % (1 << bits) - half  # wraps, as PyTorch does
    if dtype in ("pyfloat", "float64"):
        return float(value)
    return float(numpy.asarray(float(value)).astype(dtype))  # round to float32/float16


def cast(x, dtype: str) -> IRExpr:
    x = as_expr(x)
    _check_dtype(dtype)
    if x.dtype == dtype:
        return x
    if dtype == dtypes.SHAPE or x.dtype == dtypes.SHAPE:
        raise IRError("the whole shape size(@N) cannot be used in arithmetic")
    if isinstance(x, Const):
        try:
            return Const(convert_scalar(x.value, dtype), dtype)
        except (ValueError, OverflowError):
            pass  # e.g. nan to int: leave it to run time
    return Cast(x, dtype)


# --- arithmetic -------------------------------------------------------------

_BOOL_TENSOR_ALLOWED = {"add", "mul", "max", "min"}  # PyTorch: or, and, or, and


def arith(op: str, a, b) -> IRExpr:
    """add sub mul floordiv mod fmod pow max min, in the promoted dtype."""
    a, b = as_expr(a), as_expr(b)
    dtype = dtypes.promote(a.dtype, b.dtype)
    if dtype == "pybool":
        dtype = "pyint"  # True + True == 2 in Python
    if dtype == "bool" and op not in _BOOL_TENSOR_ALLOWED:
        raise IRError(f"{_NAMES.get(op, op)} is not defined for two bool tensors")
    return Binary(op, cast(a, dtype), cast(b, dtype), dtype)


add = functools.partial(arith, "add")
sub = functools.partial(arith, "sub")
mul = functools.partial(arith, "mul")
floordiv = functools.partial(arith, "floordiv")
mod = functools.partial(arith, "mod")
fmod = functools.partial(arith, "fmod")
pow = functools.partial(arith, "pow")  # noqa: A001 - the IR op is called pow
maximum = functools.partial(arith, "max")
minimum = functools.partial(arith, "min")


def div(a, b) -> IRExpr:
    """True division: integers and bools divide as floats (float32, pyfloat for scalars)."""
    a, b = as_expr(a), as_expr(b)
    dtype = dtypes.to_float(dtypes.promote(a.dtype, b.dtype))
    return Binary("div", cast(a, dtype), cast(b, dtype), dtype)


def bitwise(op: str, a, b) -> IRExpr:
    """and or xor (bool or integer), shl shr (integer only)."""
    a, b = as_expr(a), as_expr(b)
    dtype = dtypes.promote(a.dtype, b.dtype)
    if dtypes.is_float(dtype):
        raise IRError(f"{_NAMES.get(op, op)} needs bool or integer operands, not {dtype}")
    if op in ("shl", "shr") and dtypes.is_bool(dtype):
        if dtype == "bool":
            raise IRError(f"{_NAMES[op]} is not defined for bool tensors")
        dtype = "pyint"
    return Binary(op, cast(a, dtype), cast(b, dtype), dtype)


def neg(x) -> IRExpr:
    x = as_expr(x)
    if x.dtype == "bool":
        raise IRError("neg is not defined for a bool tensor (use logical not)")
    if x.dtype == "pybool":
        x = cast(x, "pyint")
    return Unary("neg", x, x.dtype)


def logical_not(x) -> IRExpr:
    x = as_expr(x)
    target = "pybool" if dtypes.is_scalar(x.dtype) else "bool"
    return Unary("not", cast(x, target), target)


def compare(op: str, a, b) -> IRExpr:
    a, b = as_expr(a), as_expr(b)
    dtype = dtypes.promote(a.dtype, b.dtype)
    if dtypes.is_complex(dtype) and op not in ("eq", "ne"):
        raise IRError(f"{op} is not defined for complex numbers (only eq and ne are)")
    result = "pybool" if dtypes.is_scalar(dtype) else "bool"
    return Compare(op, cast(a, dtype), cast(b, dtype), result)

gt = functools.partial(compare, "gt")
ge = functools.partial(compare, "ge")
lt = functools.partial(compare, "lt")
le = functools.partial(compare, "le")
eq = functools.partial(compare, "eq")
ne = functools.partial(compare, "ne")


def select(cond, a, b) -> IRExpr:
    cond, a, b = as_expr(cond), as_expr(a), as_expr(b)
    dtype = dtypes.promote(a.dtype, b.dtype)
    cond_dtype = "pybool" if dtypes.is_scalar(cond.dtype) else "bool"
    if dtypes.is_scalar(dtype) and cond_dtype == "bool":
        # torch.where(tensor, 1, 0) is a tensor: scalars alone give their category's default
        dtype = dtypes.DEFAULT_TENSOR_DTYPE[dtypes.category(dtype)]
    return Select(cast(cond, cond_dtype), cast(a, dtype), cast(b, dtype), dtype)


# --- intrinsic calls ------------------------------------------------------------


def call(func: str, *args) -> IRExpr:
    """An intrinsic: float functions promote integers to float, rounding is identity on integers."""
    args = tuple(as_expr(a) for a in args)
    intrinsic = INTRINSICS.get(func)
    if intrinsic is None or len(args) != intrinsic.arity:
        raise IRError(f"unknown intrinsic {func} with {len(args)} argument(s)")
    if intrinsic.rule == FLOAT:
        dtype = dtypes.to_float(dtypes.promote(*(a.dtype for a in args)))
        return Call(func, tuple(cast(a, dtype) for a in args), dtype)
    (x,) = args
    if x.dtype == "bool":
        raise IRError(f"{func} is not defined for a bool tensor")
    if x.dtype == "pybool":
        x = cast(x, "pyint")
    if dtypes.is_complex(x.dtype):
        if func != "abs":
            raise IRError(f"{func} is not defined for complex numbers")
        return Call(func, (x,), dtypes.REAL_PART[x.dtype])  # |z| is real
    if intrinsic.rule == ROUNDING and not dtypes.is_float(x.dtype):
        return x
    return Call(func, (x,), x.dtype)


def _check_dtype(dtype: str) -> None:
    if not dtypes.is_known(dtype):
        raise IRError(f"unknown dtype {dtype!r}")


_NAMES = {"floordiv": "floor_divide", "mod": "remainder", "shl": "lshift", "shr": "rshift"}


# --- the operators of IR expressions ---------------------------------------------------------
# ``x + y``, ``-x`` and ``A[i, j]`` build typed nodes with the constructors above.  They are
# attached to the node classes here because nodes.py sits below this module (it is imported
# by it), so it cannot call these constructors itself.


def _index(tensor: Var, indices) -> Indexing:
    if not isinstance(indices, tuple):
        indices = (indices,)
    return Indexing(tensor, tuple(as_expr(i) for i in indices), tensor.dtype)


_OPERATOR_METHODS = {
    "__add__": lambda a, b: add(a, b),
    "__radd__": lambda a, b: add(b, a),
    "__sub__": lambda a, b: sub(a, b),
    "__rsub__": lambda a, b: sub(b, a),
    "__mul__": lambda a, b: mul(a, b),
    "__rmul__": lambda a, b: mul(b, a),
    "__truediv__": lambda a, b: div(a, b),
    "__rtruediv__": lambda a, b: div(b, a),
    "__floordiv__": lambda a, b: floordiv(a, b),
    "__mod__": lambda a, b: mod(a, b),
    "__pow__": lambda a, b: pow(a, b),
    "__neg__": lambda a: neg(a),
}
for _name, _method in _OPERATOR_METHODS.items():
    setattr(IRExpr, _name, _method)
Var.__getitem__ = _index
