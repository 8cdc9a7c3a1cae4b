"""Elementwise functions computed exactly with the array API, for what the tensor IR cannot express.

The canonical ``Elementwise`` op (elementwise_named.py) runs its function as IR where
elementwise_ir.py has it (compiled, fusable); these are the rest: types the IR lacks
(uint16 and wider unsigned types), bit reinterpretation (total-order compares, popcount,
count-leading-zeros, arithmetic shifts of unsigned types), complex parts, cbrt.

Semantics (shared with the IR versions, and XLA's): integer divide and remainder truncate
toward zero and are defined for a zero divisor (x/0 = -1, or all ones unsigned; x%0 = x) and
for INT_MIN/-1; shifts by the bit width or more give 0 (or the sign for arithmetic right
shifts); logical right shifts shift in zeros; float -> int conversion saturates and maps NaN
to 0; round_half_away rounds halves away from zero; integer overflow wraps; the total order
of floats is -NaN < -inf < -0 < +0 < inf < NaN.
"""

from __future__ import annotations

from ..ir import dtypes
from ..ir.bitcast import bitcast
from ..ir.dtypes import array_dtype, integer_info, is_extended, is_extended_float


def _bits(x) -> int:
    return dtypes.itemsize(x.dtype) * 8


def _is_float(xp, x) -> bool:
    return dtypes.isdtype(xp, x.dtype, ("real floating", "complex floating"))


def _kind(xp, x, kind: str) -> bool:
    return dtypes.isdtype(xp, x.dtype, kind)


def _view(xp, x, dtype):
    """The bits of ``x`` read as ``dtype`` of the same width: NumPy's ``view``, or for a namespace
    without one, the fallback written in the standard (kuiper/ir/bitcast.py)."""
    return x.view(dtype) if hasattr(x, "view") else bitcast(xp, x, dtype)


def _unsigned(xp, x):
    return array_dtype(xp, f"uint{_bits(x)}")


def _signed(xp, x):
    return array_dtype(xp, f"int{_bits(x)}")


def _full(xp, like, value):
    return xp.full(like.shape, value, dtype=like.dtype)


# -- integer division ----------------------------------------------------------------------
def _truncating_quotient(xp, a, b):
    """(quotient truncated toward zero, the divisor actually used, where b was 0)."""
    zero = b == 0
    safe = xp.where(zero, _full(xp, b, 1), b)
    if _kind(xp, a, "signed integer"):
        smallest = xp.iinfo(a.dtype).min
        safe = xp.where((a == smallest) & (safe == -1), _full(xp, safe, 1), safe)  # INT_MIN / -1 = INT_MIN
    quotient = a // safe  # floors
    remainder = a - quotient * safe
    # Floor and truncation differ when the division is inexact and the signs differ.
    quotient = xp.where((remainder != 0) & ((a < 0) != (safe < 0)), quotient + 1, quotient)
    return quotient, safe, zero


def divide(xp, a, b):
    if _kind(xp, a, "complex floating"):
        return complex_divide(xp, a, b)
    if _is_float(xp, a):
        return a / b
    quotient, _, zero = _truncating_quotient(xp, a, b)
    all_ones = -1 if _kind(xp, a, "signed integer") else xp.iinfo(a.dtype).max
    return xp.where(zero, _full(xp, quotient, all_ones), quotient)


def make_complex(xp, real, imag):
    """The complex array ``real + i imag``, each part kept as it is: ``real + imag * 1j`` would turn an
    infinite imaginary part into NaN + inf i (``inf * 1j`` is ``0 * inf + inf i``)."""
    pair = xp.stack([real, imag], axis=-1)  # float32 pairs are the bytes of complex64 values
    if not hasattr(pair, "view"):  # a namespace without views (the standard has none): exact but for inf * 1j
        return real + imag * 1j
    wide = "complex64" if dtypes.itemsize(pair.dtype) == 4 else "complex128"
    return pair.view(array_dtype(xp, wide))[..., 0]


