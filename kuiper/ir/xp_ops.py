"""How each IR operation runs on an array namespace ``xp``.

``resolve(xp, node)`` returns an XpOp for one IR expression node: a callable
taking the operand values, and whether it accepts ``out=`` (NumPy and CuPy
ufuncs do; plain array-API functions do not).  Names are looked up by their
array-API spelling first, then NumPy's (``asin`` / ``arcsin``).

This is the single implementation of the elementwise semantics on arrays:
the compiled NumPy code, the reference interpreter and the constant folder
all go through it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from kuiper.errors import UnsupportedOperatorError
from kuiper.ir import dtypes
from kuiper.ir.erf import erf as erf_fallback
from kuiper.ir.functions import operation
from kuiper.ir.nodes import Binary, Call, Cast, Compare, IRExpr, Select, Unary
from kuiper.ir.visitors import Visitor


@dataclass(frozen=True)
class XpOp:
    fn: Callable
    supports_out: bool


def _names(name: str) -> tuple[str, ...]:
    """Array-namespace spellings of an IR operation, from the one table (functions.py)."""
    return operation(name).array_names


def resolve(xp, node: IRExpr) -> XpOp:
    return _Resolver(xp).visit(node)


class _Resolver(Visitor):
    """The XpOp of one operation node (its operands are not visited)."""

    def __init__(self, xp):
        self.xp = xp

    def visit_Unary(self, node: Unary | Compare) -> XpOp:
        return _lookup(self.xp, _names(node.op))

    visit_Compare = visit_Unary

    def visit_Binary(self, node: Binary) -> XpOp:
        xp = self.xp
        if node.op == "fmod" and _find(xp, ("fmod",)) is None:
            return XpOp(functools.partial(_fmod_fallback, xp), False)
        if node.op in ("max", "min") and _has_clip_with_out(xp):
            return XpOp(functools.partial(_bound, xp, node.op), True)
        return _lookup(xp, _names(node.op))

    def visit_Call(self, node: Call) -> XpOp:
        return _erf(self.xp) if node.func == "erf" else _lookup(self.xp, _names(node.func))

    def visit_Cast(self, node: Cast) -> XpOp:
        return _cast(self.xp, dtypes.storage_dtype(node.dtype))

    def visit_Select(self, node: Select) -> XpOp:
        xp = self.xp
        dtype = dtypes.array_dtype(xp, dtypes.storage_dtype(node.dtype))

        def where(condition, a, b):
            # The standard's where takes an array condition and one Python scalar at most.
            if not hasattr(condition, "shape"):
                condition = xp.asarray(condition)
            if not hasattr(a, "shape") and not hasattr(b, "shape"):
                a = xp.asarray(a, dtype=dtype)
            return xp.where(condition, a, b)

        return XpOp(where, False)

    def generic_visit(self, node: IRExpr):
        raise TypeError(f"no array operation for {type(node).__name__}")


def _bound(xp, op: str, a, b, out=None):
    """max/min; a float array against a scalar bound goes through clip.

    NumPy 2's maximum/minimum against a broadcast scalar runs about 3x slower than
    clip on this kind of CPU (ReLU, ReLU6, clamp are everywhere in CNNs), and clip
    propagates NaN the same way.  Anything else (two arrays, integers, a NaN
    bound) takes maximum/minimum.
    """
    ufunc = xp.maximum if op == "max" else xp.minimum
    scalar, array = (b, a) if _is_plain_number(b) else (a, b) if _is_plain_number(a) else (None, None)
    kind = getattr(getattr(array, "dtype", None), "kind", None)
    if scalar is None or kind != "f" or scalar != scalar or (out is not None and out.dtype != array.dtype):
        return ufunc(a, b) if out is None else ufunc(a, b, out=out)
    low, high = _clip_bounds(op, scalar, array.dtype.type)
    return xp.clip(array, low, high) if out is None else xp.clip(array, low, high, out=out)


def _clip_bounds(op: str, scalar, to_dtype) -> tuple:
    """(low, high) of the clip computing ``op`` ("max" or "min") against ``scalar``, in ``to_dtype``."""
    if op == "max":
        return to_dtype(scalar), to_dtype(float("inf"))
    return to_dtype(float("-inf")), to_dtype(scalar)


def clip_against(xp, fn: Callable, constant, scalar_type) -> Callable | None:
    """``fn``, a max or min that ``resolve`` made, of an array of ``scalar_type`` (``xp.float32``)
    against ``constant``, as ``call(array, out)``: one clip (the array's own method, without
    np.clip's dispatch), its bounds made once.  None where ``_bound`` would not clip (not a
    bound, an integer array, a NaN bound)."""
    if not (isinstance(fn, functools.partial) and fn.func is _bound and fn.args[0] is xp):
        return None
    if not _is_plain_number(constant) or constant != constant:
        return None
    if getattr(getattr(scalar_type(0), "dtype", None), "kind", None) != "f":
        return None
    low, high = _clip_bounds(fn.args[1], constant, scalar_type)
    return lambda array, out: array.clip(low, high, out=out)


def _has_clip_with_out(xp) -> bool:
    # NumPy's and CuPy's clip take out= (np.clip is not itself a ufunc object);
    # an array-API namespace's clip may not.
    return getattr(xp, "__name__", "") in ("numpy", "cupy")


def _is_plain_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _find(xp, names: tuple[str, ...]):
    for name in names:
        fn = getattr(xp, name, None)
        if fn is not None:
            return fn
    return None


def _lookup(xp, names: tuple[str, ...]) -> XpOp:
    fn = _find(xp, names)
    if fn is None:
        raise NotImplementedError(f"array namespace {getattr(xp, '__name__', xp)!r} has no {names[0]}")
    return XpOp(fn, _is_ufunc(fn))


def _is_ufunc(fn) -> bool:
    # numpy.ufunc and cupy's ufunc both take out= and say how many inputs/outputs they have.
    return hasattr(fn, "nin") and hasattr(fn, "nout")


def _cast(xp, dtype_name: str) -> XpOp:
    target = dtypes.array_dtype(xp, dtype_name)
    if target is None:  # float16 on a namespace that keeps to the standard
        raise UnsupportedOperatorError(
            f"a cast to {dtype_name}: the array namespace {getattr(xp, '__name__', xp)!r} has no such dtype")
    copyto = getattr(xp, "copyto", None)
    if copyto is not None:

        def cast_into(x, out=None):
            if out is None:
                return _astype(xp, xp.asarray(x), target)
            copyto(out, x, casting="unsafe")
            return out

        return XpOp(cast_into, True)
    return XpOp(lambda x: _astype(xp, xp.asarray(x), target), False)


def _astype(xp, x, dtype):
    astype = getattr(xp, "astype", None)
    return astype(x, dtype) if astype is not None else x.astype(dtype)


def _erf(xp) -> XpOp:
    fn = getattr(xp, "erf", None)
    if fn is None:
        fn = _special_erf(getattr(xp, "__name__", ""))
    if fn is None:
        return XpOp(functools.partial(erf_fallback, xp), False)
    return XpOp(fn, _is_ufunc(fn))


@functools.lru_cache(maxsize=None)
def _special_erf(namespace_name: str):
    """SciPy's (or CuPy's) erf ufunc for the namespaces they work on, if installed."""
    try:
        if namespace_name in ("numpy", "array_api_compat.numpy", "kuiper.backends.numpy_namespace"):
            from scipy.special import erf
        elif namespace_name in ("cupy", "array_api_compat.cupy"):
            from cupyx.scipy.special import erf
        else:
            return None
    except ImportError:
        return None
    return erf


def _fmod_fallback(xp, a, b):
    # C fmod from Python's remainder: same magnitude, sign of the dividend.
    rem = xp.remainder(a, b)
    return xp.where((rem != 0) & ((rem < 0) != (a < 0)), rem - b, rem)
