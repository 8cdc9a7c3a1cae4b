"""Small rewrites of index expressions: substitution and canonical affine forms."""

from __future__ import annotations

from kuiper.ir import make
from kuiper.ir.nodes import IRExpr, Var
from kuiper.ir.visitors import Mutator
from kuiper.te.intervals import affine


class _Substitute(Mutator):
    def __init__(self, mapping: dict[str, IRExpr]):
        super().__init__()
        self.mapping = mapping

    def visit_Var(self, node: Var) -> IRExpr:
        return self.mapping.get(node.name, node)


def substitute(expr: IRExpr, mapping: dict[str, IRExpr]) -> IRExpr:
    return _Substitute(mapping)(expr) if mapping else expr


def from_affine(coefficients: dict[str | None, int]) -> IRExpr:
    """``{"w": 1, "r": -2, None: 3}`` as ``w - 2 * r + 3``; a leading negative term yields to a
    positive constant (``6 - w``, not ``-w + 6``)."""
    terms = [(name, c) for name, c in coefficients.items() if name is not None and c != 0]
    constant = coefficients.get(None, 0)
    total: IRExpr | None = None
    if constant > 0 and not any(c > 0 for _, c in terms):
        total, constant = make.const(constant, "int64"), 0
    for name, coefficient in sorted(terms, key=lambda term: term[1] < 0):  # positive terms first
        term = make.var(name, "int64")
        if abs(coefficient) != 1:
            term = make.mul(abs(coefficient), term)
        if total is None:
            total = term if coefficient > 0 else make.neg(term)
        else:
            total = make.sub(total, term) if coefficient < 0 else make.add(total, term)
    if total is None:
        return make.const(constant, "int64")
    if constant:
        total = make.add(total, constant) if constant > 0 else make.sub(total, -constant)
    return total


def tidy(expr: IRExpr) -> IRExpr:
    """Affine expressions in a canonical, readable form (``w - r``, ``i0 - 1``); others unchanged."""
    coefficients = affine(expr)
    if coefficients is None:
        return expr
    return from_affine(coefficients)
