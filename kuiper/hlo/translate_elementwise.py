"""HLO elementwise opcodes -> the canonical ``Elementwise`` op (IR where it can be, so chains fuse),
and the bit-level ``BitcastConvert`` and ``ReducePrecision``.

XLA's semantics (truncating integer division, saturating conversion, out-of-range shifts,
total-order compares ...) are the op set's own: see kuiper/ops/elementwise_ir.py.
"""

from __future__ import annotations

from ..ir import dtypes
from ..model_ir import OpNode
from .site import Site
from .translate_common import integer, operand, result, word

FUNCTIONS = {
    # unary
    "abs": "abs", "negate": "negate", "exponential": "exp", "exponential-minus-one": "expm1", "log": "log",
    "log-plus-one": "log1p", "sqrt": "sqrt", "rsqrt": "rsqrt", "cbrt": "cbrt", "sine": "sin", "cosine": "cos",
    "tan": "tan", "tanh": "tanh", "logistic": "logistic", "floor": "floor", "ceil": "ceil",
    "round-nearest-afz": "round_half_away", "round-nearest-even": "round_half_even", "sign": "sign",
    "is-finite": "is_finite", "not": "not", "popcnt": "popcount", "count-leading-zeros": "count_leading_zeros",
    "clz": "count_leading_zeros", "real": "real", "imag": "imag", "erf": "erf", "asin": "asin", "acos": "acos",
    "sinh": "sinh", "cosh": "cosh", "asinh": "asinh", "acosh": "acosh", "atanh": "atanh",
    # binary
    "add": "add", "subtract": "subtract", "multiply": "multiply", "divide": "divide", "remainder": "remainder",
    "power": "power", "maximum": "maximum", "minimum": "minimum", "atan2": "atan2", "and": "and", "or": "or",
    "xor": "xor", "shift-left": "shift_left", "shift-right-arithmetic": "shift_right_arithmetic",
    "shift-right-logical": "shift_right_logical", "complex": "complex",
    # others
    "select": "select", "clamp": "clamp", "compare": "compare", "convert": "convert",
}
DIRECTIONS = {"EQ": "eq", "NE": "ne", "LT": "lt", "LE": "le", "GT": "gt", "GE": "ge"}
ORDERS = {"": "", "FLOAT": "float", "TOTALORDER": "total", "SIGNED": "signed", "UNSIGNED": "unsigned"}


def translate_elementwise(site: Site) -> list[OpNode]:
    opcode = site.instruction.opcode
    operands = [operand(site, i).dtype for i in range(len(site.instruction.operands))]
    params = {"function": FUNCTIONS[opcode], "operand_dtypes": operands, "dtype": result(site).dtype}
    if opcode == "compare":
        direction, order = word(site, "direction"), word(site, "type", "")
        if direction not in DIRECTIONS:
            raise site.error(f"direction={direction!r} is not one of {', '.join(DIRECTIONS)}")
        if order not in ORDERS:
            raise site.error(f"type={order!r} is not one of {', '.join(o for o in ORDERS if o)}")
        params.update(direction=DIRECTIONS[direction], order=ORDERS[order])
    return [site.op("Elementwise", site.inputs, site.outputs, params)]


def translate_bitcast_convert(site: Site) -> list[OpNode]:
    source, target = operand(site, 0).dtype, result(site).dtype
    if source != target and (dtypes.is_extended(source) or dtypes.is_extended(target)):
        source_bits, target_bits = dtypes.bits(source), dtypes.bits(target)
        if source_bits != target_bits and min(source_bits, target_bits) < 8:
            # ml_dtypes holds an s4 or f4 value in a byte of its own; XLA packs them two to a byte.
            raise site.error(f"bitcast-convert between {operand(site, 0).element_type} and "
                             f"{result(site).element_type} packs sub-byte values, which kuiper does not")
    return [site.op("BitcastConvert", site.inputs, site.outputs, {"dtype": result(site).dtype})]


def translate_reduce_precision(site: Site) -> list[OpNode]:
    params = {"exponent_bits": integer(site, "exponent_bits"), "mantissa_bits": integer(site, "mantissa_bits")}
    return [site.op("ReducePrecision", site.inputs, site.outputs, params)]


TRANSLATORS = {
    **{opcode: translate_elementwise for opcode in FUNCTIONS},
    "bitcast-convert": translate_bitcast_convert,
    "reduce-precision": translate_reduce_precision,
}
