"""The canonical elementwise functions as tensor IR: compiled by the backend, fusable into chains.

``math_for(function, operand dtypes, result dtype, ...)`` gives the function's
``ElementwiseMath``, or None where only the array-API code in elementwise_exact.py gives the
op set's semantics (types the IR lacks, bit reinterpretation). The semantics that differ from
NumPy's are composites of IR operations here: integer divide and remainder truncate toward
zero with x/0 = -1 (all ones unsigned) and x%0 = x; shifts by the width or more (or by a
negative count) give 0, or the sign for arithmetic right shifts; float -> int conversion
saturates and maps NaN to 0; round_half_away rounds halves away from zero.
"""

from __future__ import annotations

import numpy as np

from ..ir import composites, make
from ..ir.dtypes import TENSOR_DTYPES
from .elementwise import ElementwiseMath

FLOATS = ("float16", "float32", "float64")
SIGNED = ("int8", "int16", "int32", "int64")
UNSIGNED = ("uint8",)  # the IR's only unsigned type


def _call(name: str):
    return lambda x, *rest: make.call(name, x, *rest)


def _sign(x):
    return make.select(make.gt(x, 0), 1, make.select(make.lt(x, 0), -1, x))


def _round_half_away(x):
    truncated = make.call("trunc", x)
    away = make.add(truncated, _sign(x))
    return make.select(make.ge(make.call("abs", make.sub(x, truncated)), 0.5), away, truncated)


def _is_finite(x):
    return make.eq(make.sub(x, x), 0)  # inf - inf and NaN - NaN are NaN


FLOAT_UNARY = {
    "exp": _call("exp"), "expm1": _call("expm1"), "log": _call("log"), "log1p": _call("log1p"),
    "sqrt": _call("sqrt"), "rsqrt": lambda x: make.div(1, make.call("sqrt", x)), "sin": _call("sin"),
    "cos": _call("cos"), "tan": _call("tan"), "tanh": _call("tanh"), "logistic": composites.sigmoid,
    "erf": _call("erf"), "floor": _call("floor"), "ceil": _call("ceil"), "round_half_even": _call("round"),
    "round_half_away": _round_half_away, "abs": _call("abs"), "sign": _sign,
    **{name: _call(name) for name in ("asin", "acos", "sinh", "cosh", "asinh", "acosh", "atanh")},
}
FLOAT_BINARY = {
    "divide": make.div, "power": make.pow, "atan2": _call("atan2"),
    "remainder": make.fmod,  # C's fmod: the sign of the dividend
}
NUMERIC = {"negate": make.neg, "subtract": make.sub}  # integers wrap around
ANY_TYPE = {"add": make.add, "multiply": make.mul, "maximum": make.maximum, "minimum": make.minimum}
BITWISE = {
    "and": lambda a, b: make.bitwise("and", a, b),
    "or": lambda a, b: make.bitwise("or", a, b),
    "xor": lambda a, b: make.bitwise("xor", a, b),
}


def _truncating_quotient(a, b, dtype: str):
    """(quotient truncated toward zero, the divisor used, where b was 0): 1 replaces 0 and INT_MIN's -1."""
    zero = make.eq(b, 0)
    unsafe = zero
    if dtype in SIGNED:
        unsafe = make.bitwise("or", zero, make.bitwise("and", make.eq(a, int(np.iinfo(dtype).min)), make.eq(b, -1)))
    safe = make.select(unsafe, 1, b)
    quotient = make.floordiv(a, safe)
    remainder = make.sub(a, make.mul(quotient, safe))
    # Floor and truncation differ when the division is inexact and the signs differ.
    rounds_down = make.bitwise("and", make.ne(remainder, 0), make.ne(make.lt(a, 0), make.lt(safe, 0)))
    return make.select(rounds_down, make.add(quotient, 1), quotient), safe, zero


def _integer_divide(dtype: str):
    all_ones = -1 if dtype in SIGNED else int(np.iinfo(dtype).max)

    def build(a, b):
        quotient, _, zero = _truncating_quotient(a, b, dtype)
        return make.select(zero, all_ones, quotient)

    return build


def _integer_remainder(dtype: str):
    def build(a, b):
        quotient, safe, zero = _truncating_quotient(a, b, dtype)
        return make.select(zero, a, make.sub(a, make.mul(quotient, safe)))

    return build


