"""HLO elementwise opcodes with XLA's semantics (not NumPy's).

Where the two differ: integer divide and remainder truncate toward zero and are defined
for a zero divisor (x/0 = -1, x%0 = x) and for INT_MIN/-1; shifts by the bit width or more
give 0 (or the sign for arithmetic right shifts); shift-right-logical of negatives shifts
in zeros; float -> int conversion saturates and maps NaN to 0; round-nearest-afz rounds
halves away from zero; integer overflow wraps; compare ``type=TOTALORDER`` orders
-NaN < -inf < -0 < +0 < inf < NaN.
"""

from __future__ import annotations

from typing import ClassVar

from ..ops.elementwise import ElementwiseOp
from .ir_math import ir_math
from .ops_base import HloOp


def _bits(x) -> int:
    return x.dtype.itemsize * 8


def _is_float(x) -> bool:
    return x.dtype.kind in "fc"


def _unsigned(xp, x):
    return getattr(xp, f"uint{_bits(x)}")


def _signed(xp, x):
    return getattr(xp, f"int{_bits(x)}")


def _full(xp, like, value):
    return xp.full(like.shape, value, dtype=like.dtype)


# -- integer division ----------------------------------------------------------------------
def _truncating_quotient(xp, a, b):
    """(quotient truncated toward zero, the divisor actually used, where b was 0)."""
    zero = b == 0
    safe = xp.where(zero, _full(xp, b, 1), b)
    if a.dtype.kind == "i":
        smallest = xp.iinfo(a.dtype).min
        safe = xp.where((a == smallest) & (safe == -1), _full(xp, safe, 1), safe)  # INT_MIN / -1 = INT_MIN
    quotient = a // safe  # floors
    remainder = a - quotient * safe
    # Floor and truncation differ when the division is inexact and the signs differ.
    quotient = xp.where((remainder != 0) & ((a < 0) != (safe < 0)), quotient + 1, quotient)
    return quotient, safe, zero


def divide(xp, a, b):
    if _is_float(a):
        return a / b
    quotient, _, zero = _truncating_quotient(xp, a, b)
    all_ones = -1 if a.dtype.kind == "i" else xp.iinfo(a.dtype).max
    return xp.where(zero, _full(xp, quotient, all_ones), quotient)


def remainder(xp, a, b):
    if _is_float(a):
        return xp.fmod(a, b)
    quotient, safe, zero = _truncating_quotient(xp, a, b)
    return xp.where(zero, a, a - quotient * safe)


def power(xp, a, b):
    if _is_float(a):
        return xp.pow(a, b)
    negative = b < 0
    result = a ** xp.where(negative, xp.zeros_like(b), b)
    if a.dtype.kind == "u":
        return result
    # x ** -n is 0 except for 1 and -1 (XLA's integer pow).
    odd = (b % 2) != 0
    small = xp.where(a == 1, _full(xp, a, 1), xp.where(a == -1, xp.where(odd, _full(xp, a, -1), _full(xp, a, 1)),
                                                      _full(xp, a, 0)))
    return xp.where(negative, small, result)


# -- bits ----------------------------------------------------------------------------------
def _shift_amount(xp, x, amount):
    """The shift as an unsigned count (negative counts are huge), and where it is >= the width."""
    count = amount.view(_unsigned(xp, amount)) if amount.dtype.kind == "i" else amount
    out_of_range = count >= _bits(x)
    return xp.where(out_of_range, xp.zeros_like(count), count).astype(x.dtype), out_of_range


def shift_left(xp, x, amount):
    count, out_of_range = _shift_amount(xp, x, amount)
    return xp.where(out_of_range, xp.zeros_like(x), x << count)


def shift_right_arithmetic(xp, x, amount):
    signed = x.view(_signed(xp, x)) if x.dtype.kind == "u" else x
    count, out_of_range = _shift_amount(xp, signed, amount)
    fill = xp.where(signed < 0, _full(xp, signed, -1), xp.zeros_like(signed))
    result = xp.where(out_of_range, fill, signed >> count.astype(signed.dtype))
    return result.view(x.dtype)


def shift_right_logical(xp, x, amount):
    unsigned = x.view(_unsigned(xp, x))
    count, out_of_range = _shift_amount(xp, unsigned, amount)
    result = xp.where(out_of_range, xp.zeros_like(unsigned), unsigned >> count.astype(unsigned.dtype))
    return result.view(x.dtype)


def population_count(xp, x):
    unsigned = x.view(_unsigned(xp, x))
    count = xp.zeros_like(unsigned)
    for bit in range(_bits(x)):
        count = count + ((unsigned >> bit) & 1)
    return count.astype(x.dtype)


