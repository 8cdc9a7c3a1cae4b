"""Comparisons (torch.eq/ne/gt/ge/lt/le) and selection (torch.where).

The second operand of a comparison is a tensor input (``$other``) or a number
param (``other=0.5``); torch.where's ``input``/``other`` may each be either
too.  Numbers follow PyTorch's tensor-scalar promotion: they take the tensor's
dtype unless they are of a higher kind (a float with an integer tensor gives
float32, PyTorch's default dtype).
"""

from __future__ import annotations

import operator

from .activation import literal
from .base import Op

_COMPARISONS = {
    "torch.eq": operator.eq,
    "torch.ne": operator.ne,
    "torch.gt": operator.gt,
    "torch.ge": operator.ge,
    "torch.lt": operator.lt,
    "torch.le": operator.le,
}


def _is_number(value) -> bool:
    return isinstance(value, (bool, int, float))


def _kind_rank(value) -> int:
    """bool < integer < floating, for a Python number."""
    return 0 if isinstance(value, bool) else 1 if isinstance(value, int) else 2


def promoted_dtype(op: Op, values):
    """PyTorch's promotion of tensors and numbers: tensors decide, unless a number is of a
    higher kind than all of them (a float number with integer tensors gives float32, the
    default dtype)."""
    xp = op.xp
    arrays = [v for v in values if op.backend.is_array(v)]
    numbers = [v for v in values if not op.backend.is_array(v)]
    dtype = xp.result_type(*arrays) if arrays else None
    number_rank = max((_kind_rank(v) for v in numbers), default=-1)
    if dtype is None or number_rank > _dtype_rank(xp, dtype):
        dtype = (xp.bool, xp.int64, xp.float32)[number_rank]
    return dtype


def _dtype_rank(xp, dtype) -> int:
    if xp.isdtype(dtype, "bool"):
        return 0
    return 1 if xp.isdtype(dtype, "integral") else 2


class Compare(Op):
    """Elementwise comparison; the result is bool."""

    types = tuple(_COMPARISONS)

    def setup(self):
        self.compare = _COMPARISONS[self.node.type]
        self.other_index = self.input_index("other", default=1 if len(self.node.inputs) == 2 else None)
        self.input_at = self.input_index("input", default=0)
        if self.other_index is None:
            self.require_inputs(1)
            other = self.param("other", None)
            if not _is_number(other):
                raise self.error(f"needs 'other': a tensor input bound to $other or a number, found {other!r}")
            self.other = other
        else:
            self.require_inputs(2)

    def forward(self, *inputs):
        x = inputs[self.input_at]
        other = self.other if self.other_index is None else inputs[self.other_index]
        if not self.backend.is_array(x) and not self.backend.is_array(other):
            return self.xp.asarray(bool(self.compare(x, other)))
        return self.compare(x, other)

    @classmethod
    def elementwise_expression(cls, node):
        function = node.type.split(".")[-1]
        if function in ("eq", "ne"):
            return None  # no equality functions in the fusable set
        if len(node.inputs) == 2:
            first = node.input_keys.index("input") if "input" in node.input_keys else 0
            return f"{function}(@{first},@{1 - first})"
        other = node.params.get("other")
        if len(node.inputs) != 1 or not _is_number(other):
            return None
        return f"{function}(@0,{literal(other)})"


class Where(Op):
    """torch.where(condition, input, other); input and other are tensors or numbers.

    The one-argument form (torch.where(condition) = nonzero) has a data-dependent
    shape and is not supported.
    """

    types = ("torch.where",)

    def setup(self):
        unkeyed = all(key is None for key in self.node.input_keys)  # hand-written files: by position
        self.condition_at = self.input_index("condition", default=0)
        self.sources = []  # ("input", position) or ("number", value), for input then other
        for position, key in ((1, "input"), (2, "other")):
            index = self.input_index(key)
            if index is not None:
                self.sources.append(("input", index))
            elif _is_number(self.param(key, None)):
                self.sources.append(("number", self.param(key)))
            elif unkeyed and len(self.node.inputs) == 3:
                self.sources.append(("input", position))
            else:
                raise self.unsupported(
                    key, self.param(key, None),
                    "a tensor input or a number (torch.where(condition) alone is not supported)",
                )
        self.require_inputs(1 + sum(kind == "input" for kind, _ in self.sources))

    def forward(self, *inputs):
        xp = self.xp
        condition = inputs[self.condition_at]
        values = [inputs[v] if kind == "input" else v for kind, v in self.sources]
        dtype = promoted_dtype(self, values)
        values = [
            xp.astype(v, dtype, copy=False) if self.backend.is_array(v) else xp.asarray(v, dtype=dtype) for v in values
        ]
        return xp.where(condition, values[0], values[1])

    @classmethod
    def elementwise_expression(cls, node):
        keys = node.input_keys
        if len(node.inputs) != 3 or not all(k in keys for k in ("condition", "input", "other")):
            return None
        return "where(" + ",".join(f"@{keys.index(k)}" for k in ("condition", "input", "other")) + ")"


OPS = [Compare, Where]
