"""The result shape of an instruction written without one, by XLA's shape rules.

XLA's parser accepts ``ROOT d = dot(a, b), lhs_contracting_dims={1}, ...`` (its non-round-trip
form) and infers the shape as its ShapeInference does; this module does the same for the opcodes
such text uses, following the operation semantics (https://openxla.org/xla/operation_semantics):

* elementwise opcodes: the operands' shape (``compare`` and ``is-finite`` give ``pred``, ``complex``
  the complex type of its parts, ``select`` and ``clamp`` their value operand's);
* ``tuple``, ``get-tuple-element``;
* ``dot``: the batch dims, then the lhs dims that are neither batch nor contracting, then the
  rhs's; a sparse dot's metadata operand does not change it;
* ``convolution``: per ``dim_labels``, the batch (divided by ``batch_group_count``), the kernel's
  output features, and each spatial dim as a window over the dilated, padded input:
  ``(pad_low + (in - 1) * lhs_dilate + 1 + pad_high - ((size - 1) * rhs_dilate + 1)) // stride + 1``
  (0 when the window does not fit);
* ``conditional``: the result of its first branch computation, which must come before it in the text.

The element type of a dot or convolution is the operands' when they agree, else the more precise
of two float types (XLA's HigherPrecisionElementType).
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import KuiperError
from .module import HloComputation
from .shapes import ArrayShape, Shape, TupleShape
from .verify_rules import ELEMENTWISE_BINARY, ELEMENTWISE_UNARY
from .windows import parse_window, split_dim_labels

_COMPLEX_OF = {"f32": "c64", "f64": "c128"}
# Elementwise opcodes whose result type is not their operand's (and cannot be told from it).
_TYPE_CHANGING = frozenset(["convert", "real", "imag", "complex", "compare", "is-finite"])
# Float types by precision: (significand bits, exponent bits), as XLA compares them.
_FLOAT_PRECISION = {"f64": (53, 11), "f32": (24, 8), "f16": (11, 5), "bf16": (8, 8)}

Error = Callable[[str], KuiperError]


def inferred_shape(opcode: str, operands: list[Shape | None], attributes: dict,
                   computations: dict[str, HloComputation], error: Error) -> Shape | None:
    """The shape XLA infers, or None where kuiper does not (an operand defined later, another opcode)."""
    if opcode == "conditional":
        branches = attributes.get("branch_computations") or [attributes.get("true_computation")]
        first = computations.get(branches[0]) if branches and isinstance(branches[0], str) else None
        return first.root.shape if first is not None else None
    if any(shape is None for shape in operands):
        return None
    if opcode == "tuple":
        return TupleShape(tuple(operands))
    index = attributes.get("index")
    if opcode == "get-tuple-element":
        tuple_shape = operands[0] if len(operands) == 1 else None
        if tuple_shape is not None and tuple_shape.is_tuple and isinstance(index, int) \
                and 0 <= index < len(tuple_shape.elements):
            return tuple_shape.elements[index]
        return None
    if not operands or any(shape.is_tuple for shape in operands):
        return None
    if opcode == "dot" and len(operands) >= 2:
        return _dot(operands[0], operands[1], attributes, error)
    if opcode == "convolution" and len(operands) == 2:
        return _convolution(operands[0], operands[1], attributes, error)
    return _elementwise(opcode, operands)


def _elementwise(opcode: str, operands: list[ArrayShape]) -> ArrayShape | None:
    first = operands[-1] if opcode == "select" else operands[1] if opcode == "clamp" and len(operands) == 3 \
        else operands[0]
    if opcode in ("compare", "is-finite"):
        return ArrayShape("pred", first.dims, first.dynamic)
    if opcode == "complex" and first.element_type in _COMPLEX_OF:
        return ArrayShape(_COMPLEX_OF[first.element_type], first.dims, first.dynamic)
    keeps_type = opcode in ELEMENTWISE_BINARY | ELEMENTWISE_UNARY and opcode not in _TYPE_CHANGING
    if opcode in ("select", "clamp") or keeps_type:
        return ArrayShape(first.element_type, first.dims, first.dynamic)
    return None


def _result_type(lhs: ArrayShape, rhs: ArrayShape, opcode: str, error: Error) -> str:
    if lhs.element_type == rhs.element_type:
        return lhs.element_type
    if lhs.element_type in _FLOAT_PRECISION and rhs.element_type in _FLOAT_PRECISION:
        return max(lhs.element_type, rhs.element_type, key=_FLOAT_PRECISION.__getitem__)
    raise error(f"{opcode} of {lhs.element_type} and {rhs.element_type} needs its shape written out: "
                "XLA infers a result type only for operands of one type or two float types")


def _dims(attributes: dict, key: str, rank: int, error: Error) -> list[int]:
    value = attributes.get(key, [])
    value = [value] if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(value, list) or not all(isinstance(d, int) and 0 <= d < rank for d in value):
        raise error(f"{key}={value!r} must list dims of an operand of rank {rank}")
    return value


def _dot(lhs: ArrayShape, rhs: ArrayShape, attributes: dict, error: Error) -> ArrayShape:
    lhs_batch = _dims(attributes, "lhs_batch_dims", lhs.rank, error)
    rhs_batch = _dims(attributes, "rhs_batch_dims", rhs.rank, error)
    lhs_contracting = _dims(attributes, "lhs_contracting_dims", lhs.rank, error)
    rhs_contracting = _dims(attributes, "rhs_contracting_dims", rhs.rank, error)
    if len(lhs_batch) != len(rhs_batch) or len(lhs_contracting) != len(rhs_contracting):
        raise error("dot: lhs and rhs must have as many batch dims, and as many contracting dims")
    lhs_free = [d for d in range(lhs.rank) if d not in lhs_batch + lhs_contracting]
    rhs_free = [d for d in range(rhs.rank) if d not in rhs_batch + rhs_contracting]
    dims = [lhs.dims[d] for d in lhs_batch] + [lhs.dims[d] for d in lhs_free] + [rhs.dims[d] for d in rhs_free]
    return ArrayShape(_result_type(lhs, rhs, "dot", error), tuple(dims))


def _convolution(lhs: ArrayShape, rhs: ArrayShape, attributes: dict, error: Error) -> ArrayShape:
    labels = attributes.get("dim_labels")
    if not isinstance(labels, str):
        raise error("a convolution without its shape needs dim_labels to infer it")
    lhs_labels, rhs_labels, out_labels = split_dim_labels(labels, error)
    if len(lhs_labels) != lhs.rank or len(rhs_labels) != rhs.rank:
        raise error(f"dim_labels={labels} does not fit operands of rank {lhs.rank} and {rhs.rank}")
    spatial = lhs.rank - 2
    window = parse_window(attributes.get("window", {}), spatial, error)
    batch_groups = attributes.get("batch_group_count", 1)
    if not isinstance(batch_groups, int) or batch_groups < 1 or lhs.dims[lhs_labels.index("b")] % batch_groups:
        raise error(f"batch_group_count={batch_groups!r} must divide the input batch")
    size_of = {"b": lhs.dims[lhs_labels.index("b")] // batch_groups, "f": rhs.dims[rhs_labels.index("o")]}
    for axis in range(spatial):
        base = lhs.dims[lhs_labels.index(str(axis))]
        low, high = window["pad"][axis] if isinstance(window["pad"][axis], tuple) else (0, 0)
        padded = low + ((base - 1) * window["lhs_dilate"][axis] + 1 if base else 0) + high
        extent = (window["size"][axis] - 1) * window["rhs_dilate"][axis] + 1
        size_of[str(axis)] = 0 if padded < extent else (padded - extent) // window["stride"][axis] + 1
    return ArrayShape(_result_type(lhs, rhs, "convolution", error), tuple(size_of[label] for label in out_labels))
