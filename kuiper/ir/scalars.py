"""Evaluate one IR operation on Python scalars, with array semantics.

Used to fold constants and to compute the Python-scalar part of an
expression (``size()`` arithmetic) at run time.  Operands become NumPy 0-d
arrays of their storage dtype (pyfloat -> float64 ...), so a float32
constant folds exactly as a float32 tensor would compute.
"""

from __future__ import annotations

import numpy

from kuiper.ir import dtypes
from kuiper.ir.nodes import IRExpr
from kuiper.ir.xp_ops import resolve


def apply_to_scalars(node: IRExpr, operand_values: list) -> bool | int | float:
    """The value of ``node`` when its operands have these (Python scalar) values."""
    operands = node.children()
    args = [
        numpy.asarray(value, dtype=dtypes.storage_dtype(operand.dtype))
        for value, operand in zip(operand_values, operands)
    ]
    with numpy.errstate(all="ignore"):
        result = resolve(numpy, node).fn(*args)
    return numpy.asarray(result).astype(dtypes.storage_dtype(node.dtype)).item()
