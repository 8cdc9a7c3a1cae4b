"""The scalar functions a kernel may call, and their derivative rules: one lookup.

Each rule has the signature of the ``derivative`` slot of the elementwise table
the architecture plans for kuiper/ir/functions.py: ``(args, result, grad) ->
one adjoint per argument``, built with kuiper.ir.make.  When that table lands,
``derivative_rule`` reads it instead and the rules here move there.
"""

from __future__ import annotations

from kuiper.ir import make
from kuiper.ir.nodes import IRExpr


def _sign(x):
    return make.select(make.gt(x, 0), make.const(1.0, x.dtype), make.select(make.lt(x, 0), -1.0, 0.0))


_RULES = {
    "exp": lambda args, result, grad: (grad * result,),
    "expm1": lambda args, result, grad: (grad * (result + 1.0),),
    "log": lambda args, result, grad: (grad / args[0],),
    "log1p": lambda args, result, grad: (grad / (args[0] + 1.0),),
    "log10": lambda args, result, grad: (grad / (args[0] * 2.302585092994046),),
    "sqrt": lambda args, result, grad: (grad / (result * 2.0),),
    "sin": lambda args, result, grad: (grad * make.call("cos", args[0]),),
    "cos": lambda args, result, grad: (-(grad * make.call("sin", args[0])),),
    "tan": lambda args, result, grad: (grad * (result * result + 1.0),),
    "tanh": lambda args, result, grad: (grad * (1.0 - result * result),),
    "sinh": lambda args, result, grad: (grad * make.call("cosh", args[0]),),
    "cosh": lambda args, result, grad: (grad * make.call("sinh", args[0]),),
    "asin": lambda args, result, grad: (grad / make.call("sqrt", 1.0 - args[0] * args[0]),),
    "acos": lambda args, result, grad: (-(grad / make.call("sqrt", 1.0 - args[0] * args[0])),),
    "atan": lambda args, result, grad: (grad / (args[0] * args[0] + 1.0),),
    "abs": lambda args, result, grad: (grad * _sign(args[0]),),
    "erf": lambda args, result, grad: (grad * 1.1283791670955126 * make.call("exp", -(args[0] * args[0])),),
}
# Extra two-argument functions the language offers beyond the intrinsics.
_BINARY = {"max": make.maximum, "min": make.minimum, "pow": make.pow}
_RULES["max"] = lambda args, result, grad: (
    make.select(make.ge(args[0], args[1]), grad, 0.0),
    make.select(make.ge(args[0], args[1]), 0.0, grad),
)
_RULES["min"] = lambda args, result, grad: (
    make.select(make.le(args[0], args[1]), grad, 0.0),
    make.select(make.le(args[0], args[1]), 0.0, grad),
)
_RULES["pow"] = lambda args, result, grad: (
    grad * args[1] * make.pow(args[0], args[1] - 1.0),
    grad * result * make.call("log", args[0]),
)
# Binary IR operators, by op name.
_RULES["add"] = lambda args, result, grad: (grad, grad)
_RULES["sub"] = lambda args, result, grad: (grad, -grad)
_RULES["mul"] = lambda args, result, grad: (grad * args[1], grad * args[0])
_RULES["div"] = lambda args, result, grad: (grad / args[1], -(grad * args[0]) / (args[1] * args[1]))
_RULES["neg"] = lambda args, result, grad: (-grad,)


def is_function(name: str, arity: int) -> bool:
    if name in _BINARY:
        return arity == 2
    return name in _RULES and name in make.INTRINSICS and arity == 1


def call_function(name: str, args, dtype: str) -> IRExpr:
    if name in _BINARY:
        a, b = (make.cast(arg, dtype) if not _is_float(arg) else arg for arg in args)
        return _BINARY[name](a, b)
    return make.call(name, *args)


def derivative_rule(op: str):
    """The rule for a function or operator name, or None if it has none (its adjoint is zero)."""
    return _RULES.get(op)


def _is_float(expr: IRExpr) -> bool:
    from kuiper.ir import dtypes

    return dtypes.is_float(expr.dtype)