def complex_divide(xp, a, b):
    """XLA's complex division (its ElementalIrEmitter::EmitComplexDivide): Smith's algorithm, and
    where that gives (NaN, NaN), C99's answers: a zero divisor gives infinities, an infinite
    dividend over a finite divisor infinities, a finite dividend over an infinite divisor zeros.
    NumPy's division gives NaN in all three."""
    ar, ai, br, bi = xp.real(a), xp.imag(a), xp.real(b), xp.imag(b)
    zero, one, inf = _full(xp, ar, 0), _full(xp, ar, 1), _full(xp, ar, float("inf"))
    with _quiet(xp):
        r_ratio, i_ratio = br / bi, bi / br
        r_denominator, i_denominator = bi + r_ratio * br, br + i_ratio * bi
        imag_larger = xp.abs(br) < xp.abs(bi)
        real = xp.where(imag_larger, (r_ratio * ar + ai) / r_denominator, (i_ratio * ai + ar) / i_denominator)
        imag = xp.where(imag_larger, (r_ratio * ai - ar) / r_denominator, (ai - i_ratio * ar) / i_denominator)
        a_finite, b_finite = xp.isfinite(ar) & xp.isfinite(ai), xp.isfinite(br) & xp.isfinite(bi)
        a_infinite, b_infinite = xp.isinf(ar) | xp.isinf(ai), xp.isinf(br) | xp.isinf(bi)
        zero_divisor = (br == 0) & (bi == 0) & ~(xp.isnan(ar) & xp.isnan(ai))
        signed_inf = xp.copysign(inf, br)
        ar_inf, ai_inf = (xp.copysign(xp.where(xp.isinf(v), one, zero), v) for v in (ar, ai))
        br_inf, bi_inf = (xp.copysign(xp.where(xp.isinf(v), one, zero), v) for v in (br, bi))
        cases = [  # (where, real, imag), the first that holds wins
            (zero_divisor, signed_inf * ar, signed_inf * ai),
            (a_infinite & b_finite, inf * (ar_inf * br + ai_inf * bi), inf * (ai_inf * br - ar_inf * bi)),
            (b_infinite & a_finite, zero * (ar * br_inf + ai * bi_inf), zero * (ai * br_inf - ar * bi_inf)),
        ]
        both_nan = xp.isnan(real) & xp.isnan(imag)
        fixed_real, fixed_imag = real, imag
        for where, case_real, case_imag in reversed(cases):
            fixed_real, fixed_imag = xp.where(where, case_real, fixed_real), xp.where(where, case_imag, fixed_imag)
        real, imag = xp.where(both_nan, fixed_real, real), xp.where(both_nan, fixed_imag, imag)
    return make_complex(xp, real, imag)


class _quiet:
    """NumPy's warnings for the divisions by zero and infinities the corner cases above expect."""

    def __init__(self, xp):
        self.errstate = getattr(xp, "errstate", None)

    def __enter__(self):
        self.state = self.errstate(all="ignore") if self.errstate else None
        if self.state is not None:
            self.state.__enter__()

    def __exit__(self, *exc_info):
        if self.state is not None:
            self.state.__exit__(*exc_info)


def remainder(xp, a, b):
    if _is_float(xp, a):
        return xp.fmod(a, b)
    quotient, safe, zero = _truncating_quotient(xp, a, b)
    return xp.where(zero, a, a - quotient * safe)


def power(xp, a, b):
    if _is_float(xp, a):
        return xp.pow(a, b)
    negative = b < 0
    result = a ** xp.where(negative, xp.zeros_like(b), b)
    if _kind(xp, a, "unsigned integer"):
        return result
    # x ** -n is 0 except for 1 and -1 (XLA's integer pow).
    odd = (b % 2) != 0
    small = xp.where(a == 1, _full(xp, a, 1), xp.where(a == -1, xp.where(odd, _full(xp, a, -1), _full(xp, a, 1)),
                                                      _full(xp, a, 0)))
    return xp.where(negative, small, result)


