"""Turn a parsed constant literal into a NumPy array of its declared shape and type."""

from __future__ import annotations

import math

import numpy as np

from ..errors import HloSyntaxError, UnsupportedOperatorError
from ..ir import dtypes
from .module import ELIDED, HloInstruction, NanPayload
from .shapes import ArrayShape

_WORDS = {"true": True, "false": False, "inf": math.inf, "-inf": -math.inf, "nan": math.nan, "-nan": -math.nan}
# Largest finite value and the spacing of values just below it: a literal rounds to the largest
# finite value (and is accepted, as XLA accepts it) while it is below largest + spacing / 2.
_FLOAT_LIMITS = {
    "f16": (65504.0, 32.0), "bf16": (3.3895313892515355e38, 2.0**120), "f32": (3.4028234663852886e38, 2.0**104),
    "f64": (1.7976931348623157e308, 0.0), "c64": (3.4028234663852886e38, 2.0**104),
    "c128": (1.7976931348623157e308, 0.0), "f8e5m2": (57344.0, 8192.0), "f8e4m3fn": (448.0, 32.0),
    "f8e4m3": (240.0, 16.0), "f8e3m4": (15.5, 0.5), "f8e4m3fnuz": (240.0, 16.0), "f8e5m2fnuz": (57344.0, 8192.0),
    "f8e4m3b11fnuz": (30.0, 2.0), "f4e2m1fn": (6.0, 2.0), "f8e8m0fnu": (1.7014118346046923e38, 2.0**126),
}


# Mantissa bits of the float types whose NaNs carry a payload (an all-ones exponent, as in IEEE 754).
_MANTISSA_BITS = {"f16": 10, "bf16": 7, "f32": 23, "f64": 52}


def _integer_range(element_type: str) -> tuple[int, int] | None:
    """The values an integer literal may take; u64 also takes negatives down to -2^63 (XLA wraps them)."""
    if element_type == "pred":
        return 0, 1
    if element_type[0] not in "su" or not element_type[1:].isdigit():
        return None
    bits = int(element_type[1:])
    if element_type[0] == "s":
        return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return (-(2**63) if bits == 64 else 0), 2**bits - 1


def literal_problem(instruction: HloInstruction) -> str | None:
    """What makes a constant's literal contradict its shape (nesting, counts, value range), or None."""
    shape, literal = instruction.shape, instruction.literal
    if literal is ELIDED:
        return None
    if shape.is_tuple:
        if not isinstance(literal, tuple) or len(literal) != len(shape.elements):
            return f"the literal is not a tuple of {len(shape.elements)} element(s) for the shape {shape}"
        for element_shape, element in zip(shape.elements, literal):
            problem = _array_literal_problem(element_shape, element)
            if problem:
                return problem
        return None
    return _array_literal_problem(shape, literal)


def _array_literal_problem(shape: ArrayShape, literal) -> str | None:
    if shape.is_tuple:
        return None
    if shape.rank and not isinstance(literal, (list, tuple)):
        return _value_problem(shape.element_type, literal)  # one value for every element, as XLA allows
    level = [literal]
    for axis, size in enumerate(shape.dims):  # level by level: every list at depth ``axis`` holds ``size`` items
        following = []
        for items in level:
            if not isinstance(items, list):
                return f"expects nested array in rank {shape.rank}, but sees {axis}"
            if size >= 0 and len(items) != size:
                return f"dimension {axis} holds {len(items)} value(s), the shape {shape} says {size}"
            following.extend(items)
        level = following
    for value in level:
        if isinstance(value, list):
            return f"expects nested array in rank {shape.rank}, but sees larger"
        problem = _value_problem(shape.element_type, value)
        if problem:
            return problem
    return None


def _value_problem(element_type: str, value) -> str | None:
    if isinstance(value, tuple):
        if element_type not in ("c64", "c128") or len(value) != 2:
            return f"a tuple {value} where a {element_type} value was expected"
        return _value_problem(element_type, value[0]) or _value_problem(element_type, value[1])
    if isinstance(value, NanPayload):
        bits = _MANTISSA_BITS.get(element_type)
        if bits is None:
            return f"a NaN payload where a {element_type} value was expected (f16, bf16, f32 and f64 NaNs carry one)"
        if not 0 < value.payload < 2**bits:
            return f"NaN payload 0x{value.payload:x} does not fit the {bits} mantissa bits of {element_type}"
        return None
    limits = _FLOAT_LIMITS.get(element_type)
    if limits is not None:
        number = _WORDS.get(value, value) if isinstance(value, str) else value
        if isinstance(number, bool) or not isinstance(number, (int, float)):
            return f"value {value!r} is not a number for {element_type}"
        largest, spacing = limits
        if not math.isfinite(number) and isinstance(value, str):
            return None  # inf, -inf, nan written as words
        if not math.isfinite(number) or abs(number) >= largest + spacing / 2 and abs(number) > largest:
            return f"value {value} is out of range for literal's primitive type {element_type}, " \
                   f"namely [{-largest}, {largest}]"
        return None
    bounds = _integer_range(element_type)
    if bounds is not None:
        if isinstance(value, str) and value in ("true", "false"):
            return None
        if not isinstance(value, int):
            return f"value {value!r} is not an integer for {element_type}"
        low, high = bounds
        if not low <= value <= high:
            return f"value {value} is out of range for literal's primitive type {element_type}, namely [{low}, {high}]"
    return None


