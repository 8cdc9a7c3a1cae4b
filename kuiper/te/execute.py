"""Run a kernel on arrays of any backend, vectorised: no Python loop per element.

Each statement's iteration space (kuiper.te.nest) is planned once, in one of two ways:

* EinsumPlan: the value is a product of accesses and constants, and either
  nothing is guarded or the guard only keeps subscripts inside their tensors
  (then those tensors are read zero-padded, see ``_paddings``).  An access
  whose subscripts are ``a*u + b``, ``a*u + v + b`` (a sliding window) or
  constants becomes a view; any other access is gathered with index arrays
  over the variables it uses.  One einsum then multiplies and sums.
* GridPlan: anything else.  Every loop variable is an ``arange`` along its own
  axis; subscripts, the guard and the value are evaluated by broadcasting
  (guarded reads use clamped subscripts and are masked out), and the
  reduction axes are summed.

Both add their result into ``region``, a slice of the zero-initialised output.
``run_plan`` executes a plan with a backend; kuiper.te.numpy_source prints
the same plans as NumPy source.
"""

from __future__ import annotations

import math
import string
from dataclasses import dataclass, replace

from kuiper.ir import dtypes, make
from kuiper.ir.nodes import Binary, Compare, Const, Indexing, IRExpr, Unary, Var
from kuiper.ir.xp_ops import resolve
from kuiper.te.intervals import affine, bounds
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
        if float(value.rhs.value) == 0.0:
            return None  # x / 0 is inf or nan per element (IEEE): the general path computes it
        lhs = monomial(value.lhs)
        return None if lhs is None else Monomial(lhs.coefficient / float(value.rhs.value), lhs.factors)
    return None


# --- plans ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Operand:
    """One einsum factor: ``tensor[slices]`` (a view), or ``tensor[gather]`` over ``labels``' aranges."""

    tensor: str
    labels: tuple[str, ...]
    slices: tuple | None = None
    gather: tuple[IRExpr, ...] | None = None
    padding: tuple[tuple[int, int], ...] | None = None  # zeros around the tensor before gathering
    windows: tuple[tuple[int, int], ...] = ()  # (axis, length): sliding windows appended before slicing


@dataclass(frozen=True)
class EinsumPlan:
    target: str
    dtype: str
    region: tuple[slice, ...]
    loops: dict  # name -> (start, stop)
    operands: tuple[Operand, ...]
    equation: str  # "" when there is no factor (a constant)
    scale: float
    expanded: tuple[int, ...]  # the einsum result reshaped: 1 along left-hand axes no factor reads
    shape: tuple[int, ...]  # ... and broadcast to the region's shape


@dataclass(frozen=True)
class GridPlan:
    target: str
    region: tuple[slice, ...]
    loops: tuple[tuple[str, int, int], ...]
    value: IRExpr
    guard: tuple[IRExpr, ...]
    reduced: tuple[int, ...]


def plan(nest: Nest) -> EinsumPlan | GridPlan | None:
    """How to compute one nest; None when its iteration space is empty."""
    if nest.empty:
        return None
    count = len(nest.target.indices)
    region = tuple(slice(start, stop) for _, start, stop in nest.loops[:count])
    target = nest.target.tensor.name
    loops = {name: (start, stop) for name, start, stop in nest.loops}
    product = monomial(nest.value)
    paddings = _paddings(nest.guard, product.factors, loops) if product is not None else None
    if paddings is None:
        return GridPlan(target, region, nest.loops, nest.value, nest.guard, tuple(range(count, len(nest.loops))))
    letters = dict(zip(loops, string.ascii_letters))
    operands = tuple(_operand(access, loops, padding) for access, padding in zip(product.factors, paddings))
    subscripts = ["".join(letters[name] for name in operand.labels) for operand in operands]
    used = set("".join(subscripts))
    lhs_names = [name for name, _, _ in nest.loops[:count]]
    present = [name for name in lhs_names if letters[name] in used]
    scale = product.coefficient
    for name, start, stop in nest.reduction_loops:
        if letters[name] not in used:
            scale *= stop - start  # a summed variable no factor reads: its sum is a count
    equation = ",".join(subscripts) + "->" + "".join(letters[name] for name in present) if operands else ""
    shape = tuple(stop - start for _, start, stop in nest.loops[:count])
    expanded = tuple(shape[i] if name in present else 1 for i, name in enumerate(lhs_names))
    dtype = dtypes.storage_dtype(nest.target.dtype)
    return EinsumPlan(target, dtype, region, loops, operands, equation, scale, expanded, shape)


