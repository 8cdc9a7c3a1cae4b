"""Integer index arithmetic: bounds by interval arithmetic, and affine forms.

bounds(i + 2 * r, {"i": (0, 7), "r": (0, 2)}) -> (0, 11)      inclusive bounds, None if unknown
affine(2 * p + r - 1) -> {"p": 2, "r": 1, None: -1}            None if not affine
"""

from __future__ import annotations

from kuiper.ir.nodes import Binary, Cast, Const, IRExpr, Unary, Var

Bounds = tuple[int, int]


def bounds(expr: IRExpr, env: dict[str, Bounds]) -> Bounds | None:
    if isinstance(expr, Const):
        return (int(expr.value), int(expr.value))
    if isinstance(expr, Var):
        return env.get(expr.name)
    if isinstance(expr, Cast):
        return bounds(expr.operand, env)
    if isinstance(expr, Unary) and expr.op == "neg":
        inner = bounds(expr.operand, env)
        return None if inner is None else (-inner[1], -inner[0])
    if not isinstance(expr, Binary):
        return None
    lhs, rhs = bounds(expr.lhs, env), bounds(expr.rhs, env)
    if lhs is None or rhs is None:
        return None
    if expr.op == "add":
        return (lhs[0] + rhs[0], lhs[1] + rhs[1])
    if expr.op == "sub":
        return (lhs[0] - rhs[1], lhs[1] - rhs[0])
    if expr.op == "mul":
        corners = [a * b for a in lhs for b in rhs]
        return (min(corners), max(corners))
    if expr.op in ("floordiv", "mod") and rhs[0] == rhs[1] and rhs[0] > 0:
        divisor = rhs[0]
        if expr.op == "floordiv":
            return (lhs[0] // divisor, lhs[1] // divisor)
        if lhs[0] >= 0 and lhs[1] < divisor:
            return lhs
        return (0, divisor - 1)  # Python's % with a positive divisor is never negative
    return None


def affine(expr: IRExpr) -> dict[str | None, int] | None:
    """Coefficients per variable name (key None: the constant), or None if not affine."""
    if isinstance(expr, Const):
        return {None: int(expr.value)}
    if isinstance(expr, Var):
        return {expr.name: 1}
    if isinstance(expr, Cast):
        return affine(expr.operand)
    if isinstance(expr, Unary) and expr.op == "neg":
        inner = affine(expr.operand)
        return None if inner is None else {k: -v for k, v in inner.items()}
    if not isinstance(expr, Binary) or expr.op not in ("add", "sub", "mul"):
        return None
    lhs, rhs = affine(expr.lhs), affine(expr.rhs)
    if lhs is None or rhs is None:
        return None
    if expr.op == "mul":
        if set(lhs) == {None}:
            return {k: v * lhs[None] for k, v in rhs.items()}
        if set(rhs) == {None}:
            return {k: v * rhs[None] for k, v in lhs.items()}
        return None
    sign = 1 if expr.op == "add" else -1
    result = dict(lhs)
    for key, value in rhs.items():
        result[key] = result.get(key, 0) + sign * value
    return {k: v for k, v in result.items() if v != 0 or k is None}


def variables(expr: IRExpr) -> list[str]:
    """Names of the Vars in ``expr`` (index variables; tensors are not Vars here), in first-seen order."""
    from kuiper.ir.nodes import Indexing

    found: list[str] = []

    def walk(node):
        if isinstance(node, Indexing):
            for index in node.indices:
                walk(index)
        elif isinstance(node, Var):
            if node.name not in found:
                found.append(node.name)
        else:
            for child in node.children():
                walk(child)

    walk(expr)
    return found