def _shift(kind: str, dtype: str):
    """shift_left, shift_right_arithmetic (signed types), shift_right_logical, with out-of-range counts."""
    bits = np.dtype(dtype).itemsize * 8

    def build(x, count):
        out_of_range = make.ge(count, bits)
        if dtype in SIGNED:
            out_of_range = make.bitwise("or", out_of_range, make.lt(count, 0))
        safe = make.select(out_of_range, 0, count)
        if kind == "shift_left":
            return make.select(out_of_range, 0, make.bitwise("shl", x, safe))
        if kind == "shift_right_arithmetic":
            sign = make.select(make.lt(x, 0), make.cast(-1, dtype), make.cast(0, dtype))
            return make.select(out_of_range, sign, make.bitwise("shr", x, safe))
        shifted = make.bitwise("shr", x, safe)
        if dtype in SIGNED:  # shr is arithmetic: clear the copies of the sign bit (a count of 0 keeps x)
            kept = make.sub(bits, make.select(make.eq(safe, 0), 1, safe))
            mask = make.sub(make.bitwise("shl", make.cast(1, dtype), kept), 1)
            shifted = make.select(make.eq(safe, 0), x, make.bitwise("and", shifted, mask))
        return make.select(out_of_range, 0, shifted)

    return build


def _saturating_convert(target: str):
    """Float -> integer: truncate, NaN -> 0, out-of-range -> the nearest bound (compared in float64)."""
    info = np.iinfo(target)
    high, low = float(info.max), float(info.min)  # float64: exact up to 32 bits, 2**63 for int64
    # The largest float64 that casts into range, so no cast ever overflows (even in unselected lanes).
    inside_high = high if int(high) <= info.max else float(np.nextafter(high, 0.0))

    def build(x):
        wide = make.call("trunc", make.cast(x, "float64"))
        clamped = make.minimum(make.maximum(make.select(make.ne(wide, wide), 0.0, wide), low), inside_high)
        value = make.cast(clamped, target)
        return make.select(make.ge(wide, high), info.max, make.select(make.le(wide, low), info.min, value))

    return build


def _compare(direction: str, order: str, operand: str):
    natural = {"": True, "float": operand in FLOATS, "signed": operand not in UNSIGNED,
               "unsigned": operand in UNSIGNED or operand == "bool"}
    if direction not in ("eq", "ne", "lt", "le", "gt", "ge") or not natural.get(order, False):
        return None  # a total order of floats, or another view of the bits: exact code
    return lambda a, b: make.compare(direction, a, b)


def _convert(source: str, target: str):
    if "complex" in source or "complex" in target:
        return None  # to complex, or dropping the imaginary part: exact code (elementwise_exact.convert)
    if target == "bool":
        return lambda x: make.ne(x, 0)
    if source in FLOATS and target not in FLOATS:
        return _saturating_convert(target)
    return lambda x: make.cast(x, target)


def math_for(function: str, operands: tuple[str, ...], dtype: str, direction: str = "",
             order: str = "") -> ElementwiseMath | None:
    """``function`` on operands of these dtypes giving ``dtype``, as IR; None where the IR cannot say it."""
    if any(t not in TENSOR_DTYPES for t in (dtype, *operands)):
        return None
    arity = len(operands)
    build = None
    if arity == 1 and dtype in FLOATS and function in FLOAT_UNARY:
        build = FLOAT_UNARY[function]
    elif arity == 1 and function == "is_finite" and operands[0] in FLOATS:
        build = _is_finite
    elif arity == 1 and function == "sign" and dtype in SIGNED:
        build = _sign
    elif arity == 2 and dtype in FLOATS and function in FLOAT_BINARY:
        build = FLOAT_BINARY[function]
    elif arity == 2 and dtype in (*SIGNED, *UNSIGNED) and function in ("divide", "remainder"):
        build = (_integer_divide if function == "divide" else _integer_remainder)(dtype)
    elif arity == 2 and dtype in (*SIGNED, *UNSIGNED) and function.startswith("shift_"):
        if function != "shift_right_arithmetic" or dtype in SIGNED:
            build = _shift(function, dtype)
    elif function in NUMERIC and dtype != "bool" and arity == (1 if function == "negate" else 2):
        build = NUMERIC[function]
    elif arity == 2 and function in ANY_TYPE:
        build = ANY_TYPE[function]
    elif arity == 2 and function in BITWISE and dtype not in FLOATS:
        build = BITWISE[function]
    elif arity == 1 and function == "not" and dtype == "bool":
        build = make.logical_not
    elif arity == 3 and function == "select":
        build = make.select
    elif arity == 3 and function == "clamp":
        build = _clamp
    elif arity == 2 and function == "compare":
        build = _compare(direction, order, operands[0])
    elif arity == 1 and function == "convert":
        build = _convert(operands[0], dtype)
    return None if build is None else ElementwiseMath(build, arity)


def _clamp(low, x, high):
    return make.minimum(make.maximum(x, low), high)
