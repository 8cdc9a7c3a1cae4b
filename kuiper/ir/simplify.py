"""Simplify IR: constant folding and exact algebraic identities.

Bottom up, each node is
  * folded if all its operands are constants (with the node's dtype, so
    float32 arithmetic folds as float32);
  * rewritten by an identity that keeps the dtype and never drops a tensor
    operand (dropping one would lose its broadcast shape):
    x+0, 0+x, x-0, x*1, 1*x, x/1, x**1 -> x;  x**2 -> x*x;  -(-x) -> x;
  * put in a canonical operand order (constants on the right of commutative
    operators), so that the linearizer's hash-consing finds more common
    subexpressions.
``x*0`` is left alone: it is NaN for x = NaN or inf.
"""

from __future__ import annotations

from kuiper.ir.functions import OPERATORS
from kuiper.ir.nodes import Binary, Const, IRExpr, Node, Unary
from kuiper.ir.scalars import apply_to_scalars
from kuiper.ir.visitors import Mutator

_COMMUTATIVE = frozenset(name for name, op in OPERATORS.items() if op.commutative)


def simplify(node: Node) -> Node:
    """Simplify a Function (or any IR node); returns a new node."""
    return _Simplifier()(node)


class _Simplifier(Mutator):
    """Operands first (generic_visit), then the node itself: folded, or rewritten by an identity."""

    def fold(self, node: IRExpr) -> IRExpr:
        node = self.generic_visit(node)
        folded = _fold(node)
        return node if folded is None else folded

    visit_Compare = visit_Call = visit_Cast = visit_Select = fold

    def visit_Unary(self, node: Unary) -> IRExpr:
        node = self.fold(node)
        if isinstance(node, Unary) and node.op == "neg":
            inner = node.operand
            if isinstance(inner, Unary) and inner.op == "neg" and inner.operand.dtype == node.dtype:
                return inner.operand
        return node

    def visit_Binary(self, node: Binary) -> IRExpr:
        node = self.fold(node)
        return _rewrite_binary(node) if isinstance(node, Binary) else node


def _rewrite_binary(node: Binary) -> IRExpr:
    lhs, rhs, op = node.lhs, node.rhs, node.op
    if op in _COMMUTATIVE and isinstance(lhs, Const) and not isinstance(rhs, Const):
        lhs, rhs = rhs, lhs
        node = Binary(op, lhs, rhs, node.dtype)
    if lhs.dtype != node.dtype:
        return node
    if op in ("add", "sub") and _is_const(rhs, 0):
        return lhs
    if op in ("mul", "div", "pow") and _is_const(rhs, 1):
        return lhs
    if op == "pow" and _is_const(rhs, 2):
        return Binary("mul", lhs, lhs, node.dtype)
    return node


def _is_const(node: IRExpr, number: int) -> bool:
    return isinstance(node, Const) and not isinstance(node.value, bool) and node.value == number


def _fold(node: IRExpr) -> Const | None:
    """The constant value of an operation on constants, or None."""
    operands = node.children()
    if not all(isinstance(op, Const) for op in operands):
        return None
    try:
        value = apply_to_scalars(node, [op.value for op in operands])
    except (ArithmeticError, ValueError, TypeError):
        return None  # e.g. an integer to a negative power: leave it for run time
    return Const(value, node.dtype)
