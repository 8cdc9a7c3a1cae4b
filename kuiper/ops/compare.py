"""Comparisons (torch.eq/ne/gt/ge/lt/le) and selection (torch.where).

The second operand of a comparison is a tensor input (``$other``) or a number
param (``other=0.5``); torch.where's ``input``/``other`` may each be either
too.  Numbers follow PyTorch's tensor-scalar promotion: they take the tensor's
dtype unless they are of a higher kind (a float with an integer tensor gives
float32, PyTorch's default dtype).
"""

from __future__ import annotations

from ..ir import make
from .base import NodeParams, Op
from .elementwise import ElementwiseMath, ElementwiseOp

_COMPARISONS = {name: getattr(make, name) for name in ("eq", "ne", "gt", "ge", "lt", "le")}


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


class Compare(ElementwiseOp):
    """Elementwise ``comparison`` (eq, ne, gt, ge, lt, le); the result is bool."""

    types = ("Compare",)

    @classmethod
    def elementwise(cls, node):
        params = NodeParams(node)
        compare = _COMPARISONS[params.choice_param("comparison", tuple(_COMPARISONS))]
        keys = node.input_keys
        x_at = keys.index("input") if "input" in keys else 0
        other_at = keys.index("other") if "other" in keys else (1 if len(node.inputs) == 2 else None)
        if other_at is None:
            params.require_inputs(1)
            other = params.param("other", None)
            if not _is_number(other):
                raise params.error(f"needs 'other': a tensor input bound to $other or a number, found {other!r}")
            return ElementwiseMath(lambda x: compare(x, other), 1)
        params.require_inputs(2)
        return ElementwiseMath(lambda *v: compare(v[x_at], v[other_at]), 2)

    def forward(self, *inputs):
        result = super().forward(*inputs)
        return result if self.backend.is_array(result) else self.xp.asarray(result)  # two numbers: a 0-d tensor


class Where(ElementwiseOp):
    """torch.where(condition, input, other); input and other are tensors or numbers.

    Numbers are weak, as in PyTorch (make.select applies the promotion).  The
    one-argument form (torch.where(condition) = nonzero) has a data-dependent
    shape and is not supported.
    """

    types = ("Where",)

    @classmethod
    def elementwise(cls, node):
        params = NodeParams(node)
        keys = node.input_keys
        unkeyed = all(key is None for key in keys)  # hand-written files: by position
        condition_at = keys.index("condition") if "condition" in keys else 0
        sources = []  # ("input", position) or ("number", value), for input then other
        for position, key in ((1, "input"), (2, "other")):
            if key in keys:
                sources.append(("input", keys.index(key)))
            elif _is_number(params.param(key, None)):
                sources.append(("number", params.param(key)))
            elif unkeyed and len(node.inputs) == 3:
                sources.append(("input", position))
            else:
                raise params.unsupported(
                    key, params.param(key, None),
                    "a tensor input or a number (torch.where(condition) alone is not supported)",
                )
        params.require_inputs(1 + sum(kind == "input" for kind, _ in sources))

        def build(*v):
            values = [v[ref] if kind == "input" else ref for kind, ref in sources]
            return make.select(v[condition_at], values[0], values[1])

        return ElementwiseMath(build, len(node.inputs))


OPS = [Compare, Where]
