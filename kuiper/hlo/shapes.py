"""HLO shapes: arrays with an element type, dims and an optional layout, and (nested) tuples."""

from __future__ import annotations

from dataclasses import dataclass

# HLO element type -> the dtype name kuiper computes with (kuiper.ir.dtypes resolves it: NumPy's
# own names, or ml_dtypes' for the types NumPy lacks), None for types that hold no numbers.
ELEMENT_TYPES: dict[str, str | None] = {
    "pred": "bool",
    "s8": "int8", "s16": "int16", "s32": "int32", "s64": "int64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
    "f16": "float16", "f32": "float32", "f64": "float64",
    "c64": "complex64", "c128": "complex128",
    "s1": "int1", "s2": "int2", "s4": "int4", "u1": "uint1", "u2": "uint2", "u4": "uint4",
    "bf16": "bfloat16",
    "f4e2m1fn": "float4_e2m1fn", "f8e3m4": "float8_e3m4", "f8e4m3": "float8_e4m3", "f8e4m3fn": "float8_e4m3fn",
    "f8e4m3b11fnuz": "float8_e4m3b11fnuz", "f8e4m3fnuz": "float8_e4m3fnuz", "f8e5m2": "float8_e5m2",
    "f8e5m2fnuz": "float8_e5m2fnuz", "f8e8m0fnu": "float8_e8m0fnu",
    "token": None, "opaque": None,
}


@dataclass(frozen=True)
class Layout:
    """``{minor_to_major}`` plus anything after ``:`` (tiling, memory space) kept as text."""

    minor_to_major: tuple[int, ...]
    extra: str = ""

    def __str__(self) -> str:
        extra = f":{self.extra}" if self.extra else ""
        return "{" + ",".join(map(str, self.minor_to_major)) + extra + "}"


@dataclass(frozen=True)
class ArrayShape:
    """``f32[2,<=3,?]{1,0}``: element type, dims (bounded dims keep their bound), dynamic flags.

    ``buffer`` marks XLA's buffer shape ``b(f32[2,4])``: a reference to an array (what the ``Pin`` and
    ``CreateBuffer`` custom calls give), not the array's value.
    """

    element_type: str
    dims: tuple[int, ...]
    dynamic: tuple[bool, ...] = ()
    layout: Layout | None = None
    buffer: bool = False

    is_tuple = False

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def dtype(self) -> str | None:
        """The dtype name (``float32``, ``bfloat16`` ...), None for a token or opaque value."""
        return ELEMENT_TYPES[self.element_type]

    def size(self) -> int:
        count = 1
        for dim in self.dims:
            count *= dim
        return count

    def leaves(self) -> list[ArrayShape]:
        return [self]

    def same_dims(self, other: Shape) -> bool:
        return not other.is_tuple and self.dims == other.dims

    def __str__(self) -> str:
        dims = ",".join(
            ("<=" if dynamic and dim >= 0 else "") + (str(dim) if dim >= 0 else "?")
            for dim, dynamic in zip(self.dims, self.dynamic or (False,) * self.rank)
        )
        text = f"{self.element_type}[{dims}]" + (str(self.layout) if self.layout else "")
        return f"b({text})" if self.buffer else text


@dataclass(frozen=True)
class TupleShape:
    elements: tuple[Shape, ...]

    is_tuple = True
    buffer = False

    def leaves(self) -> list[ArrayShape]:
        return [leaf for element in self.elements for leaf in element.leaves()]

    def same_dims(self, other: Shape) -> bool:
        return (
            other.is_tuple
            and len(other.elements) == len(self.elements)
            and all(a.same_dims(b) for a, b in zip(self.elements, other.elements))
        )

    def __str__(self) -> str:
        return "(" + ", ".join(map(str, self.elements)) + ")"


Shape = ArrayShape | TupleShape