def literal_array(instruction: HloInstruction, shape: ArrayShape | None = None, literal=None) -> np.ndarray:
    """The constant's value; ``shape``/``literal`` pick one element of a tuple constant."""
    shape = shape or instruction.shape
    literal = instruction.literal if literal is None else literal
    where = f"constant '{instruction.name}' ({instruction.computation})"
    if isinstance(literal, np.ndarray):  # a parameter bound to an array at load time (bind.py), checked there
        return literal
    if literal is ELIDED:
        raise HloSyntaxError(
            f"{where} was printed as {{...}}: the printer left out its values, so the module cannot run. "
            "Dump the HLO with print_large_constants=True (as_hlo_text(print_large_constants=True), or "
            "HloPrintOptions.print_large_constants = True)"
        )
    if shape.dtype is None:
        raise UnsupportedOperatorError(f"{where}: element type {shape.element_type} holds no numbers")
    complex_type = shape.element_type in ("c64", "c128")
    if shape.rank and not isinstance(literal, (list, tuple)):  # ``s8[10] constant(1)``: one value for all
        literal = _filled(literal, shape.dims)
    values: list = []
    try:
        depth = _flatten(literal, values, complex_type)
    except ValueError as exc:
        raise HloSyntaxError(f"{where}: {exc}") from None
    empty_at = next((axis for axis, dim in enumerate(shape.dims) if dim == 0), None)
    # XLA prints an empty array's literal down to its first zero dim only: f32[2,0,4] is { {}, {} }.
    printed_to_empty_dim = empty_at is not None and not values and depth == empty_at + 1
    if shape.rank and depth != shape.rank and not printed_to_empty_dim:
        raise HloSyntaxError(f"{where}: the literal nests {depth} level(s) deep, the shape {shape} has rank {shape.rank}")
    if len(values) != shape.size():
        raise HloSyntaxError(f"{where}: the literal has {len(values)} value(s), the shape {shape} holds {shape.size()}")
    try:
        converted = [_scalar(v) for v in values]
        if shape.element_type == "u64":  # XLA wraps negative u64 literals: -1 is 2^64 - 1
            converted = [v % 2**64 if isinstance(v, int) and v < 0 else v for v in converted]
        if shape.dtype == "bool" and any(not isinstance(v, bool) and v not in (0, 1) for v in converted):
            raise ValueError("pred values must be true/false or 0/1")
        array = np.array(converted, dtype=dtypes.array_dtype(np, shape.dtype))
    except (ValueError, OverflowError, TypeError) as exc:
        raise HloSyntaxError(f"{where}: value does not fit {shape.element_type}: {exc}") from None
    payloads = [(i, v) for i, v in enumerate(values) if isinstance(v, NanPayload)]
    if payloads:
        _set_nan_payloads(array, payloads, _MANTISSA_BITS[shape.element_type])
    return array.reshape(shape.dims)


def _set_nan_payloads(array: np.ndarray, payloads: list[tuple[int, NanPayload]], mantissa_bits: int) -> None:
    """Write each NaN's bits: its sign, an all-ones exponent and its payload as the mantissa."""
    width = array.dtype.itemsize * 8
    bits = array.view(f"uint{width}")
    exponent = ((1 << (width - 1 - mantissa_bits)) - 1) << mantissa_bits
    for index, nan in payloads:
        bits[index] = (nan.negative << (width - 1)) | exponent | nan.payload


def _filled(value, dims: tuple[int, ...]) -> list:
    """Nested lists of ``dims`` holding ``value`` everywhere."""
    nested = value
    for size in reversed(dims):
        nested = [nested] * size
    return nested


def _flatten(literal, out: list, complex_type: bool) -> int:
    """Append the scalars to ``out``; return the nesting depth."""
    if isinstance(literal, list):
        depths = {_flatten(item, out, complex_type) for item in literal}
        return 1 + (depths.pop() if len(depths) == 1 else max(depths, default=0))
    if isinstance(literal, tuple) and complex_type and len(literal) == 2:
        out.append(complex(_scalar(literal[0]), _scalar(literal[1])))
        return 0
    if isinstance(literal, tuple):
        raise ValueError("a tuple literal where an array element was expected")  # noqa: TRY004 (caught above)
    out.append(literal)
    return 0


def _scalar(value):
    if isinstance(value, NanPayload):
        return -math.nan if value.negative else math.nan  # its bits are written after (_set_nan_payloads)
    if isinstance(value, str):
        return _WORDS[value]
    return value
