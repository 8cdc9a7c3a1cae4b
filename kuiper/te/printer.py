"""Print kernels back in the index-notation language (parse(str(k)) == k)."""

from __future__ import annotations

import numpy

from kuiper.ir.nodes import Binary, Call, Cast, Compare, Const, Indexing, IRExpr, Select, Unary, Var
from kuiper.ir.visitors import Visitor

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
    return _KernelText().visit(expr)[0]


class _KernelText(Visitor):
    """Each visit returns (text, precedence level of its outermost operator)."""

    def visit_Const(self, node: Const) -> tuple[str, int]:
        return _number(node.value, node.dtype), _ATOM

    def visit_Var(self, node: Var) -> tuple[str, int]:
        return node.name, _ATOM

    visit_Buffer = visit_Var

    def visit_Indexing(self, node: Indexing) -> tuple[str, int]:
        shape = ", ".join(str(d) for d in getattr(node.tensor, "shape", ()))
        indices = ", ".join(format_expr(i) for i in node.indices)
        return f"{node.tensor.name}<{shape}>[{indices}]", _ATOM

    def visit_Cast(self, node: Cast) -> tuple[str, int]:
        return self.visit(node.operand)  # the parser re-derives casts from the promotion rules

    def visit_Unary(self, node: Unary) -> tuple[str, int]:
        symbol = "-" if node.op == "neg" else "!"
        inner, level = self.visit(node.operand)
        if level < _UNARY_LEVEL or (symbol == "-" and inner.startswith("-")):
            inner = f"({inner})"
        return f"{symbol}{inner}", _UNARY_LEVEL

    def visit_Binary(self, node: Binary | Compare) -> tuple[str, int]:
        if node.op in _FUNCTION_OPS:
            return f"{node.op}({format_expr(node.lhs)}, {format_expr(node.rhs)})", _ATOM
        if node.op not in _SYMBOLS:
            raise TypeError(f"cannot print {node.op} in the kernel language")
        symbol, level = _SYMBOLS[node.op]
        lhs, lhs_level = self.visit(node.lhs)
        rhs, rhs_level = self.visit(node.rhs)
        if lhs_level < level or (level == 3 and lhs_level == 3):
            lhs = f"({lhs})"
        if rhs_level <= level:
            rhs = f"({rhs})"
        return f"{lhs} {symbol} {rhs}", level

    visit_Compare = visit_Binary

    def visit_Call(self, node: Call) -> tuple[str, int]:
        return f"{node.func}({', '.join(format_expr(a) for a in node.args)})", _ATOM

    def visit_Select(self, node: Select) -> tuple[str, int]:
        parts = ", ".join(format_expr(e) for e in (node.cond, node.true_value, node.false_value))
        return f"select({parts})", _ATOM

    def generic_visit(self, node):
        raise TypeError(f"cannot print {type(node).__name__} in the kernel language")


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