def count_leading_zeros(xp, x):
    unsigned = x.view(_unsigned(xp, x))
    width = _bits(x)
    bit_length = xp.zeros(x.shape, dtype=x.dtype)
    for bit in range(width):
        bit_length = xp.where((unsigned >> bit) != 0, _full(xp, bit_length, bit + 1), bit_length)
    return width - bit_length


def logical_not(xp, x):
    return xp.logical_not(x) if x.dtype.kind == "b" else xp.bitwise_invert(x)


# -- rounding and signs ----------------------------------------------------------------------
def round_half_away_from_zero(xp, x):
    truncated = xp.trunc(x)
    return xp.where(xp.abs(x - truncated) >= 0.5, truncated + xp.sign(x), truncated)


def logistic(xp, x):
    one = xp.ones_like(x)
    return one / (one + xp.exp(-x))


def total_order_key(xp, x):
    """Integers ordered like XLA's total order of floats: -NaN < -inf < -0 < +0 < inf < NaN."""
    as_int = x.view(_signed(xp, x))
    return xp.where(as_int < 0, as_int ^ xp.iinfo(as_int.dtype).max, as_int)


UNARY = {
    "abs": lambda xp, x: xp.abs(x),
    "negate": lambda xp, x: -x,
    "exponential": lambda xp, x: xp.exp(x),
    "exponential-minus-one": lambda xp, x: xp.expm1(x),
    "log": lambda xp, x: xp.log(x),
    "log-plus-one": lambda xp, x: xp.log1p(x),
    "sqrt": lambda xp, x: xp.sqrt(x),
    "rsqrt": lambda xp, x: xp.ones_like(x) / xp.sqrt(x),
    "cbrt": lambda xp, x: xp.cbrt(x),
    "sine": lambda xp, x: xp.sin(x),
    "cosine": lambda xp, x: xp.cos(x),
    "tan": lambda xp, x: xp.tan(x),
    "tanh": lambda xp, x: xp.tanh(x),
    "logistic": logistic,
    "floor": lambda xp, x: xp.floor(x),
    "ceil": lambda xp, x: xp.ceil(x),
    "round-nearest-afz": round_half_away_from_zero,
    "round-nearest-even": lambda xp, x: xp.round(x),
    "sign": lambda xp, x: xp.sign(x),
    "is-finite": lambda xp, x: xp.isfinite(x),
    "not": logical_not,
    "popcnt": population_count,
    "count-leading-zeros": count_leading_zeros,
    "clz": count_leading_zeros,
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
    "atan2": lambda xp, a, b: xp.atan2(a, b),
    "and": lambda xp, a, b: a & b,
    "or": lambda xp, a, b: a | b,
    "xor": lambda xp, a, b: a ^ b,
    "shift-left": shift_left,
    "shift-right-arithmetic": shift_right_arithmetic,
    "shift-right-logical": shift_right_logical,
    "complex": lambda xp, a, b: a + b * 1j,
}


class _Elementwise(ElementwiseOp, HloOp):
    """Runs the instruction as tensor IR (fusable) where the IR has XLA's semantics, else XLA-exact code."""

    @classmethod
    def elementwise(cls, node):
        return ir_math(node.params.get("module"), node.params.get("instruction"))

    def setup(self):
        HloOp.setup(self)
        self.math = ir_math(self.module, self.instruction)
        self._compiled = {}

    def forward(self, *inputs):
        if self.math is not None:
            return ElementwiseOp.forward(self, *inputs)
        result = self.xla(*inputs)
        if any(result is value for value in inputs):
            result = self.xp.asarray(result, copy=True)  # outputs are always fresh arrays
        return result

    def xla(self, *inputs):
        raise NotImplementedError


class Elementwise(_Elementwise):
    """Unary and binary math on arrays of the same shape."""

    types = tuple(f"hlo.{opcode}" for opcode in (*UNARY, *BINARY, "erf"))

    def hlo_setup(self):
        opcode = self.instruction.opcode
        self.require_inputs(2 if opcode in BINARY else 1)
        self.function = UNARY.get(opcode) or BINARY.get(opcode)

    def xla(self, *inputs):
        if self.function is None:  # erf on a type the IR lacks
            result = self.backend.erf(inputs[0])
        else:
            result = self.function(self.xp, *inputs)
        result = self.xp.asarray(result)
        dtype = self.dtype()
        return result if result.dtype == dtype else result.astype(dtype)