# -- bits ----------------------------------------------------------------------------------
def _shift_amount(xp, x, amount):
    """The shift as an unsigned count (negative counts are huge), and where it is >= the width."""
    count = _view(xp, amount, _unsigned(xp, amount)) if _kind(xp, amount, "signed integer") else amount
    out_of_range = count >= _bits(x)
    return xp.astype(xp.where(out_of_range, xp.zeros_like(count), count), x.dtype), out_of_range


def shift_left(xp, x, amount):
    count, out_of_range = _shift_amount(xp, x, amount)
    return xp.where(out_of_range, xp.zeros_like(x), x << count)


def shift_right_arithmetic(xp, x, amount):
    signed = _view(xp, x, _signed(xp, x)) if _kind(xp, x, "unsigned integer") else x
    count, out_of_range = _shift_amount(xp, signed, amount)
    fill = xp.where(signed < 0, _full(xp, signed, -1), xp.zeros_like(signed))
    result = xp.where(out_of_range, fill, signed >> xp.astype(count, signed.dtype))
    return _view(xp, result, x.dtype)


def shift_right_logical(xp, x, amount):
    unsigned = _view(xp, x, _unsigned(xp, x))
    count, out_of_range = _shift_amount(xp, unsigned, amount)
    result = xp.where(out_of_range, xp.zeros_like(unsigned), unsigned >> xp.astype(count, unsigned.dtype))
    return _view(xp, result, x.dtype)


def population_count(xp, x):
    unsigned = _view(xp, x, _unsigned(xp, x))
    count = xp.zeros_like(unsigned)
    for bit in range(_bits(x)):
        count = count + ((unsigned >> bit) & 1)
    return xp.astype(count, x.dtype)


def count_leading_zeros(xp, x):
    unsigned = _view(xp, x, _unsigned(xp, x))
    width = _bits(x)
    bit_length = xp.zeros(x.shape, dtype=x.dtype)
    for bit in range(width):
        bit_length = xp.where((unsigned >> bit) != 0, _full(xp, bit_length, bit + 1), bit_length)
    return width - bit_length


def logical_not(xp, x):
    return xp.logical_not(x) if xp.isdtype(x.dtype, "bool") else xp.bitwise_invert(x)


# -- rounding and signs ----------------------------------------------------------------------
def round_half_away_from_zero(xp, x):
    truncated = xp.trunc(x)
    return xp.where(xp.abs(x - truncated) >= 0.5, truncated + xp.sign(x), truncated)


def logistic(xp, x):
    one = xp.ones_like(x)
    return one / (one + xp.exp(-x))


def total_order_key(xp, x):
    """Integers ordered like XLA's total order of floats: -NaN < -inf < -0 < +0 < inf < NaN."""
    as_int = _view(xp, x, _signed(xp, x))
    return xp.where(as_int < 0, as_int ^ xp.iinfo(as_int.dtype).max, as_int)


def atan2(xp, y, x):
    """atan2(y, x); of complex operands XLA's definition, -i log((x + iy) / sqrt(x^2 + y^2))."""
    if _kind(xp, y, "complex floating"):  # (NumPy's arctan2 takes real operands only)
        return -1j * xp.log((x + 1j * y) / xp.sqrt(x * x + y * y))
    return xp.atan2(y, x)


