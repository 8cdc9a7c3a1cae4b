"""Print an AST in canonical prefix form, which the parser reads back.

The output is also valid PNNX: ``add(mul(@0,0.5),log1p(@0))``, lists as
``[size(@0,0),-1]``.  Floats print with ``repr`` (shortest text that reads
back to the same double): ``2.0``, ``1e-05``, ``inf``, ``nan``.
"""

from __future__ import annotations

from kuiper.pnnx_expr.nodes import Call, Expr, Input, ListExpr, Literal, Size
from kuiper.ir.recursion import deep_recursion


def to_string(expr: Expr) -> str:
    with deep_recursion():
        return _print(expr)


def _print(expr: Expr) -> str:
    if isinstance(expr, Input):
        return f"@{expr.index}"
    if isinstance(expr, Literal):
        return format_literal(expr.value)
    if isinstance(expr, Call):
        return f"{expr.name}({','.join(_print(arg) for arg in expr.args)})"
    if isinstance(expr, Size):
        if expr.dim is None:
            return f"size({_print(expr.input)})"
        return f"size({_print(expr.input)},{expr.dim})"
    if isinstance(expr, ListExpr):
        return f"[{','.join(_print(item) for item in expr.items)}]"
    raise TypeError(f"not an expression node: {expr!r}")


def format_literal(value: object) -> str:
    if value is None or isinstance(value, (bool, int)):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, complex):
        return f"{value.real!r}+{value.imag!r}j"
    raise TypeError(f"not a literal value: {value!r}")
