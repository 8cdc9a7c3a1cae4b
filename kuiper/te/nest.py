"""A statement as an iteration space: loops with bounds, a guard, and a value.

``normalise(stmt, ranges)`` substitutes the ``where`` bindings into the value
(so everything is in terms of loop variables) and turns range guards into
loop bounds where it can: ``i = i0 - 1`` with i in [0, 8) makes i0 loop over
[1, 9) with no test; guards that interval arithmetic proves always true are
dropped.  What remains in ``guard`` is checked per point.  The IR lowering
and the NumPy compiler both start from this one form.
"""

from __future__ import annotations

from dataclasses import dataclass

from kuiper.ir import make
from kuiper.ir.nodes import Compare, Indexing, IRExpr
from kuiper.te.intervals import affine, bounds
from kuiper.te.rewrite import substitute


@dataclass(frozen=True)
class Nest:
    target: Indexing  # subscripts: the first len(target.indices) loop variables, in order
    loops: tuple[tuple[str, int, int], ...]  # (name, start, stop), left-hand variables first
    value: IRExpr
    guard: tuple[IRExpr, ...]  # conditions on loop variables still needed per point

    @property
    def empty(self) -> bool:
        return any(start >= stop for _, start, stop in self.loops)

    @property
    def reduction_loops(self) -> tuple[tuple[str, int, int], ...]:
        return self.loops[len(self.target.indices) :]


def normalise(stmt, ranges) -> Nest:
    loops = dict(ranges.free)
    definitions: dict[str, IRExpr] = {}
    tests: list[IRExpr] = []
    for var, expr in stmt.bindings:
        expr = substitute(expr, definitions)
        definitions[var.name] = expr
        if var.name in ranges.guarded:
            lo, hi = ranges.guarded[var.name]
            tests += [make.ge(expr, lo), make.lt(expr, hi)]
    tests += [substitute(cond, definitions) for cond in stmt.conditions]
    remaining = []
    for test in tests:  # bounds on one variable become loop bounds
        if not _narrow(loops, test):
            remaining.append(test)
    env = {name: (lo, hi - 1) for name, (lo, hi) in loops.items()}
    guard = tuple(test for test in remaining if not _always(test, env))
    target = stmt.target
    value = substitute(stmt.value, definitions)
    return Nest(target, tuple((name, lo, hi) for name, (lo, hi) in loops.items()), value, guard)


def _narrow(loops: dict[str, tuple[int, int]], test: IRExpr) -> bool:
    """If ``test`` is ``a*v + b OP c`` for one loop variable v, apply it to v's bounds; True if done."""
    if not isinstance(test, Compare) or test.op not in ("lt", "le", "gt", "ge"):
        return False
    difference = affine(make.sub(test.lhs, test.rhs))  # test: difference OP 0
    if difference is None:
        return False
    names = [n for n in difference if n is not None]
    if len(names) != 1 or names[0] not in loops:
        return False
    (name,) = names
    a, b = difference[name], difference.get(None, 0)
    # a*v + b OP 0, as lo <= a*v + b <= hi on integers
    op = test.op
    low, high = {"lt": (None, -1), "le": (None, 0), "gt": (1, None), "ge": (0, None)}[op]
    start, stop = loops[name]
    for bound, is_low in ((low, True), (high, False)):
        if bound is None:
            continue
        # a*v >= bound - b  (is_low)  or  a*v <= bound - b
        limit = bound - b
        if (a > 0) == is_low:  # v >= ceil(limit / a)
            start = max(start, -((-limit) // a))
        else:  # v <= floor(limit / a)
            stop = min(stop, limit // a + 1)
    loops[name] = (start, stop)
    return True


def _always(test: IRExpr, env) -> bool:
    """True when interval arithmetic proves the comparison for every point."""
    if not isinstance(test, Compare):
        return False
    lhs, rhs = bounds(test.lhs, env), bounds(test.rhs, env)
    if lhs is None or rhs is None:
        return False
    return {
        "lt": lhs[1] < rhs[0],
        "le": lhs[1] <= rhs[0],
        "gt": lhs[0] > rhs[1],
        "ge": lhs[0] >= rhs[1],
        "eq": lhs[0] == lhs[1] == rhs[0] == rhs[1],
        "ne": lhs[1] < rhs[0] or lhs[0] > rhs[1],
    }.get(test.op, False)


def conjunction(tests) -> IRExpr | None:
    result = None
    for test in tests:
        result = test if result is None else make.bitwise("and", result, test)
    return result