UNARY = {
    "abs": lambda xp, x: xp.abs(x),
    "negate": lambda xp, x: -x,
    "exp": lambda xp, x: xp.exp(x),
    "expm1": lambda xp, x: xp.expm1(x),
    "log": lambda xp, x: xp.log(x),
    "log1p": lambda xp, x: xp.log1p(x),
    "sqrt": lambda xp, x: xp.sqrt(x),
    "rsqrt": lambda xp, x: xp.ones_like(x) / xp.sqrt(x),
    "cbrt": lambda xp, x: xp.cbrt(x) if hasattr(xp, "cbrt") else xp.sign(x) * xp.pow(xp.abs(x), 1 / 3),
    "sin": lambda xp, x: xp.sin(x),
    "cos": lambda xp, x: xp.cos(x),
    "tan": lambda xp, x: xp.tan(x),
    "tanh": lambda xp, x: xp.tanh(x),
    "asin": lambda xp, x: xp.asin(x),
    "acos": lambda xp, x: xp.acos(x),
    "sinh": lambda xp, x: xp.sinh(x),
    "cosh": lambda xp, x: xp.cosh(x),
    "asinh": lambda xp, x: xp.asinh(x),
    "acosh": lambda xp, x: xp.acosh(x),
    "atanh": lambda xp, x: xp.atanh(x),
    "logistic": logistic,
    "floor": lambda xp, x: xp.floor(x),
    "ceil": lambda xp, x: xp.ceil(x),
    "round_half_away": round_half_away_from_zero,
    "round_half_even": lambda xp, x: xp.round(x),
    "sign": lambda xp, x: xp.sign(x),
    "is_finite": lambda xp, x: xp.isfinite(x),
    "not": logical_not,
    "popcount": population_count,
    "count_leading_zeros": count_leading_zeros,
    "real": lambda xp, x: xp.real(x),
    "imag": lambda xp, x: xp.imag(x),
}
BINARY = {
    "add": lambda xp, a, b: a + b,
    "subtract": lambda xp, a, b: a - b,
    "multiply": lambda xp, a, b: a * b,
    "divide": divide,
    "remainder": remainder,
    "power": power,
    "maximum": lambda xp, a, b: xp.maximum(a, b),
    "minimum": lambda xp, a, b: xp.minimum(a, b),
    "atan2": atan2,
    "and": lambda xp, a, b: a & b,
    "or": lambda xp, a, b: a | b,
    "xor": lambda xp, a, b: a ^ b,
    "shift_left": shift_left,
    "shift_right_arithmetic": shift_right_arithmetic,
    "shift_right_logical": shift_right_logical,
    "complex": make_complex,
}
COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")


def compare(xp, a, b, direction: str, order: str):
    """``a <direction> b``; ``order``: "" or "float" (natural), "total" (floats), "signed", "unsigned" (bits)."""
    if order == "total" and _kind(xp, a, "real floating"):
        a, b = total_order_key(xp, a), total_order_key(xp, b)
    elif order == "unsigned" and _kind(xp, a, "signed integer"):
        a, b = _view(xp, a, _unsigned(xp, a)), _view(xp, b, _unsigned(xp, b))
    elif order == "signed" and _kind(xp, a, "unsigned integer"):
        a, b = _view(xp, a, _signed(xp, a)), _view(xp, b, _signed(xp, b))
    if direction == "eq":
        return xp.asarray(a == b)
    if direction == "ne":
        return xp.asarray(a != b)
    if direction == "lt":
        return xp.asarray(a < b)
    if direction == "le":
        return xp.asarray(a <= b)
    if direction == "gt":
        return xp.asarray(a > b)
    return xp.asarray(a >= b)


def convert(xp, x, dtype):
    """To ``dtype`` (a backend dtype): float -> int saturates, NaN -> 0; -> bool is != 0; complex -> real drops imag."""
    target = xp.empty((), dtype=dtype).dtype
    if is_extended_float(x.dtype):  # bfloat16, float8 ...: a float32 holds each of their values exactly
        x = xp.astype(x, xp.float32)
    if dtypes.isdtype(xp, target, "bool"):
        return xp.asarray(x != 0)
    if _kind(xp, x, "complex floating") and not dtypes.isdtype(xp, target, "complex floating"):
        x = xp.real(x)
    if _kind(xp, x, "real floating") and dtypes.isdtype(xp, target, "integral"):
        info = integer_info(target) if is_extended(target) else xp.iinfo(target)  # int4 ... too
        truncated = xp.trunc(xp.where(xp.isnan(x), xp.zeros_like(x), x))
        # Compare in float64 so the bounds themselves are exact.
        wide = xp.astype(truncated, xp.float64)
        low, high = xp.full(x.shape, info.min, dtype=dtype), xp.full(x.shape, info.max, dtype=dtype)
        inside = xp.astype(xp.clip(wide, float(info.min), float(info.max)), dtype)
        return xp.where(wide >= float(info.max), high, xp.where(wide <= float(info.min), low, inside))
    return xp.astype(xp.asarray(x), dtype)
