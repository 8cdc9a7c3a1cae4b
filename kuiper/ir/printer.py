"""Print IR as readable text, for tests and error messages.

    func expression(x0: float32, x1: float32) -> (out: float32) {
      out = (exp(x0) + x1)
    }

``print_ir(node, compact=True)`` puts everything on one line:
``for i in (0, 200, 1) { b = (b + A[idx, i]) }``.
"""

from __future__ import annotations

from kuiper.ir.functions import OPERATORS
from kuiper.ir.recursion import deep_recursion
from kuiper.ir.nodes import (
    Assign,
    Binary,
    Block,
    Call,
    Cast,
    Compare,
    Const,
    DimSize,
    For,
    Function,
    If,
    Indexing,
    Node,
    Select,
    Unary,
    Var,
)

# Infix symbols, from the one table of operations (max/min/fmod print as calls).
INFIX = {name: op.symbol for name, op in OPERATORS.items() if op.symbol and op.arity == 2}
_INDENT = "  "


def print_ir(node: Node, compact: bool = False) -> str:
    with deep_recursion():
        if isinstance(node, (Function, Block, Assign, For, If)):
            lines = _stmt_lines(node, 0)
            if compact:
                return " ".join(line.strip() for line in lines)
            return "\n".join(lines)
        return _expr(node)


def _expr(node: Node) -> str:
    if isinstance(node, Const):
        return repr(node.value)
    if isinstance(node, Var):
        return node.name
    if isinstance(node, Unary):
        return f"(-{_expr(node.operand)})" if node.op == "neg" else f"(!{_expr(node.operand)})"
    if isinstance(node, (Binary, Compare)):
        symbol = INFIX.get(node.op)
        if symbol is None:
            return f"{node.op}({_expr(node.lhs)}, {_expr(node.rhs)})"
        return f"({_expr(node.lhs)} {symbol} {_expr(node.rhs)})"
    if isinstance(node, Call):
        return f"{node.func}({', '.join(_expr(a) for a in node.args)})"
    if isinstance(node, Cast):
        return f"{node.dtype}({_expr(node.operand)})"
    if isinstance(node, Select):
        return f"select({_expr(node.cond)}, {_expr(node.true_value)}, {_expr(node.false_value)})"
    if isinstance(node, Indexing):
        return f"{node.tensor.name}[{', '.join(_expr(i) for i in node.indices)}]"
    if isinstance(node, DimSize):
        if node.axis is None:
            return f"shape({node.tensor.name})"
        return f"size({node.tensor.name}, {node.axis})"
    raise TypeError(f"not an IR expression: {node!r}")


def _stmt_lines(node: Node, level: int) -> list[str]:
    pad = _INDENT * level
    if isinstance(node, Assign):
        return [f"{pad}{_expr(node.target)} = {_expr(node.value)}"]
    if isinstance(node, Block):
        return [line for stmt in node.stmts for line in _stmt_lines(stmt, level)]
    if isinstance(node, For):
        header = f"{pad}for {node.var.name} in ({_expr(node.start)}, {_expr(node.stop)}, {_expr(node.step)}) {{"
        return [header, *_stmt_lines(node.body, level + 1), f"{pad}}}"]
    if isinstance(node, If):
        cond = _expr(node.cond)
        if not isinstance(node.cond, (Binary, Compare, Unary)):  # those print their own parentheses
            cond = f"({cond})"
        lines = [f"{pad}if {cond} {{", *_stmt_lines(node.then_body, level + 1)]
        if node.else_body is not None:
            lines += [f"{pad}}} else {{", *_stmt_lines(node.else_body, level + 1)]
        return [*lines, f"{pad}}}"]
    if isinstance(node, Function):
        params = ", ".join(f"{p.name}: {p.dtype}" for p in node.params)
        results = ", ".join(f"{r.name}: {r.dtype}" for r in node.results)
        results = f"[{results}]" if node.returns_list else f"({results})"
        header = f"{pad}func {node.name}({params}) -> {results} {{"
        return [header, *_stmt_lines(node.body, level + 1), f"{pad}}}"]
    raise TypeError(f"not an IR statement: {node!r}")
