"""NumPy source for tensor-IR expressions (one target of render.py).

Operators keep their Python symbol where NumPy's meaning is the IR's (``//``
and ``%`` round toward -inf on arrays as on Python numbers); everything else
is called by its NumPy name from functions.py (``np.maximum``, ``np.exp``).
The text assumes ``import numpy as np`` and arrays named as the IR's tensors
(with their prefix, for a user's names).
"""

from __future__ import annotations

import math

import numpy

from kuiper.ir import dtypes
from kuiper.ir.functions import Operation
from kuiper.ir.identifiers import TENSOR_PREFIX, VARIABLE_PREFIX
from kuiper.ir.nodes import Cast, Const, Indexing, IRExpr, Select
from kuiper.ir.render import Renderer

_NOT_PYTHON = {"not"}  # Python's ``not`` is not elementwise: np.logical_not


class NumpyRenderer(Renderer):
    """``clamp``: subscripts are clipped into their tensor's shape (a point a guard masks
    out afterwards may lie outside it)."""

    target = "NumPy source"

    def __init__(self, clamp: bool = False, user_names: bool = False):
        """``user_names``: the IR's names are a user's, emitted in their namespace (kuiper.ir.identifiers)."""
        self.clamp = clamp
        if user_names:
            self.tensor_prefix, self.variable_prefix = TENSOR_PREFIX, VARIABLE_PREFIX

    def spell(self, row: Operation, node: IRExpr) -> str:
        if row.symbol and row.name not in _NOT_PYTHON:
            return row.symbol
        return f"np.{row.array_names[-1]}"

    def literal(self, node: Const) -> str:
        value, dtype = node.value, node.dtype
        if isinstance(value, bool) or dtype in ("int64", "pyint"):
            text = repr(value)
        elif dtypes.is_float(dtype):
            text = f"np.{dtypes.storage_dtype(dtype)}({float_text(value, dtype)})"
        else:
            text = f"np.{dtype}({value})"
        return f"({text})" if text.startswith("-") else text  # -1 ** x would be -(1 ** x)

    def visit_Cast(self, node: Cast) -> str:
        return f"np.asarray({self.visit(node.operand)}).astype(np.{dtypes.storage_dtype(node.dtype)})"

    def visit_Select(self, node: Select) -> str:
        return f"np.where({self.visit(node.cond)}, {self.visit(node.true_value)}, {self.visit(node.false_value)})"

    def visit_Indexing(self, node: Indexing) -> str:
        indices = [self.visit(i) for i in node.indices]
        if self.clamp:
            indices = [f"np.clip({i}, 0, {extent - 1})" for i, extent in zip(indices, node.tensor.shape)]
        return f"{self.tensor(node.tensor.name)}[{', '.join(indices)}]"


def float_text(value: float, dtype: str) -> str:
    """A float as Python source: float32 as the shortest decimal that rounds back to it."""
    if not math.isfinite(value):
        return f'"{value}"'  # np.float32("inf"), np.float64("nan")
    return str(numpy.float32(value)) if dtype == "float32" else repr(float(value))
