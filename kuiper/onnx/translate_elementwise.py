"""ONNX's elementwise ops -> the canonical ``Elementwise`` op (and short chains of it).

ONNX broadcasts its operands multidirectionally, as NumPy does, and so does the canonical op.
Integer ``Div`` truncates toward zero, as the canonical ``divide`` does; ``Mod`` with ``fmod=0``
takes the divisor's sign (Python's rule), built from the canonical ``remainder`` (the dividend's
sign, C's ``fmod``) and a correction.
"""

from __future__ import annotations

import ml_dtypes

from ..model_ir import OpNode
from .emit import Emit
from .site import Site

UNARY = {
    "Abs": "abs", "Neg": "negate", "Exp": "exp", "Log": "log", "Sqrt": "sqrt", "Sin": "sin", "Cos": "cos",
    "Tan": "tan", "Tanh": "tanh", "Sigmoid": "logistic", "Floor": "floor", "Ceil": "ceil",
    "Round": "round_half_even", "Sign": "sign", "Erf": "erf", "Not": "not", "BitwiseNot": "not",
}
BINARY = {
    "Add": "add", "Sub": "subtract", "Mul": "multiply", "Div": "divide", "And": "and", "Or": "or", "Xor": "xor",
    "BitwiseAnd": "and", "BitwiseOr": "or", "BitwiseXor": "xor",
}
COMPARISONS = {"Equal": "eq", "Less": "lt", "LessOrEqual": "le", "Greater": "gt", "GreaterOrEqual": "ge"}
VARIADIC = {"Max": "maximum", "Min": "minimum", "Sum": "add", "Mean": "add"}


def translate_unary(site: Site) -> list[OpNode]:
    emit = Emit(site)
    function = UNARY[site.op_type]
    if site.op_type == "BitwiseNot" and site.dtype(0) != "bool":
        function = "not"  # the canonical not is bitwise on integers, logical on booleans
    emit.fn(function, [site.input(0)], out=site.outputs[0])
    return emit.ops


def translate_binary(site: Site) -> list[OpNode]:
    emit = Emit(site)
    emit.fn(BINARY[site.op_type], [site.input(0), site.input(1)], out=site.outputs[0])
    return emit.ops


def translate_compare(site: Site) -> list[OpNode]:
    emit = Emit(site)
    emit.compare(COMPARISONS[site.op_type], site.input(0), site.input(1), out=site.outputs[0])
    return emit.ops


def translate_variadic(site: Site) -> list[OpNode]:
    """Max, Min, Sum, Mean of any number of operands: a left fold (Mean then divides by the count)."""
    emit = Emit(site)
    operands = [name for name in site.inputs if name]
    if not operands:
        raise site.error("expects at least one input")
    function = VARIADIC[site.op_type]
    final = site.outputs[0]
    if len(operands) == 1 and site.op_type != "Mean":
        emit.op("Identity", operands, dtype=site.dtype(0), out=final)
        return emit.ops
    result = operands[0]
    for position, operand in enumerate(operands[1:], start=2):
        last = position == len(operands) and site.op_type != "Mean"
        result = emit.fn(function, [result, operand], out=final if last else None)
    if site.op_type == "Mean":
        emit.fn("divide", [result, emit.const(len(operands), site.dtype(0))], out=final)
    return emit.ops


def translate_pow(site: Site) -> list[OpNode]:
    emit = Emit(site)
    base, exponent = site.input(0), site.input(1)
    emit.fn("power", [base, emit.convert(exponent, site.dtype(0))], out=site.outputs[0])
    return emit.ops


def translate_mod(site: Site) -> list[OpNode]:
    emit = Emit(site)
    a, b = site.input(0), site.input(1)
    if site.int_("fmod", 0) == 1:
        emit.fn("remainder", [a, b], out=site.outputs[0])
        return emit.ops
    remainder = emit.fn("remainder", [a, b])
    zero = emit.const(0, site.dtype(0))
    signs_differ = emit.compare("ne", emit.compare("lt", remainder, zero), emit.compare("lt", b, zero))
    fix = emit.fn("and", [emit.compare("ne", remainder, zero), signs_differ])
    emit.fn("select", [fix, emit.fn("add", [remainder, b]), remainder], out=site.outputs[0])
    return emit.ops


def translate_reciprocal(site: Site) -> list[OpNode]:
    emit = Emit(site)
    emit.fn("divide", [emit.const(1, site.dtype(0)), site.input(0)], out=site.outputs[0])
    return emit.ops


def translate_bit_shift(site: Site) -> list[OpNode]:
    direction = site.string("direction")
    if direction not in ("LEFT", "RIGHT"):
        raise site.error(f"direction={direction!r} must be LEFT or RIGHT")
    emit = Emit(site)
    signed = site.dtype(0).startswith("int")  # ONNX 1.23 shifts signed integers arithmetically
    function = "shift_left" if direction == "LEFT" else "shift_right_arithmetic" if signed else "shift_right_logical"
    emit.fn(function, [site.input(0), site.input(1)], out=site.outputs[0])
    return emit.ops


def translate_where(site: Site) -> list[OpNode]:
    emit = Emit(site)
    emit.fn("select", [site.input(0), site.input(1), site.input(2)], out=site.outputs[0])
    return emit.ops


