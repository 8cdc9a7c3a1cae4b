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

from .values import Values


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
        if value is not None and value.dtype.kind in "iu" and value.ndim <= 1:
            return [int(v) for v in value.reshape(-1)]
        return None
    return values.partial.get(name)


def follow(node, values: Values) -> None:
    """Record the partial value of ``node``'s output, for the ops exporters apply to shape vectors."""
    if len(node.output) != 1 or not node.output[0] or node.output[0] in values.known:
        return
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
    if result is not None and any(isinstance(entry, FreeDim) for entry in result):
        values.partial[output] = result


def _apply(op: str, parts: list, attributes: dict) -> list[Entry] | None:
    data = parts[0]
    if op in ("Identity", "Cast", "Squeeze", "Unsqueeze"):
        return data  # the same entries (a 0-D value and its 1-element vector alike)
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
