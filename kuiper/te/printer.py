"""Print kernels back in the index-notation language (parse(str(k)) == k)."""

from __future__ import annotations

import numpy

from kuiper.ir.nodes import Binary, Call, Cast, Compare, Const, Indexing, IRExpr, Select, Unary, Var

_SYMBOLS = {
    "or": ("||", 1),
    "and": ("&&", 2),
    "lt": ("<", 3),
    "le": ("<=", 3),
    "gt": (">", 3),
    "ge": (">=", 3),
    "eq": ("==", 3),
    "ne": ("!=", 3),
    "add": ("+", 4),
    "sub": ("-", 4),
    "mul": ("*", 5),
    "div": ("/", 5),
    "floordiv": ("//", 5),
    "mod": ("%", 5),
}
_FUNCTION_OPS = {"max", "min", "pow"}
_UNARY_LEVEL = 6
_ATOM = 7


def format_statement(stmt) -> str:
    text = f"{format_expr(stmt.target)} {'+=' if stmt.accumulate else '='} {format_expr(stmt.value)}"
    clauses = [f"{var.name} = {format_expr(expr)}" for var, expr in stmt.bindings]
    clauses += [format_expr(cond) for cond in stmt.conditions]
    if clauses:
        text += " where " + ", ".join(clauses)
    return text + ";"


def format_expr(expr: IRExpr) -> str:
    return _format(expr)[0]


def _format(expr: IRExpr) -> tuple[str, int]:
    """(text, precedence level of its outermost operator)."""
    if isinstance(expr, Const):
        return _number(expr.value, expr.dtype), _ATOM
    if isinstance(expr, Indexing):
        tensor = expr.tensor
        shape = ", ".join(str(d) for d in getattr(tensor, "shape", ()))
        indices = ", ".join(format_expr(i) for i in expr.indices)
        return f"{tensor.name}<{shape}>[{indices}]", _ATOM
    if isinstance(expr, Var):
        return expr.name, _ATOM
    if isinstance(expr, Cast):  # the parser re-derives casts from the promotion rules
        return _format(expr.operand)
    if isinstance(expr, Unary):
        symbol = "-" if expr.op == "neg" else "!"
        inner, level = _format(expr.operand)
        if level < _UNARY_LEVEL or (symbol == "-" and inner.startswith("-")):
            inner = f"({inner})"
        return f"{symbol}{inner}", _UNARY_LEVEL
    if isinstance(expr, (Binary, Compare)) and expr.op in _SYMBOLS:
        symbol, level = _SYMBOLS[expr.op]
        lhs, lhs_level = _format(expr.lhs)
        rhs, rhs_level = _format(expr.rhs)
        if lhs_level < level or (level == 3 and lhs_level == 3):
            lhs = f"({lhs})"
        if rhs_level <= level:
            rhs = f"({rhs})"
        return f"{lhs} {symbol} {rhs}", level
    if isinstance(expr, Binary) and expr.op in _FUNCTION_OPS:
        return f"{expr.op}({format_expr(expr.lhs)}, {format_expr(expr.rhs)})", _ATOM
    if isinstance(expr, Call):
        return f"{expr.func}({', '.join(format_expr(a) for a in expr.args)})", _ATOM
    if isinstance(expr, Select):
        parts = ", ".join(format_expr(e) for e in (expr.cond, expr.true_value, expr.false_value))
        return f"select({parts})", _ATOM
    raise TypeError(f"cannot print {type(expr).__name__} in the kernel language")


def _number(value, dtype: str = "") -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value) if value >= 0 else f"({value})"
    # float32: the shortest decimal that rounds back to the same float32 (0.1, not 0.10000000149011612)
    text = str(numpy.float32(value)) if dtype == "float32" else repr(float(value))
    if text in ("inf", "nan", "-inf"):
        raise ValueError(f"{text} has no spelling in the kernel language")
    if "e" not in text and "." not in text:
        text += ".0"
    return text if not text.startswith("-") else f"({text})"
