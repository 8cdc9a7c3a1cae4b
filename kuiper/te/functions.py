"""The scalar functions a kernel may call, and where their derivative rules come from.

Everything is read from the IR's table of elementwise operations
(kuiper/ir/functions.py): the intrinsics (``exp``, ``tanh``, ``atan2`` ...) are
callable by name, as are the operators ``max``, ``min`` and ``pow``; every
derivative rule, for operators and functions alike, comes from the rules
beside that table (kuiper/ir/derivatives.py).
"""

from __future__ import annotations

from kuiper.ir import dtypes, make
from kuiper.ir.derivatives import derivative
from kuiper.ir.functions import INTRINSICS
from kuiper.ir.nodes import IRExpr

_OPERATOR_FUNCTIONS = {"max": make.maximum, "min": make.minimum, "pow": make.pow}


def is_function(name: str, arity: int) -> bool:
    if name in _OPERATOR_FUNCTIONS:
        return arity == 2
    return name in INTRINSICS and INTRINSICS[name].arity == arity


def call_function(name: str, args, dtype: str) -> IRExpr:
    if name in _OPERATOR_FUNCTIONS:
        # integer constants and index variables meet a float tensor as floats
        a, b = (arg if dtypes.is_float(arg.dtype) else make.cast(arg, dtype) for arg in args)
        return _OPERATOR_FUNCTIONS[name](a, b)
    return make.call(name, *args)


def derivative_rule(op: str):
    """The rule ``(args, result, grad) -> adjoints`` for an operator or function, or None."""
    return derivative(op)
