"""Turn a parsed constant literal into a NumPy array of its declared shape and type."""

from __future__ import annotations

import math

import numpy as np

from ..errors import HloSyntaxError, UnsupportedOperatorError
from .module import ELIDED, HloInstruction
from .shapes import ArrayShape

_WORDS = {"true": True, "false": False, "inf": math.inf, "-inf": -math.inf, "nan": math.nan}


def literal_array(instruction: HloInstruction, shape: ArrayShape | None = None, literal=None) -> np.ndarray:
    """The constant's value; ``shape``/``literal`` pick one element of a tuple constant."""
    shape = shape or instruction.shape
    literal = instruction.literal if literal is None else literal
    where = f"constant '{instruction.name}' ({instruction.computation})"
    if literal is ELIDED:
        raise HloSyntaxError(
            f"{where} was printed as {{...}}: the printer left out its values, so the module cannot run. "
            "Dump the HLO with print_large_constants=True (as_hlo_text(print_large_constants=True), or "
            "HloPrintOptions.print_large_constants = True)"
        )
    if shape.dtype is None:
        raise UnsupportedOperatorError(f"{where}: element type {shape.element_type} has no NumPy equivalent")
    complex_type = shape.element_type in ("c64", "c128")
    values: list = []
    try:
        depth = _flatten(literal, values, complex_type)
    except ValueError as exc:
        raise HloSyntaxError(f"{where}: {exc}") from None
    if shape.rank and depth != shape.rank:
        raise HloSyntaxError(f"{where}: the literal nests {depth} level(s) deep, the shape {shape} has rank {shape.rank}")
    if len(values) != shape.size():
        raise HloSyntaxError(f"{where}: the literal has {len(values)} value(s), the shape {shape} holds {shape.size()}")
    try:
        converted = [_scalar(v) for v in values]
        if shape.dtype == "bool" and any(not isinstance(v, bool) and v not in (0, 1) for v in converted):
            raise ValueError("pred values must be true/false or 0/1")
        array = np.array(converted, dtype=np.dtype(shape.dtype))
    except (ValueError, OverflowError, TypeError) as exc:
        raise HloSyntaxError(f"{where}: value does not fit {shape.element_type}: {exc}") from None
    return array.reshape(shape.dims)


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
    if isinstance(value, str):
        return _WORDS[value]
    return value
