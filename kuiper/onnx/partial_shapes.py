"""Shape vectors partly known at load: what exporters compute from ``Shape`` of a tensor with a free dim.

A model exported with a free batch dim builds Reshape targets at run time: ``Shape(x)``, sliced,
gathered, concatenated with constants (ViT's ``[batch, 32, -1]``, GroupNorm's reshape back to
``Shape(x)``). Every entry but the batch is known when the model is loaded. This module follows such
1-D integer values through the few ops exporters use on them; an entry is an int, or a ``FreeDim``
naming the tensor and dim it was read from (or the one a Reshape copied it from: the same size).
translate_reshape then makes such a target a static one:
a free dim read from the reshaped tensor's same dim is a copy (ONNX's 0), and one remaining free dim
becomes the -1 that the element count decides.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .values import SHAPE_LIKE_SIZE, Values


@dataclass(frozen=True)
class FreeDim:
    """Dim ``dim`` of value ``source``, whose size is not known at load."""

    source: str
    dim: int


Entry = int | FreeDim


def free_dim(values: Values, name: str, dim: int) -> FreeDim:
    """The token of value ``name``'s free dim ``dim``: the dim it was reshaped from, if it was, else its own."""
    return values.same_free_dim.get((name, dim), FreeDim(name, dim))


def partial_value(values: Values, name: str) -> list[Entry] | None:
    """The entries of 1-D (or 0-D) integer value ``name`` as far as they are known, or None."""
    if name in values.known or name in values.static_ops:
        value = values.shape_like_value(name, "")
        if value is not None and value.dtype.kind in "iu" and value.ndim <= 1 and value.size <= SHAPE_LIKE_SIZE:
            return [int(v) for v in value.reshape(-1)]
        return None
    return values.partial.get(name)


def follow(node, values: Values) -> None:
    """Record the partial value of ``node``'s output, for the ops exporters apply to shape vectors."""
    if len(node.output) != 1 or not node.output[0] or values.is_known(node.output[0]):
        return  # (a value known at load is computed when a translator asks for it)
    op, output = node.op_type, node.output[0]
    attributes = {a.name: a for a in node.attribute}
    if op == "Shape":
        shape = values.shape(node.input[0])
        if shape is None or all(d is not None for d in shape):
            return
        rank = len(shape)
        start = attributes["start"].i if "start" in attributes else 0
        end = attributes["end"].i if "end" in attributes else rank
        start, end = (min(max(v + rank if v < 0 else v, 0), rank) for v in (start, end))
        values.partial[output] = [d if d is not None else free_dim(values, node.input[0], i)
                                  for i, d in enumerate(shape[start:end], start=start)]
        return
    parts = [partial_value(values, name) if name else None for name in node.input]
    if not parts or parts[0] is None:
        return
    result = _apply(op, parts, attributes)
    if result is not None:
        values.partial[output] = result


def _apply(op: str, parts: list, attributes: dict) -> list[Entry] | None:
    data = parts[0]
    if op in ("Identity", "Cast", "Squeeze", "Unsqueeze"):
        return data  # the same entries (a 0-D value and its 1-element vector alike)
    if op == "Reshape":  # a vector reshaped to a vector ([-1] or its length): the same entries
        target = parts[1] if len(parts) > 1 else None
        return data if target in ([-1], [len(data)]) else None
    if op in ("Equal", "Where"):
        return _select(op, parts)
    if op in _ARITHMETIC:
        return _arithmetic(op, parts)
    if op == "Concat":
        return None if any(part is None for part in parts) else [entry for part in parts for entry in part]
    if op == "Gather":
        indices = parts[1] if len(parts) > 1 else None
        if indices is None or any(isinstance(i, FreeDim) for i in indices):
            return None
        try:
            return [data[i] for i in indices]
        except IndexError:
            return None
    if op == "Slice":
        if len(parts) < 3 or any(part is None or any(isinstance(v, FreeDim) for v in part) for part in parts[1:]):
            return None
        starts, ends = parts[1], parts[2]
        steps = parts[4] if len(parts) > 4 else [1]
        axes = parts[3] if len(parts) > 3 and parts[3] is not None else [0]
        if len(starts) != 1 or len(ends) != 1 or steps != [1] or axes not in ([0], [-1]):
            return None
        return list(np.asarray(data, dtype=object)[slice(starts[0], ends[0])])
    return None


def _entries_equal(a: Entry, b: Entry) -> bool | None:
    """a == b where it is known at load: a free dim is a size, never negative."""
    if isinstance(a, FreeDim) or isinstance(b, FreeDim):
        if a == b:
            return True
        known = b if isinstance(a, FreeDim) else a
        return False if isinstance(known, int) and known < 0 else None
    return a == b


def _select(op: str, parts: list) -> list[Entry] | None:
    """Equal of two vectors, or Where(condition, a, b), entry by entry (length-1 vectors broadcast)."""
    if any(part is None for part in parts) or len(parts) != (2 if op == "Equal" else 3):
        return None
    length = max(len(part) for part in parts)
    if any(len(part) not in (1, length) for part in parts):
        return None
    rows = [[part[i if len(part) > 1 else 0] for part in parts] for i in range(length)]
    if op == "Equal":
        result = [_entries_equal(a, b) for a, b in rows]
        return None if any(entry is None for entry in result) else result
    if any(not isinstance(condition, bool) for condition, _, _ in rows):
        return None
    return [a if condition else b for condition, a, b in rows]


# Integer arithmetic on known entries, as ONNX computes it on int64 (Div truncates toward zero).
_ARITHMETIC = {
    "Add": lambda a, b: a + b, "Sub": lambda a, b: a - b, "Mul": lambda a, b: a * b,
    "Div": lambda a, b: None if b == 0 else (abs(a) // abs(b)) * (1 if (a < 0) == (b < 0) else -1),
}


def _arithmetic(op: str, parts: list) -> list[Entry] | None:
    """Entry by entry where both entries are known ints (length-1 vectors broadcast); a free dim gives None."""
    if len(parts) != 2 or any(part is None for part in parts):
        return None
    length = max(len(part) for part in parts)
    if any(len(part) not in (1, length) for part in parts):
        return None
    result = []
    for i in range(length):
        a, b = (part[i if len(part) > 1 else 0] for part in parts)
        if isinstance(a, (FreeDim, bool)) or isinstance(b, (FreeDim, bool)):
            return None
        value = _ARITHMETIC[op](a, b)
        if value is None:
            return None
        result.append(value)
    return result