class Compare(_Elementwise):
    types = ("hlo.compare",)
    DIRECTIONS = ("EQ", "NE", "LT", "LE", "GT", "GE")

    def hlo_setup(self):
        self.direction = self.word("direction")
        if self.direction not in self.DIRECTIONS:
            raise self.unsupported("direction", self.direction, self.DIRECTIONS)
        self.type = self.word("type", "")
        if self.type not in ("", "FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"):
            raise self.unsupported("type", self.type, ("FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"))

    def xla(self, a, b):
        xp = self.xp
        if self.type == "TOTALORDER" and a.dtype.kind == "f":
            a, b = total_order_key(xp, a), total_order_key(xp, b)
        elif self.type == "UNSIGNED" and a.dtype.kind == "i":
            a, b = a.view(_unsigned(xp, a)), b.view(_unsigned(xp, b))
        elif self.type == "SIGNED" and a.dtype.kind == "u":
            a, b = a.view(_signed(xp, a)), b.view(_signed(xp, b))
        direction = self.direction
        if direction == "EQ":
            return xp.asarray(a == b)
        if direction == "NE":
            return xp.asarray(a != b)
        if direction == "LT":
            return xp.asarray(a < b)
        if direction == "LE":
            return xp.asarray(a <= b)
        if direction == "GT":
            return xp.asarray(a > b)
        return xp.asarray(a >= b)


class Select(_Elementwise):
    types = ("hlo.select",)

    def xla(self, predicate, on_true, on_false):
        return self.xp.where(predicate, on_true, on_false)


class Clamp(_Elementwise):
    """clamp(low, x, high); low and high may be scalars."""

    types = ("hlo.clamp",)

    def xla(self, low, x, high):
        return self.xp.asarray(self.xp.minimum(self.xp.maximum(x, low), high)).astype(x.dtype)


class Convert(_Elementwise):
    """Element type conversion: float -> int saturates, NaN -> 0; -> pred is != 0; complex -> real drops imag."""

    types = ("hlo.convert",)

    def xla(self, x):
        xp = self.xp
        dtype = self.dtype()
        target = self.result.dtype
        if target == "bool":
            return xp.asarray(x != 0)
        if x.dtype.kind == "c" and not target.startswith("complex"):
            x = xp.real(x)
        if x.dtype.kind == "f" and target[0] in "iu":
            info = xp.iinfo(dtype)
            truncated = xp.trunc(xp.where(xp.isnan(x), xp.zeros_like(x), x))
            # Compare in float64 so the bounds themselves are exact.
            wide = truncated.astype(xp.float64)
            low, high = xp.full(x.shape, info.min, dtype=dtype), xp.full(x.shape, info.max, dtype=dtype)
            inside = xp.clip(wide, float(info.min), float(info.max)).astype(dtype)
            return xp.where(wide >= float(info.max), high, xp.where(wide <= float(info.min), low, inside))
        return xp.asarray(x).astype(dtype)


class BitcastConvert(HloOp):
    """Reinterpret the bits; a narrower type adds a minor dimension, a wider one removes it."""

    types = ("hlo.bitcast-convert",)

    def forward(self, x):
        contiguous = self.xp.asarray(x, copy=True)
        return self.xp.reshape(contiguous.view(self.dtype()), self.result.dims)


class ReducePrecision(HloOp):
    """Round to a float with ``exponent_bits``/``mantissa_bits`` and back (XLA's bit-level algorithm)."""

    types = ("hlo.reduce-precision",)
    LAYOUT: ClassVar[dict] = {2: (5, 10), 4: (8, 23), 8: (11, 52)}  # itemsize -> (exponent, mantissa bits)

    def hlo_setup(self):
        self.exponent_bits = self.integer("exponent_bits")
        self.mantissa_bits = self.integer("mantissa_bits")

    def forward(self, x):
        xp = self.xp
        source_exponent, source_mantissa = self.LAYOUT[x.dtype.itemsize]
        unsigned_type = _unsigned(xp, x)
        bits = x.view(unsigned_type)

        def const(value):
            return xp.asarray(value, dtype=unsigned_type)

        if self.mantissa_bits < source_mantissa:
            drop = source_mantissa - self.mantissa_bits
            last_bit_mask = const(1 << drop)
            last_bit = (bits & last_bit_mask) >> const(drop)
            bits = (bits + last_bit + const((1 << (drop - 1)) - 1)) & ~const((1 << drop) - 1)
        if self.exponent_bits < source_exponent:
            width = x.dtype.itemsize * 8
            exponent_mask = const(((1 << source_exponent) - 1) << source_mantissa)
            bias = (1 << (source_exponent - 1)) - 1
            reduced_bias = (1 << (self.exponent_bits - 1)) - 1
            exponent = bits & exponent_mask
            overflows = exponent > const((bias + reduced_bias) << source_mantissa)
            underflows = exponent <= const((bias - reduced_bias) << source_mantissa)
            signed_zero = bits & const(1 << (width - 1))
            bits = xp.where(overflows, signed_zero | exponent_mask, bits)
            bits = xp.where(underflows, signed_zero, bits)
        result = bits.view(x.dtype)
        return xp.where(xp.isnan(x), x, result) if self.mantissa_bits > 0 else result


OPS = [Elementwise, Compare, Select, Clamp, Convert, BitcastConvert, ReducePrecision]
