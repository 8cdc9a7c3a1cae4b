"""HLO shapes: arrays with an element type, dims and an optional layout, and (nested) tuples."""

from __future__ import annotations

from dataclasses import dataclass

# HLO element type -> NumPy dtype name, or None for types NumPy cannot hold (kept as data only).
ELEMENT_TYPES: dict[str, str | None] = {
    "pred": "bool",
    "s8": "int8", "s16": "int16", "s32": "int32", "s64": "int64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
    "f16": "float16", "f32": "float32", "f64": "float64",
    "c64": "complex64", "c128": "complex128",
    "s1": None, "s2": None, "s4": None, "u1": None, "u2": None, "u4": None,
    "bf16": None,
    "f4e2m1fn": None, "f8e3m4": None, "f8e4m3": None, "f8e4m3fn": None, "f8e4m3b11fnuz": None,
    "f8e4m3fnuz": None, "f8e5m2": None, "f8e5m2fnuz": None, "f8e8m0fnu": None,
    "token": None, "opaque": None,
}
NUMPY_TO_HLO = {numpy: hlo for hlo, numpy in ELEMENT_TYPES.items() if numpy is not None}


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
    """``f32[2,<=3,?]{1,0}``: element type, dims (bounded dims keep their bound), dynamic flags."""

    element_type: str
    dims: tuple[int, ...]
    dynamic: tuple[bool, ...] = ()
    layout: Layout | None = None

    is_tuple = False

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def dtype(self) -> str | None:
        """The NumPy dtype name, None when NumPy has no such type (bf16, f8, token)."""
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
        return f"{self.element_type}[{dims}]" + (str(self.layout) if self.layout else "")


@dataclass(frozen=True)
class TupleShape:
    elements: tuple[Shape, ...]

    is_tuple = True

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
