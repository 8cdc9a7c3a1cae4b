"""Gradient kernels: reverse mode per statement, then a change of variables.

For a statement ``T[l] += E`` and each distinct access ``X[f(v)]`` in E, the
contribution is ``dX[f(v)] += dT[l] * dE/dX[f(v)]`` over the statement's
iteration space.  Its left-hand subscripts ``f(v)`` are then made plain:
each dimension gets a fresh index ``w`` and the equations ``w = f(v)`` are
solved for the original variables, which become ``where`` bindings:

    plain ``v``             -> ``v`` itself is the new index
    ``v // c``, ``v % c``   -> ``v = w0 * c + w1``
    affine, a unit term     -> ``v = w - rest``        (``i + 1``, ``p + r``)
    affine, ``c * v`` only  -> ``v = (w - rest) // c`` where ``(w - rest) % c == 0``
    anything else           -> the condition ``w == f(v)`` (v keeps looping)

A variable that loses the subscript giving its range keeps that range as
explicit conditions, so the new statement covers exactly the old space; a
summed variable it no longer mentions at all becomes a factor (its count).
"""

from __future__ import annotations

from kuiper.errors import TESyntaxError
from kuiper.ir import make
from kuiper.ir.buffers import buffer
from kuiper.ir.nodes import Binary, Const, Indexing, IRExpr, Var
from kuiper.ir.simplify import simplify
from kuiper.te.derivative import adjoints
from kuiper.te.intervals import affine, variables
from kuiper.te.kernel import Kernel, Statement
from kuiper.te.rewrite import from_affine, substitute, tidy


def grad(kernel: Kernel, wrt, name: str | None = None) -> Kernel:
    """The gradient kernel: inputs (forward inputs it reads, then d<out> per output), outputs d<x> per ``wrt``."""
    wrt = [wrt] if isinstance(wrt, str) else list(wrt)
    for x in wrt:
        if x not in kernel.inputs:
            raise TESyntaxError(f"cannot differentiate with respect to {x!r}: the kernel's inputs are {kernel.inputs}")
    for tensor in [*kernel.outputs, *wrt]:
        if "d" + tensor in kernel.buffers:
            raise TESyntaxError(f"the kernel already has a tensor named d{tensor}, the name of a gradient")
    statements: list[Statement] = []
    for stmt, ranges in zip(kernel.statements, kernel.ranges):
        target = stmt.target
        seed = buffer("d" + target.tensor.name, target.tensor.shape, target.tensor.dtype)[target.indices]
        for access, adjoint in adjoints(stmt.value, seed, set(wrt)).items():
            statements.append(_change_of_variables(stmt, ranges, access, adjoint))
    outputs = ["d" + x for x in wrt]
    read = {a.tensor.name for s in statements for a in s.accesses()}
    inputs = [x for x in kernel.inputs if x in read] + ["d" + out for out in kernel.outputs]
    declared = [buffer("d" + t, kernel.buffers[t].shape, kernel.buffers[t].dtype) for t in [*kernel.outputs, *wrt]]
    return Kernel(statements, inputs=inputs, outputs=outputs, name=name or f"grad_{kernel.name}", declared=declared)