def _paddings(guard, factors, loops) -> list | None:
    """Zero padding per factor that makes ``guard`` redundant in a product, or None if none does.

    That holds when every test of the guard says that some factor's subscript lies in
    its dimension (``p0 - r >= 0``, ``p0 - r < 5`` for ``dO[n, k, p0 - r, q0 - s]``):
    where a test fails, that factor reads a padded zero and the product is zero.  Only
    the values differ where another factor is infinite or NaN (0 * inf), the same
    caveat as any zero-padded convolution.
    """
    env = {name: (start, stop - 1) for name, (start, stop) in loops.items()}
    for test in guard:
        if not (isinstance(test, Compare) and test.op in ("ge", "lt") and isinstance(test.rhs, Const)):
            return None
        wanted = 0 if test.op == "ge" else None
        if not any(
            index == test.lhs and int(test.rhs.value) == (extent if wanted is None else wanted)
            for access in factors
            for index, extent in zip(access.indices, access.tensor.shape)
        ):
            return None
    paddings = []
    for access in factors:
        pads = []
        for index, extent in zip(access.indices, access.tensor.shape):
            low, high = bounds(index, env) or (0, extent - 1)
            pads.append((max(0, -low), max(0, high - extent + 1)))
        paddings.append(tuple(pads) if any(before or after for before, after in pads) else None)
    return paddings


def _operand(access: Indexing, loops, padding=None) -> Operand:
    if padding is not None:  # read a zero-padded copy, every subscript shifted by its padding
        shifted = tuple(
            make.add(index, before) if before else index for index, (before, _) in zip(access.indices, padding)
        )
        involved = tuple(name for name in loops if any(name in variable_names(i) for i in access.indices))
        return Operand(access.tensor.name, involved, gather=shifted, padding=padding)
    slices, labels, windows, window_labels = [], [], [], []
    for axis, index in enumerate(access.indices):
        form = affine(index)
        names = [n for n in (form or {}) if n is not None]
        if form is None or any(form[n] <= 0 for n in names) or len(names) > 2:
            break
        constant = form.get(None, 0)
        if not names:
            slices.append(constant)
            continue
        # a*u + v + c: a sliding window of v's extent along this axis, u picks windows
        inner = names[-1] if len(names) == 2 and form[names[-1]] == 1 else None
        if len(names) == 2 and inner is None:
            inner = names[0] if form[names[0]] == 1 else None
        if len(names) == 2 and inner is None:
            break
        outer = names[0] if inner != names[0] else names[-1]
        a = form[outer]
        start, stop = loops[outer]
        slices.append(slice(a * start + constant, a * (stop - 1) + constant + 1, a))
        labels.append(outer)
        if len(names) == 2:
            inner_start, inner_stop = loops[inner]
            windows.append((axis, inner_stop))
            window_labels.append((inner, slice(inner_start, inner_stop)))
    else:
        slices += [window_slice for _, window_slice in window_labels]
        labels += [name for name, _ in window_labels]
        return Operand(access.tensor.name, tuple(labels), slices=tuple(slices), windows=tuple(windows))
    involved = tuple(name for name in loops if any(name in variable_names(i) for i in access.indices))
    return Operand(access.tensor.name, involved, gather=access.indices)


