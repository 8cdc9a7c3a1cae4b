"""One renderer for tensor IR: the walk every text target shares.

A target (printer.py: readable text; render_c.py: C++ and CUDA; render_numpy.py:
NumPy source) is a subclass that fills in a small table:

    spell(row, node)      how an operation of functions.py is written in the target: a
                          symbol ("+", "<<", "!") goes between its operands (before its one
                          operand), a name ("expf", "np.maximum", "kuiper_max") is called
    literal(node)         a constant
    visit_Cast, visit_Select, visit_Indexing, visit_DimSize
                          the expression nodes that are not operations
    assign(target, value), for_header(node), visit_Function
                          the statements, where the target has them
    tensor_prefix, variable_prefix
                          put before every tensor and variable name: "u_" and "v_" where the
                          names are a user's (kuiper.ir.identifiers)

Everything else is written once, here: every operation is parenthesised (so no
target needs a precedence table), operands are rendered before the operation,
blocks are indented, ``if``/``else`` have one shape.  An expression renders to a
string, a statement to a list of lines.
"""

from __future__ import annotations

from kuiper.ir.functions import Operation, operation
from kuiper.ir.nodes import Assign, Binary, Block, Call, Compare, Const, For, If, IRExpr, Node, Unary
from kuiper.ir.recursion import deep_recursion
from kuiper.ir.visitors import Visitor


class Renderer(Visitor):
    """Base of the text targets; see the module docstring for what a target supplies."""

    target = "text"  # named in errors
    indent = "  "
    # Put before every tensor and variable name: "u_" and "v_" where the names are a user's
    # (kuiper.ir.identifiers), so that they cannot meet the target's own names or each other.
    tensor_prefix = ""
    variable_prefix = ""

    def render(self, node: Node, compact: bool = False) -> str:
        """The text of an expression, or of a statement (its lines; on one line if ``compact``)."""
        with deep_recursion():
            text = self.visit(node)
        if isinstance(text, list):
            return " ".join(line.strip() for line in text) if compact else "\n".join(text)
        return text

    def lines(self, node: Node, level: int = 0) -> list[str]:
        """A statement's lines, indented ``level`` times."""
        with deep_recursion():
            return [self.indent * level + line for line in self.visit(node)]

    def generic_visit(self, node: Node):
        raise TypeError(f"no {self.target} for {type(node).__name__}")

    # --- the table a target fills in -----------------------------------------------------------

    def spell(self, row: Operation, node: IRExpr) -> str:
        raise NotImplementedError

    def literal(self, node: Const) -> str:
        raise NotImplementedError

    def assign(self, target: str, value: str) -> str:
        raise TypeError(f"no {self.target} for statements")

    def for_header(self, node: For) -> str:
        raise TypeError(f"no {self.target} for loops")

    # --- expressions -----------------------------------------------------------------------------

    def visit_Const(self, node: Const) -> str:
        return self.literal(node)

    def variable(self, name: str) -> str:
        """The emitted spelling of a variable name."""
        return self.variable_prefix + name

    def tensor(self, name: str) -> str:
        """The emitted spelling of a tensor name."""
        return self.tensor_prefix + name

    def visit_Var(self, node) -> str:
        return self.variable(node.name)

    def visit_Buffer(self, node) -> str:  # dispatch is by exact class (a Buffer passes other passes untouched)
        return self.tensor(node.name)

    def visit_Unary(self, node: Unary) -> str:
        return self.apply(node.op, node, node.operand)

    def visit_Binary(self, node: Binary | Compare) -> str:
        return self.apply(node.op, node, node.lhs, node.rhs)

    visit_Compare = visit_Binary

    def visit_Call(self, node: Call) -> str:
        return self.apply(node.func, node, *node.args)

    def apply(self, name: str, node: IRExpr, *operands: IRExpr) -> str:
        spelling = self.spell(operation(name), node)
        args = [self.visit(operand) for operand in operands]
        if spelling[0].isalpha() or spelling[0] == "_":
            return f"{spelling}({', '.join(args)})"
        if len(args) == 1:
            return f"({spelling}{args[0]})"
        return f"({args[0]} {spelling} {args[1]})"

    # --- statements ------------------------------------------------------------------------------

    def visit_Block(self, node: Block) -> list[str]:
        return [line for stmt in node.stmts for line in self.visit(stmt)]

    def visit_Assign(self, node: Assign) -> list[str]:
        return [self.assign(self.visit(node.target), self.visit(node.value))]

    def visit_For(self, node: For) -> list[str]:
        return [self.for_header(node), *self.nested(node.body), "}"]

    def visit_If(self, node: If) -> list[str]:
        lines = [f"if ({unwrap(self.visit(node.cond))}) {{", *self.nested(node.then_body)]
        if node.else_body is not None:
            lines += ["} else {", *self.nested(node.else_body)]
        return [*lines, "}"]

    def nested(self, body: Block) -> list[str]:
        return [self.indent + line for line in self.visit(body)]


def unwrap(text: str) -> str:
    """``text`` without one pair of parentheses around all of it (``(a + b)`` -> ``a + b``)."""
    if not (text.startswith("(") and text.endswith(")")):
        return text
    depth = 0
    for char in text[1:-1]:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth < 0:
            return text  # "(a) + (b)": the first parenthesis closes early
    return text[1:-1] if depth == 0 else text
