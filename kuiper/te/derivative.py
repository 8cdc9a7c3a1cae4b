"""Reverse-mode derivative of a right-hand side with respect to its tensor accesses.

Each distinct access (``B[i, j]``, ``B[i + 1, j]``) is its own variable;
``adjoints(value, seed, wanted)`` returns, per access of a wanted tensor, the
sum over its occurrences of ``seed * d value / d access``, built from the
rules of the IR's elementwise table (kuiper/ir/functions.py), one per operator and function.
"""

from __future__ import annotations

from kuiper.ir import dtypes, make
from kuiper.ir.nodes import Binary, Call, Cast, Const, Indexing, IRExpr, Select, Unary
from kuiper.ir.simplify import simplify
from kuiper.te.functions import derivative_rule


def adjoints(value: IRExpr, seed: IRExpr, wanted: set[str]) -> dict[Indexing, IRExpr]:
    found: dict[Indexing, dict[IRExpr, int]] = {}  # access -> its adjoint terms, with multiplicity
    depends: dict[IRExpr, bool] = {}

    def reads_wanted(node: IRExpr) -> bool:
        if node not in depends:
            if isinstance(node, Indexing):
                depends[node] = node.tensor.name in wanted
            else:
                depends[node] = any(reads_wanted(child) for child in node.children())
        return depends[node]

    def visit(node: IRExpr, grad: IRExpr) -> None:
        if not reads_wanted(node) or not dtypes.is_float(node.dtype):
            return  # index arithmetic and conditions carry no derivative
        if isinstance(node, Indexing):
            terms = found.setdefault(node, {})
            terms[grad] = terms.get(grad, 0) + 1
        elif isinstance(node, Cast):
            visit(node.operand, make.cast(grad, node.operand.dtype))
        elif isinstance(node, Select):
            zero = make.const(0, node.dtype)
            visit(node.true_value, make.select(node.cond, grad, zero))
            visit(node.false_value, make.select(node.cond, zero, grad))
        elif isinstance(node, (Unary, Binary, Call)):
            op = node.func if isinstance(node, Call) else node.op
            args = node.children()
            rule = derivative_rule(op)
            if rule is None:
                return  # piecewise constant (floor, round, ...): zero almost everywhere
            for arg, arg_grad in zip(args, rule(args, node, grad)):
                if not _is_zero(arg_grad):
                    visit(arg, make.as_expr(arg_grad))
        else:
            raise TypeError(f"no derivative rule for {type(node).__name__}")

    visit(value, seed)
    return {access: simplify(make.cast(_sum(terms), access.dtype)) for access, terms in found.items()}


def _is_zero(expr) -> bool:
    """``grad * 0``, how the table's rules say "zero almost everywhere" (floor, round ...)."""
    expr = make.as_expr(expr)
    return isinstance(expr, Binary) and expr.op == "mul" and isinstance(expr.rhs, Const) and expr.rhs.value == 0


def _sum(terms: dict[IRExpr, int]) -> IRExpr:
    """The sum of the terms; a term reached n times (``x * x``) becomes ``term * n``."""
    total = None
    for term, count in terms.items():
        if count > 1:
            term = make.mul(term, make.const(count, term.dtype))
        total = term if total is None else make.add(total, term)
    return total