def _change_of_variables(stmt: Statement, ranges, access: Indexing, adjoint: IRExpr) -> Statement:
    taken = set(ranges.bounds) | {name for name in variables(adjoint)}
    definitions = {var.name: expr for var, expr in stmt.bindings}
    subscripts = [_expand(index, definitions) for index in access.indices]
    shape = access.tensor.shape
    new_indices: list[Var | None] = [None] * len(subscripts)
    solved: dict[str, IRExpr] = {}  # original variable -> its value, in new indices and still-free variables
    order: list[str] = []
    conditions: list[IRExpr] = []

    introduced: set[str] = set()  # the new left-hand indices: knowns, never solved for

    def fresh(base: str) -> Var:
        number = 0
        while f"{base}{number}" in taken:
            number += 1
        taken.add(f"{base}{number}")
        introduced.add(f"{base}{number}")
        return make.var(f"{base}{number}", "int64")

    def solve(name: str, value: IRExpr) -> None:
        solved[name] = value
        order.append(name)

    # Plain subscripts keep their variable as the new index.
    for axis, index in enumerate(subscripts):
        if isinstance(index, Var) and index.name not in solved and index.name not in definitions:
            new_indices[axis] = index
            solved[index.name] = index
    # i // c and i % c in two dimensions: i = w0 * c + w1.
    for axis, index in enumerate(subscripts):
        for other, partner in enumerate(subscripts):
            divided = _split(index, "floordiv")
            if (
                divided
                and _split(partner, "mod") == divided
                and new_indices[axis] is None
                and new_indices[other] is None
            ):
                name, divisor = divided
                if name in solved:
                    continue
                high, low = fresh(name), fresh(name)
                new_indices[axis], new_indices[other] = high, low
                solve(name, high * divisor + low)
                if shape[other] > divisor:
                    conditions.append(make.lt(low, divisor))
    # Everything else, one dimension at a time.
    for axis, index in enumerate(subscripts):
        if new_indices[axis] is not None:
            continue
        index = substitute(index, solved)
        coefficients = affine(index)
        unknowns = [n for n in (coefficients or {}) if n is not None and n not in solved and n not in introduced]
        if coefficients is None or not unknowns:
            new = fresh("x")
            new_indices[axis] = new
            conditions.append(make.eq(new, index))
            continue
        unit = [n for n in unknowns if abs(coefficients[n]) == 1]
        name = (unit or unknowns)[0]
        new = fresh(name)
        new_indices[axis] = new
        coefficient = coefficients.pop(name)
        rest = make.sub(new, from_affine(coefficients))
        if abs(coefficient) == 1:
            solve(name, rest if coefficient == 1 else make.neg(rest))
        else:
            if coefficient < 0:  # c * v = rest with c < 0: v = (-rest) // |c|
                rest, coefficient = tidy(make.neg(rest)), -coefficient
            solve(name, make.floordiv(rest, coefficient))
            conditions.append(make.eq(make.mod(rest, coefficient), 0))

    bindings = [(make.var(name, "int64"), tidy(solved[name])) for name in reversed(order)]
    bindings += list(stmt.bindings)
    conditions += list(stmt.conditions)
    target = buffer("d" + access.tensor.name, shape, access.tensor.dtype)[tuple(new_indices)]
    draft = Statement(target, adjoint, True, tuple(bindings), tuple(conditions))
    conditions += _lost_ranges(draft, ranges)
    # A summed forward variable the new statement no longer mentions: its sum is a count.
    mentioned = variables_of(draft) | {index.name for index in new_indices}
    count = 1
    for name, (lo, hi) in ranges.free.items():
        if name not in mentioned:
            count *= hi - lo
    if count != 1:
        adjoint = simplify(make.mul(adjoint, make.const(count, adjoint.dtype)))
    return Statement(target, adjoint, True, tuple(bindings), tuple(conditions))


def _lost_ranges(draft: Statement, forward) -> list[IRExpr]:
    """Conditions keeping every forward variable inside its forward range.

    The new statement's own ranges: a left-hand index its dimension; a bound
    variable the smallest dimension it stands alone in; a free one the
    dimension it stands alone in, if all agree (else it has none of its own).
    """
    lhs = {index.name: (0, extent) for index, extent in zip(draft.target.indices, draft.tensor.shape)}
    bound = {var.name for var, _ in draft.bindings}
    extents: dict[str, set[int]] = {}
    for access in draft.accesses():
        for index, extent in zip(access.indices, access.tensor.shape):
            if isinstance(index, Var) and index.name not in lhs:
                extents.setdefault(index.name, set()).add(extent)
    natural = dict(lhs)
    for name, found in extents.items():
        if name in bound or len(found) == 1:
            natural[name] = (0, min(found))
    mentioned = variables_of(draft)
    extra = []
    for name, (lo, hi) in {**forward.free, **forward.guarded}.items():
        if name not in natural and name not in mentioned:
            continue  # a variable the new statement no longer mentions
        have_lo, have_hi = natural.get(name, (0 if name not in bound else None, None))
        var = make.var(name, "int64")
        if have_lo is None or lo > have_lo:
            extra.append(make.ge(var, lo))
        if have_hi is None or hi < have_hi:
            extra.append(make.lt(var, hi))
    return extra


def variables_of(stmt: Statement) -> set[str]:
    names = set(variables(stmt.value))
    for var, expr in stmt.bindings:
        names |= {var.name, *variables(expr)}
    for cond in stmt.conditions:
        names |= set(variables(cond))
    return names


def _split(index: IRExpr, op: str):
    """(name, c) for ``name // c`` or ``name % c`` with a positive constant c."""
    if isinstance(index, Binary) and index.op == op and isinstance(index.lhs, Var) and isinstance(index.rhs, Const):
        if int(index.rhs.value) > 0:
            return index.lhs.name, int(index.rhs.value)
    return None


def _expand(index: IRExpr, definitions: dict[str, IRExpr]) -> IRExpr:
    """Replace forward-bound variables by their definitions (in order, so recursively)."""
    for _ in range(len(definitions) + 1):
        expanded = substitute(index, definitions)
        if expanded == index:
            return index
        index = expanded
    return index
