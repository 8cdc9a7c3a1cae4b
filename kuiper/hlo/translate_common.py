"""What every translator reads from an instruction: typed attributes, shapes, constant operands.

Each reader raises ``site.error`` naming the instruction and the attribute, so a malformed
program fails at load time with the line it came from.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir import dtypes
from ..model_ir import OpNode
from .literals import literal_array
from .module import HloInstruction
from .shapes import ArrayShape
from .site import Site

REQUIRED = object()


def attribute(site: Site, key: str, default: Any = REQUIRED) -> Any:
    attributes = site.instruction.attributes
    if key in attributes:
        return attributes[key]
    if default is REQUIRED:
        raise site.error(f"missing attribute '{key}'")
    return default


def ints(site: Site, key: str, default: Any = REQUIRED) -> tuple[int, ...]:
    """An attribute that is a list of integers, ``{1,2}`` (a single integer is a list of one)."""
    value = attribute(site, key, default)
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise site.error(f"attribute '{key}' must be a list of integers, found {value!r}")
    return tuple(value)


def integer(site: Site, key: str, default: Any = REQUIRED) -> int:
    value = attribute(site, key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise site.error(f"attribute '{key}' must be an integer, found {value!r}")
    return value


def word(site: Site, key: str, default: Any = REQUIRED) -> str:
    value = attribute(site, key, default)
    if not isinstance(value, str):
        raise site.error(f"attribute '{key}' must be a word, found {value!r}")
    return value


def result(site: Site) -> ArrayShape:
    """The result shape, which must be an array (not a tuple)."""
    shape = site.instruction.shape
    if shape.is_tuple:
        raise site.error(f"expects an array result, found the tuple {shape}")
    return shape


def operand(site: Site, index: int) -> ArrayShape:
    """The shape of operand ``index``, which must be an array."""
    if index >= len(site.instruction.operands):
        raise site.error(f"expects at least {index + 1} operand(s), found {len(site.instruction.operands)}")
    shape = site.operand_shape(index)
    if shape.is_tuple:
        raise site.error(f"operand {index} must be an array, found the tuple {shape}")
    return shape


def producer(site: Site, index: int) -> HloInstruction:
    computation = site.module.computations[site.instruction.computation]
    return computation.by_name[site.instruction.operands[index]]


def constant_operand(site: Site, index: int) -> np.ndarray | None:
    """Operand ``index``'s value when a constant instruction gives it (a weight known at load time)."""
    source = producer(site, index)
    if source.opcode != "constant" or source.shape.is_tuple:
        return None
    return literal_array(source)


def with_dims(shape: ArrayShape, new_dims) -> ArrayShape:
    """An array shape of the same element type with other dims (an intermediate value's)."""
    return ArrayShape(shape.element_type, tuple(new_dims))


def transpose(site: Site, source: str, shape: ArrayShape, permutation, suffix: str,
              target: str | None = None) -> tuple[str, ArrayShape, list[OpNode]]:
    """``source`` with its dims reordered (nothing when ``permutation`` keeps the order).

    Returns the new operand (``target``, or a temporary), its shape and the ops to emit.
    """
    permutation = list(permutation)
    moved = with_dims(shape, [shape.dims[p] for p in permutation])
    if permutation == list(range(len(permutation))) and target is None:
        return source, moved, []
    output = target or site.temporary(suffix, moved)
    return output, moved, [site.op("Transpose", [source], [output], {"dims": permutation}, suffix=suffix)]


def reshape(site: Site, source: str, shape: ArrayShape, new_dims, suffix: str,
            target: str | None = None) -> tuple[str, ArrayShape, list[OpNode]]:
    """``source`` with the same elements in ``new_dims``: the new operand (``target``, or a temporary),
    its shape and the op to emit."""
    reshaped = with_dims(shape, new_dims)
    output = target or site.temporary(suffix, reshaped)
    return output, reshaped, [site.op("Reshape", [source], [output], {"shape": list(new_dims)}, suffix=suffix)]


def widens(source: str, target: str) -> bool:
    """An operand of dtype ``source`` may give a ``target`` result: the same type, or a wider one of its kind.

    XLA computes a dot or convolution of narrower operands (s8 x s8 -> s32, f16 x f16 -> f32) on
    operands converted to the result type.
    """
    if source == target:
        return True
    if dtypes.is_extended(source) or dtypes.is_extended(target) or "bool" in (source, target):
        return False
    family = {"i": "integer", "u": "integer", "f": "float", "c": "complex"}
    narrow, wide = np.dtype(source), np.dtype(target)
    return family[narrow.kind] == family[wide.kind] and narrow.itemsize <= wide.itemsize


def widened_operand(site: Site, index: int, suffix: str) -> tuple[str, ArrayShape, list[OpNode]]:
    """Operand ``index`` converted to the result's element type (nothing when it has it already)."""
    shape, target = operand(site, index), result(site)
    if shape.element_type == target.element_type:
        return site.inputs[index], shape, []
    widened = ArrayShape(target.element_type, shape.dims)
    name = site.temporary(f"{suffix}_widened", widened)
    params = {"function": "convert", "operand_dtypes": [shape.dtype], "dtype": widened.dtype}
    return name, widened, [site.op("Elementwise", [site.inputs[index]], [name], params, suffix=f"{suffix}_widened")]
