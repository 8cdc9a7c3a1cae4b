"""Reading the bits of one number type as another (NumPy's ``view``), built from array-API functions,
for namespaces that have no bitcast (the standard has none).

Integers of one width become each other through the top bit.  A float32 or float64 becomes its
IEEE-754 fields by arithmetic: the exponent from log2 (then corrected, since log2 rounds), the
mantissa by scaling with powers of two (exact), zeros, subnormals, infinities and NaN by cases; and
back.  All of it is exact, except that a NaN comes out as the canonical quiet NaN of its sign
(its payload is lost both ways).  Types of different widths are refused by name.
"""

from __future__ import annotations

from kuiper.errors import UnsupportedOperatorError
from kuiper.ir import dtypes

# float width -> (exponent bits, mantissa bits); the standard has no float16.
_FLOAT_FIELDS = {32: (8, 23), 64: (11, 52)}


def bitcast(xp, x, dtype):
    """The bits of ``x`` read as ``dtype``, a type of the same width."""
    source, target = dtypes.name_of(x.dtype), dtypes.name_of(dtype)
    width = dtypes.bits(source)
    if source == target:
        return x
    if dtypes.bits(target) != width or not all(xp.isdtype(d, ("integral", "real floating")) for d in (x.dtype, dtype)):
        raise UnsupportedOperatorError(
            f"reading the bits of {source} as {target} needs a bitcast, which the array API standard lacks "
            "(kuiper's fallback reads integers and float32/float64 of one width as each other)")
    if xp.isdtype(x.dtype, "integral") and xp.isdtype(dtype, "integral"):
        return _integers(xp, x, dtype, width)
    unsigned = dtypes.array_dtype(xp, f"uint{width}")
    if xp.isdtype(x.dtype, "real floating"):
        return _integers(xp, _float_to_bits(xp, x, unsigned, width), dtype, width)
    return _bits_to_float(xp, _integers(xp, x, unsigned, width), dtype, width)


def _integers(xp, x, dtype, width: int):
    """An integer type read as another of the same width: the low bits kept, the top bit moved."""
    if x.dtype == dtype:
        return x
    top = width - 1  # the sign bit of a signed type, the top bit of an unsigned one
    low = xp.astype(x & xp.asarray(2**top - 1, dtype=x.dtype), dtype)
    high = (x < 0) if xp.isdtype(x.dtype, "signed integer") else ((x >> top) != 0)
    if xp.isdtype(dtype, "signed integer"):
        return xp.where(high, low + xp.iinfo(dtype).min, low)
    return low | (xp.astype(high, dtype) << top)


def _float_to_bits(xp, x, unsigned, width: int):
    exponent_bits, mantissa_bits = _FLOAT_FIELDS[width]
    bias = 2 ** (exponent_bits - 1) - 1
    wide = xp.astype(x, xp.float64)  # every float32 and float64 is a float64; the steps below are exact
    magnitude = xp.abs(wide)
    finite_nonzero = xp.isfinite(wide) & (magnitude > 0)
    safe = xp.where(finite_nonzero, magnitude, xp.ones_like(magnitude))
    exponent = xp.clip(xp.floor(xp.log2(safe)), None, float(bias))  # (log2 of the largest float64 rounds to 1024)
    exponent = xp.where(_power_of_two(xp, exponent) > safe, exponent - 1, exponent)  # log2 rounds up at times
    exponent = xp.where(_power_of_two(xp, exponent) <= safe / 2, exponent + 1, exponent)  # (2^1024 is no float64)
    normal = finite_nonzero & (exponent >= 1 - bias)
    fraction = (safe / _power_of_two(xp, exponent) - 1) * 2.0**mantissa_bits
    # A subnormal's mantissa is its value in units of the smallest one, 2^(1 - bias - mantissa_bits),
    # scaled in two steps (2^1074 is no float64).
    half = (bias - 1 + mantissa_bits) // 2
    tiny = xp.where(finite_nonzero & ~normal, safe, xp.zeros_like(safe))  # (others scaled so would overflow)
    subnormal = tiny * 2.0**half * 2.0 ** (bias - 1 + mantissa_bits - half)
    mantissa = xp.where(normal, fraction, xp.where(finite_nonzero, subnormal, xp.zeros_like(safe)))
    mantissa = xp.where(xp.isnan(wide), xp.full_like(safe, 2.0 ** (mantissa_bits - 1)), mantissa)  # quiet NaN
    field = xp.where(normal, exponent + bias, xp.zeros_like(exponent))
    field = xp.where(xp.isfinite(wide), field, xp.full_like(field, 2**exponent_bits - 1))
    bits = (xp.astype(field, unsigned) << mantissa_bits) | xp.astype(mantissa, unsigned)
    return bits | (xp.astype(xp.signbit(wide), unsigned) << (width - 1))


def _bits_to_float(xp, bits, dtype, width: int):
    exponent_bits, mantissa_bits = _FLOAT_FIELDS[width]
    bias = 2 ** (exponent_bits - 1) - 1
    top = 2**exponent_bits - 1
    field = xp.astype((bits >> mantissa_bits) & xp.asarray(top, dtype=bits.dtype), xp.float64)
    mantissa = xp.astype(bits & xp.asarray(2**mantissa_bits - 1, dtype=bits.dtype), xp.float64)
    half = (bias - 1 + mantissa_bits) // 2
    subnormal = mantissa * 2.0**-half * 2.0 ** -(bias - 1 + mantissa_bits - half)
    safe_field = xp.where((field > 0) & (field < top), field, xp.ones_like(field))
    normal = (mantissa + 2.0**mantissa_bits) * _power_of_two(xp, safe_field - bias - mantissa_bits)
    value = xp.where(field == 0, subnormal, normal)
    special = xp.where(mantissa == 0, xp.full_like(value, float("inf")), xp.full_like(value, float("nan")))
    value = xp.where(field == top, special, value)
    negative = (bits >> (width - 1)) != 0
    return xp.astype(xp.where(negative, -value, value), dtype)


def _power_of_two(xp, exponent):
    """2 ** exponent for integral float64 exponents, exactly (a power of two is a float64 down to 2^-1074)."""
    return xp.pow(xp.full_like(exponent, 2.0), exponent)
