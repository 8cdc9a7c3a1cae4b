"""Run a kernel on arrays of any backend, vectorised: no Python loop per element.

Each statement's iteration space (kuiper.te.nest) is computed in one of two ways:

* einsum: the value is a product of accesses and constants and nothing is
  guarded.  An access whose subscripts are ``a*v + b`` or constants becomes a
  strided slice (a view); any other access is gathered with index arrays
  over the variables it uses.  One einsum then multiplies and sums.
* grid: anything else.  Every loop variable is an ``arange`` along its own
  axis; subscripts, the guard and the value are evaluated by broadcasting
  (guarded reads use clamped subscripts and are masked out), and the
  reduction axes are summed.

Both add their result into a slice of the zero-initialised output.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

from kuiper.ir import dtypes
from kuiper.ir.nodes import Binary, Const, Indexing, IRExpr, Unary, Var
from kuiper.ir.xp_ops import resolve
from kuiper.te.intervals import affine
from kuiper.te.nest import Nest


@dataclass(frozen=True)
class Monomial:
    coefficient: float
    factors: tuple[Indexing, ...]


def monomial(value: IRExpr) -> Monomial | None:
    """``c * X[..] * Y[..] / d`` as (c / d, [X[..], Y[..]]), or None."""
    if isinstance(value, Indexing):
        return Monomial(1.0, (value,))
    if isinstance(value, Const) and not isinstance(value.value, bool):
        return Monomial(float(value.value), ())
    if isinstance(value, Unary) and value.op == "neg":
        inner = monomial(value.operand)
        return None if inner is None else Monomial(-inner.coefficient, inner.factors)
    if isinstance(value, Binary) and value.op == "mul":
        lhs, rhs = monomial(value.lhs), monomial(value.rhs)
        if lhs is None or rhs is None:
            return None
        return Monomial(lhs.coefficient * rhs.coefficient, lhs.factors + rhs.factors)
    if isinstance(value, Binary) and value.op == "div" and isinstance(value.rhs, Const):
        lhs = monomial(value.lhs)
        return None if lhs is None else Monomial(lhs.coefficient / float(value.rhs.value), lhs.factors)
    return None


def run_nest(nest: Nest, backend, arrays: dict, out) -> None:
    if nest.empty:
        return
    product = None if nest.guard else monomial(nest.value)
    if product is not None:
        result = _einsum(nest, product, backend, arrays)
    else:
        result = _grid(nest, backend, arrays)
    region = tuple(slice(start, stop) for _, start, stop in nest.loops[: len(nest.target.indices)])
    out[region] += result


# --- einsum ---------------------------------------------------------------------------


def _einsum(nest: Nest, product: Monomial, backend, arrays: dict):
    xp = backend.xp
    loops = {name: (start, stop) for name, start, stop in nest.loops}
    letters = dict(zip(loops, string.ascii_letters))
    operands, subscripts = [], []
    for access in product.factors:
        view, labels = _view(access, loops, xp, arrays[access.tensor.name])
        operands.append(view)
        subscripts.append("".join(letters[name] for name in labels))
    used = set("".join(subscripts))
    lhs_names = [name for name, _, _ in nest.loops[: len(nest.target.indices)]]
    present = [name for name in lhs_names if letters[name] in used]
    scale = product.coefficient
    for name, start, stop in nest.reduction_loops:
        if letters[name] not in used:
            scale *= stop - start  # a summed variable no factor reads: its sum is a count
    dtype = dtypes.storage_dtype(nest.target.dtype)
    if operands:
        equation = ",".join(subscripts) + "->" + "".join(letters[name] for name in present)
        result = backend.einsum(equation, *operands)
    else:
        result = xp.asarray(1.0, dtype=getattr(xp, dtype))
    if scale != 1.0:
        result = result * xp.asarray(scale, dtype=getattr(xp, dtype))
    # Left-hand variables no factor reads: the result is the same along them.
    shape = tuple(stop - start for _, start, stop in nest.loops[: len(lhs_names)])
    expanded = tuple(shape[i] if name in present else 1 for i, name in enumerate(lhs_names))
    return xp.broadcast_to(xp.reshape(result, expanded), shape)


def _view(access: Indexing, loops, xp, array):
    """(array, labels): a strided view when every subscript is a*v + b, else a gather."""
    slices, labels = [], []
    for index in access.indices:
        form = affine(index)
        names = [n for n in (form or {}) if n is not None]
        if form is not None and not names:
            slices.append(form.get(None, 0))
        elif form is not None and len(names) == 1 and form[names[0]] > 0:
            name = names[0]
            a, b = form[name], form.get(None, 0)
            start, stop = loops[name]
            slices.append(slice(a * start + b, a * (stop - 1) + b + 1, a))
            labels.append(name)
        else:
            break
    else:
        return array[tuple(slices)], labels
    involved = [name for name in loops if any(name in _names(i) for i in access.indices)]
    env = {name: _arange(xp, loops[name], position, len(involved)) for position, name in enumerate(involved)}
    indices = tuple(_evaluate(index, env, xp, {}, False) for index in access.indices)
    return array[indices], involved


# --- grid -----------------------------------------------------------------------------


def _grid(nest: Nest, backend, arrays: dict):
    xp = backend.xp
    count = len(nest.loops)
    env = {name: _arange(xp, (start, stop), axis, count) for axis, (name, start, stop) in enumerate(nest.loops)}
    shape = tuple(stop - start for _, start, stop in nest.loops)
    guarded = bool(nest.guard)
    value = _evaluate(nest.value, env, xp, arrays, guarded)
    value = xp.broadcast_to(xp.asarray(value), shape)
    if guarded:
        mask = None
        for test in nest.guard:
            passed = _evaluate(test, env, xp, arrays, guarded)
            mask = passed if mask is None else xp.logical_and(mask, passed)
        value = xp.where(mask, value, xp.zeros((), dtype=value.dtype))
    reduced = tuple(range(len(nest.target.indices), count))
    return xp.sum(value, axis=reduced) if reduced else value


def _arange(xp, bounds, axis: int, count: int):
    start, stop = bounds
    values = xp.arange(start, stop, dtype=xp.int64)
    return xp.reshape(values, tuple(-1 if i == axis else 1 for i in range(count)))


def _evaluate(node: IRExpr, env: dict, xp, arrays: dict, clamp: bool):
    if isinstance(node, Var):
        return env[node.name]
    if isinstance(node, Const):
        return xp.asarray(node.value, dtype=getattr(xp, dtypes.storage_dtype(node.dtype)))
    if isinstance(node, Indexing):
        array = arrays[node.tensor.name]
        indices = []
        for index, extent in zip(node.indices, node.tensor.shape):
            position = _evaluate(index, env, xp, arrays, clamp)
            if clamp:  # a guarded point may subscript outside; its value is masked out afterwards
                position = xp.clip(position, 0, extent - 1)
            indices.append(position)
        return array[tuple(indices)]
    operands = [_evaluate(child, env, xp, arrays, clamp) for child in node.children()]
    return resolve(xp, node).fn(*operands)


def _names(expr: IRExpr) -> set[str]:
    if isinstance(expr, Var):
        return {expr.name}
    return set().union(*(_names(c) for c in expr.children())) if expr.children() else set()