# --- running plans ------------------------------------------------------------------------


# A grid holds one value per point of the iteration space; past this many points it is
# computed in slabs along the first left-hand loop (whose slabs write disjoint regions).
GRID_POINTS = 1 << 22


def working_points(step: EinsumPlan | GridPlan) -> int:
    """Elements of the largest temporary array a plan makes (a slab's grid, a gathered or padded operand)."""
    if isinstance(step, GridPlan):
        return max(_points(slab.loops) for slab in _slabs(step)[:1])  # the first slab is the largest
    largest = math.prod(step.shape)
    for operand in step.operands:
        if operand.slices is None:
            largest = max(largest, _points((name, *step.loops[name]) for name in operand.labels))
    return largest


def _points(loops) -> int:
    return math.prod(stop - start for _, start, stop in loops)


def run_plan(step, backend, arrays: dict, out) -> None:
    if step is None:
        return
    if isinstance(step, EinsumPlan):
        out[step.region] += _einsum(step, backend, arrays)
        return
    for slab in _slabs(step):
        out[slab.region] += _grid(slab, backend, arrays)


def _slabs(step: GridPlan) -> list[GridPlan]:
    points = _points(step.loops)
    if points <= GRID_POINTS or not step.region:
        return [step]
    name, start, stop = step.loops[0]
    rows = max(1, GRID_POINTS // (points // (stop - start)))
    slabs = []
    for low in range(start, stop, rows):
        high = min(stop, low + rows)
        loops = ((name, low, high), *step.loops[1:])
        slabs.append(replace(step, loops=loops, region=(slice(low, high), *step.region[1:])))
    return slabs


def _einsum(step: EinsumPlan, backend, arrays: dict):
    xp = backend.xp
    operands = []
    for operand in step.operands:
        array = arrays[operand.tensor]
        if operand.padding is not None:
            array = backend.pad(array, operand.padding)
        if operand.slices is not None:
            if operand.windows:
                array = backend.sliding_window(array, [n for _, n in operand.windows], [a for a, _ in operand.windows])
            operands.append(array[operand.slices])
        else:
            env = {n: _arange(xp, step.loops[n], axis, len(operand.labels)) for axis, n in enumerate(operand.labels)}
            operands.append(array[tuple(_evaluate(i, env, xp, arrays, False) for i in operand.gather)])
    dtype = getattr(xp, step.dtype)
    inputs, output = step.equation.split("->") if operands else ("", "-")  # no operands: a constant
    if inputs == output:
        result = operands[0]  # a copy with slices: no einsum needed
    else:
        result = backend.einsum(step.equation, *operands) if operands else xp.asarray(1.0, dtype=dtype)
    if step.scale != 1.0:
        result = result * xp.asarray(step.scale, dtype=dtype)
    return xp.broadcast_to(xp.reshape(result, step.expanded), step.shape)


def _grid(step: GridPlan, backend, arrays: dict):
    xp = backend.xp
    count = len(step.loops)
    env = {name: _arange(xp, (start, stop), axis, count) for axis, (name, start, stop) in enumerate(step.loops)}
    shape = tuple(stop - start for _, start, stop in step.loops)
    guarded = bool(step.guard)
    value = xp.broadcast_to(xp.asarray(_evaluate(step.value, env, xp, arrays, guarded)), shape)
    if guarded:
        mask = None
        for test in step.guard:
            passed = _evaluate(test, env, xp, arrays, guarded)
            mask = passed if mask is None else xp.logical_and(mask, passed)
        value = xp.where(mask, value, xp.zeros((), dtype=value.dtype))
    return xp.sum(value, axis=step.reduced) if step.reduced else value


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


def variable_names(expr: IRExpr) -> set[str]:
    if isinstance(expr, Var):
        return {expr.name}
    return set().union(*(variable_names(c) for c in expr.children())) if expr.children() else set()
