"""Flatten an elementwise Function into one assignment per operation.

    out = (exp(x0) + exp(x0)) * x1
becomes
    t0 = exp(x0)
    t1 = (t0 + t0)
    t2 = (t1 * x1)
    out = t2

Operands of every temporary are parameters, constants or earlier
temporaries; equal subtrees get one temporary (hash-consing = common
subexpression elimination).  Code generators work on this form.
Linearizing a linear function gives the same function back.
"""

from __future__ import annotations

from kuiper.ir.recursion import deep_recursion
from kuiper.ir.nodes import Assign, Block, Const, DimSize, Function, IRExpr, Var
from kuiper.ir.visitors import Mutator


def linearize(fn: Function) -> Function:
    with deep_recursion():
        trees = _result_trees(fn)
        flattener = _Flattener({p.name for p in fn.params})
        values = [flattener.visit(tree) for tree in trees]
    body = [*flattener.assignments, *(Assign(r, v) for r, v in zip(fn.results, values))]
    return Function(fn.name, fn.params, Block(tuple(body)), fn.results, fn.returns_list)


def _result_trees(fn: Function) -> list[IRExpr]:
    """Each result as one expression tree, temporaries substituted back in."""
    definitions: dict[Var, IRExpr] = {}
    for stmt in fn.body.stmts:
        if not isinstance(stmt, Assign) or not isinstance(stmt.target, Var):
            raise ValueError(f"not an elementwise function body: {stmt}")
        definitions[stmt.target] = stmt.value
    inliner = _Inliner(definitions)
    return [inliner(definitions[result]) for result in fn.results]


class _Inliner(Mutator):
    def __init__(self, definitions: dict[Var, IRExpr]):
        super().__init__()
        self.definitions = definitions

    def visit_Var(self, node: Var) -> IRExpr:
        if node in self.definitions:
            return self.visit(self.definitions[node])
        return node


class _Flattener(Mutator):
    """Each visit returns a leaf (parameter, constant or temporary) holding the node's value.

    The operands are flattened first (generic_visit), then the node gets a temporary; the
    Mutator's memo gives equal subtrees the same temporary.
    """

    def __init__(self, param_names: set[str]):
        super().__init__()
        self.param_names = param_names
        self.assignments: list[Assign] = []

    def visit_Var(self, node: Var) -> Var:
        return node

    def visit_Const(self, node: Const) -> Const:
        return node

    def visit_DimSize(self, node: DimSize) -> Var:
        return self._temporary(node)  # its tensor stays the parameter itself

    def generic_visit(self, node: IRExpr) -> Var:
        return self._temporary(super().generic_visit(node))

    def _temporary(self, value: IRExpr) -> Var:
        temporary = Var(f"t{len(self.assignments)}", value.dtype)
        if temporary.name in self.param_names:
            raise ValueError(f"parameter name {temporary.name!r} clashes with a temporary")
        self.assignments.append(Assign(temporary, value))
        return temporary