def translate_is_nan(site: Site) -> list[OpNode]:
    emit = Emit(site)
    emit.compare("ne", site.input(0), site.input(0), out=site.outputs[0])
    return emit.ops


def translate_is_inf(site: Site) -> list[OpNode]:
    emit = Emit(site)
    x = site.input(0)
    positive, negative = site.int_("detect_positive", 1), site.int_("detect_negative", 1)
    dtype = site.dtype(0)
    checks = []
    if positive:
        checks.append(emit.compare("eq", x, emit.const(float("inf"), dtype)))
    if negative:
        checks.append(emit.compare("eq", x, emit.const(float("-inf"), dtype)))
    if not checks:  # detects nothing: false everywhere (x == x and x != x)
        emit.fn("and", [emit.compare("eq", x, x), emit.compare("ne", x, x)], out=site.outputs[0])
    elif len(checks) == 1:
        emit.op("Identity", checks, dtype="bool", out=site.outputs[0])
    else:
        emit.fn("or", checks, out=site.outputs[0])
    return emit.ops


_NARROW_FLOATS = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float4_e2m1fn")
_NARROW_INTEGERS = ("int4", "uint4", "int2", "uint2")


def translate_cast(site: Site) -> list[OpNode]:
    """Casts to float8/float4 saturate to the target's finite range (``saturate=1``, the default); casts of
    floats to 4- and 2-bit integers truncate to an integer and keep its low bits, as ONNX's tests do; casts to
    float8_e8m0 follow ONNX's bit-level rounding modes (_cast_to_e8m0)."""
    emit = Emit(site)
    value, source, target = site.input(0), site.dtype(0), site.out_dtype(0)
    if target == "float8_e8m0fnu" and source != target:
        return _cast_to_e8m0(site, emit, value, source)
    floating = source.startswith(("float", "bfloat"))
    if floating and target in _NARROW_FLOATS and site.int_("saturate", 1):
        info = ml_dtypes.finfo(target)
        value = emit.fn("clamp", [emit.const(float(info.min), source), value, emit.const(float(info.max), source)])
    elif floating and target in _NARROW_INTEGERS:
        value = emit.convert(value, "int32")  # the integer part first; the narrow type then wraps it
    emit.convert(value, target, out=site.outputs[0])
    return emit.ops


def _cast_to_e8m0(site: Site, emit: Emit, value: str, source: str) -> list[OpNode]:
    """float8_e8m0 is a float32's biased exponent alone (2 ** (e - 127), 255 a NaN). As ONNX's Cast defines it
    on the float32's bits: the exponent field, NaN and infinity giving 255; rounded by ``round_mode`` on
    the mantissa: "down" drops it, "up" adds one to the exponent for any nonzero mantissa, "nearest" when
    its top bit is set and either a lower bit is set or the exponent is not 0; with ``saturate``, 254
    (2 ** 127) does not round up to 255. Negative values: the sign is dropped, as in ONNX's reference."""
    mode, saturate = site.string("round_mode", "up"), site.int_("saturate", 1)
    if mode not in ("up", "down", "nearest"):
        raise site.error(f"round_mode must be 'up', 'down' or 'nearest', found {mode!r}")
    bits = emit.op("BitcastConvert", [emit.convert(value, "float32")], {"dtype": "uint32"}, dtype="uint32")

    def const(number: int) -> str:
        return emit.const(number, "uint32")

    def masked(mask: int) -> str:
        return emit.fn("and", [bits, const(mask)])

    exponent = emit.fn("and", [emit.fn("shift_right_logical", [bits, const(23)]), const(0xFF)])
    special = emit.compare("eq", exponent, const(0xFF))
    if mode == "up":
        round_up = emit.compare("ne", masked(0x7FFFFF), const(0))
    elif mode == "nearest":
        lower_bits = emit.fn("or", [emit.compare("ne", masked(0x200000), const(0)),
                                    emit.compare("ne", masked(0x1FFFFF), const(0))])
        round_up = emit.fn("and", [emit.compare("ne", masked(0x400000), const(0)),
                                   emit.fn("or", [lower_bits, emit.compare("gt", exponent, const(0))])])
    if mode != "down":
        if saturate:
            round_up = emit.fn("and", [round_up, emit.compare("ne", exponent, const(0xFE))])
        exponent = emit.fn("add", [exponent, emit.convert(round_up, "uint32")])
    code = emit.fn("select", [special, const(0xFF), exponent])
    emit.op("BitcastConvert", [emit.convert(code, "uint8")], {"dtype": "float8_e8m0fnu"}, dtype="float8_e8m0fnu",
            out=site.outputs[0])
    return emit.ops


def translate_identity(site: Site) -> list[OpNode]:
    emit = Emit(site)
    emit.op("Identity", [site.input(0)], dtype=site.dtype(0), out=site.outputs[0])
    return emit.ops


TRANSLATORS = {
    **{op_type: translate_unary for op_type in UNARY},
    **{op_type: translate_binary for op_type in BINARY},
    **{op_type: translate_compare for op_type in COMPARISONS},
    **{op_type: translate_variadic for op_type in VARIADIC},
    "Pow": translate_pow, "Mod": translate_mod, "Reciprocal": translate_reciprocal, "BitShift": translate_bit_shift,
    "Where": translate_where, "IsNaN": translate_is_nan, "IsInf": translate_is_inf, "Cast": translate_cast,
    "CastLike": translate_cast, "Identity": translate_identity,
}
