"""Reducers: how Reduce, ReduceWindow, Scatter and SelectAndScatter combine values.

A reducer is a param that is either a name (``add``, ``mul``, ``max``, ``min``, ``and``,
``or``: one binary op, run as the backend's array reductions) or a sub-graph: a Model
taking ``(accumulators..., elements...)`` and returning the new accumulators, applied to
whole arrays element by element.  A sub-graph reduction folds the reduced elements
pairwise, halving their count each round (log2(K) calls for K elements); the earlier
element is always the accumulator, which reducers that break ties by position rely on.

On bool values ``add`` is ``or`` and ``mul`` is ``and``; on integers ``and``/``or`` are
bitwise.  float16 sums and products accumulate in float32 (as PyTorch does) and round once.

A *sequential* reduction instead folds the reduced elements one after another, in row-major
order from the init value, each step's result in the operand's dtype: a float16, bfloat16 or
float8 sum then rounds at every step, as XLA's CPU backend sums (``2048 + 1 + 1`` is 2048 in
float16). It costs one reducer call per reduced element (of the whole kept shape each).
"""

from __future__ import annotations

from ..ir import dtypes

NAMED = ("add", "mul", "max", "min", "and", "or")


def combine(xp, name: str, a, b):
    """``a <name> b`` elementwise."""
    if name in ("add", "mul") and a.dtype == xp.bool:
        name = "or" if name == "add" else "and"
    if name == "add":
        return a + b
    if name == "mul":
        return a * b
    if name == "max":
        return xp.maximum(a, b)
    if name == "min":
        return xp.minimum(a, b)
    if name == "and":
        return (a & b) if a.dtype != xp.bool else xp.logical_and(a, b)
    return (a | b) if a.dtype != xp.bool else xp.logical_or(a, b)


def identity(xp, name: str, dtype):
    """The value that reducer ``name`` leaves any other value unchanged with, in ``dtype``."""
    if dtype == xp.bool:
        return xp.asarray(name in ("mul", "and", "min"))
    if name in ("add", "or"):
        value = 0
    elif name == "mul":
        value = 1
    elif dtypes.isdtype(xp, dtype, "real floating"):
        value = {"max": -float("inf"), "min": float("inf")}.get(name, float("nan"))
        if name in ("max", "min") and bool(xp.isnan(xp.asarray(value, dtype=dtype))):
            # float8_e4m3fn and the other types without infinities: their largest finite value bounds them
            value = float(dtypes.float_info(dtype).max) * (1 if name == "min" else -1)
    else:
        info = xp.iinfo(dtype)
        value = {"max": info.min, "min": info.max, "and": -1 if info.min < 0 else info.max}[name]
    return xp.asarray(value, dtype=dtype)


def accumulation_dtype(xp, dtype):
    """float16 sums and products run in float32 (rounding each partial result to float16 drifts)."""
    return xp.float32 if dtypes.name_of(dtype) == "float16" else dtype  # (the standard has no float16)


def reduce_named(xp, name: str, x, axes: tuple[int, ...], init):
    """``init <name> x[...]`` over ``axes`` (each reduced element once), in ``x``'s dtype."""
    kept = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    if any(x.shape[a] == 0 for a in axes):
        return xp.broadcast_to(xp.asarray(init, dtype=x.dtype), kept)
    wide = accumulation_dtype(xp, x.dtype)
    if x.dtype == xp.bool and name in ("add", "or"):
        reduced = xp.any(x, axis=axes)
    elif x.dtype == xp.bool and name in ("mul", "and"):
        reduced = xp.all(x, axis=axes)
    elif name == "add":
        reduced = xp.sum(x, axis=axes, dtype=wide)
    elif name == "mul":
        reduced = xp.prod(x, axis=axes, dtype=wide)
    elif name == "max":
        reduced = xp.max(x, axis=axes)
    elif name == "min":
        reduced = xp.min(x, axis=axes)
    else:  # bitwise and/or of integers: no array reduction, fold instead
        moved = xp.reshape(xp.permute_dims(x, (*[i for i in range(x.ndim) if i not in axes], *axes)), (*kept, -1))
        (reduced,) = fold_last_axis(xp, lambda a, b: [combine(xp, name, a, b)], [moved], None)
    reduced = xp.asarray(reduced)
    result = combine(xp, name, reduced, xp.astype(xp.asarray(init), reduced.dtype, copy=False))
    if tuple(result.shape) != kept:
        result = xp.broadcast_to(result, kept)
    # An array, never a NumPy scalar (what a ufunc of 0-d arrays gives): the next op's fast paths take arrays.
    return xp.asarray(xp.astype(result, x.dtype, copy=False))


def fold_in_order(xp, reducer, arrays: list, inits: list, valid=None) -> list:
    """Fold the last axis of every array from ``inits``, one element after another, in the arrays' dtypes.

    ``valid`` (bool, the arrays' shape) marks the elements that take part; the others are skipped.
    """
    accumulators = [xp.broadcast_to(xp.astype(xp.asarray(init), a.dtype, copy=False), a.shape[:-1])
                    for a, init in zip(arrays, inits)]
    for k in range(arrays[0].shape[-1]):
        folded = reducer(*accumulators, *[a[..., k] for a in arrays])
        if valid is not None:
            folded = [xp.where(valid[..., k], f, acc) for f, acc in zip(folded, accumulators)]
        accumulators = [xp.astype(xp.asarray(f), a.dtype, copy=False) for f, a in zip(folded, arrays)]
    return accumulators


def fold_last_axis(xp, reducer, arrays: list, inits: list | None, valid=None) -> list:
    """Fold the last axis of every array with ``reducer(*accumulators, *elements) -> list``.

    Starts from ``inits`` (None: from the first element; the axis must then be non-empty).
    ``valid`` (bool, the arrays' shape) marks the elements that take part; the others
    (window padding) are skipped, as if absent.
    """
    count = arrays[0].shape[-1]
    if count == 0:
        return [xp.broadcast_to(init, a.shape[:-1]) for a, init in zip(arrays, inits)]
    while count > 1:
        half = count // 2
        left = [a[..., :half] for a in arrays]
        right = [a[..., half : 2 * half] for a in arrays]
        folded = reducer(*left, *right)
        if valid is not None:
            left_valid, right_valid = valid[..., :half], valid[..., half : 2 * half]
            folded = [xp.where(left_valid & right_valid, f, xp.where(left_valid, a, b))
                      for f, a, b in zip(folded, left, right)]
            folded_valid = left_valid | right_valid
            valid = xp.concat([folded_valid, valid[..., 2 * half :]], axis=-1) if count % 2 else folded_valid
        if count % 2:
            folded = [xp.concat([f, a[..., 2 * half :]], axis=-1) for f, a in zip(folded, arrays)]
        arrays = folded
        count = arrays[0].shape[-1]
    last = [a[..., 0] for a in arrays]
    if inits is None:
        return last
    combined = reducer(*inits, *last)
    if valid is None:
        return combined
    return [xp.where(valid[..., 0], c, init) for c, init in zip(combined, inits)]


class Reducer:
    """The reducer param ``key`` of ``op``: a name, or a sub-graph built by the graph builder."""

    def __init__(self, op, key: str = "reducer", operand_count: int = 1):
        value = op.param(key)
        self.xp = op.xp
        self.name: str | None = None
        self.model = None
        if isinstance(value, str):
            if value not in NAMED:
                raise op.unsupported(key, value, NAMED)
            if operand_count != 1:
                raise op.error(f"{key} '{value}' combines one operand, found {operand_count}")
            self.name = value
        else:
            self.model = op.subgraph(key)

    def __call__(self, *arrays) -> list:
        """The reducer applied elementwise: ``(accumulators..., elements...) -> accumulators``."""
        if self.name is not None:
            return [combine(self.xp, self.name, *arrays)]
        return call_subgraph(self.xp, self.model, arrays)

    def reduce(self, arrays: list, inits: list, axes: tuple[int, ...], valid=None, sequential: bool = False) -> list:
        """Each array reduced over ``axes`` from its init, in its own dtype (the axes dropped).

        ``valid`` (sub-graph reducers only) marks the elements that take part; ``sequential`` folds
        the elements in row-major order, one after another (see the module's docstring).
        """
        xp = self.xp
        if sequential:
            axes = tuple(sorted(axes))
        if self.name is not None and not sequential:
            (x,) = arrays
            return [reduce_named(xp, self.name, x, axes, inits[0])]
        rank = arrays[0].ndim
        kept = [d for d in range(rank) if d not in axes]
        shape = tuple(arrays[0].shape[d] for d in kept)
        flat = [xp.reshape(xp.permute_dims(a, (*kept, *axes)), (*shape, -1)) for a in arrays]
        if valid is not None:
            valid = xp.reshape(xp.permute_dims(valid, (*kept, *axes)), (*shape, -1))
        fold = fold_in_order if sequential else fold_last_axis
        results = fold(xp, self, flat, inits, valid)
        return [xp.broadcast_to(xp.astype(xp.asarray(r), a.dtype, copy=False), shape) for r, a in zip(results, arrays)]


def operands_and_inits(op) -> int:
    """N, for an op with inputs ``operands..., inits...`` (N each) and N outputs."""
    count = len(op.node.inputs) // 2
    if len(op.node.inputs) % 2 or count == 0 or len(op.node.outputs) != count:
        raise op.error(f"takes N operands and N initial values for N outputs, found "
                       f"{len(op.node.inputs)} input(s) and {len(op.node.outputs)} output(s)")
    return count


def call_subgraph(xp, model, arrays) -> list:
    """A sub-graph applied to whole arrays: its results as a list, each broadcast to the arrays' shape.

    (A computation that returns a constant gives a 0-d result whatever it is fed.)
    """
    result = model(*arrays)
    results = list(result) if len(model.outputs) != 1 else [result]
    shape = tuple(xp.broadcast_arrays(*arrays)[0].shape)
    return [r if tuple(r.shape) == shape else xp.broadcast_to(r, shape) for r in results]


def combine_into(xp, flats: list, targets, updates: list, combine, put) -> None:
    """``flats[i][t] = combine(*[f[t] for f in flats], *updates)[i]`` for every update, in update order.

    ``flats`` are 1-D arrays changed in place.  Several updates of one element are applied
    one after another: round r applies each element's r-th update.  ``put`` is the backend's
    primitive that writes values at index-array positions.
    """
    if targets.shape[0] == 0:
        return
    order = xp.argsort(targets, stable=True)
    ordered = xp.take(targets, order)
    rank = xp.arange(ordered.shape[0]) - xp.searchsorted(ordered, ordered, side="left")
    for round_number in range(int(xp.max(rank)) + 1):
        chosen = order[rank == round_number]
        where = xp.take(targets, chosen)
        results = combine(*[xp.take(f, where) for f in flats], *[xp.take(u, chosen) for u in updates])
        for flat, result in zip(flats, results):
            put(flat, where, result)


def scatter_with(backend, reducer: Reducer | None, flats: list, targets, updates: list) -> None:
    """Combine ``updates`` into ``flats`` at ``targets`` in order; ``reducer`` None overwrites.

    An ``add`` of numbers uses the backend's scatter-add (one unbuffered pass).
    """
    xp = backend.xp
    if reducer is None:
        combine_into(xp, flats, targets, updates, lambda *arrays: arrays[len(flats):], backend.put)
    elif reducer.name == "add" and flats[0].dtype != xp.bool:
        backend.scatter_add(flats[0], targets, xp.astype(updates[0], flats[0].dtype))
    else:
        combine_into(xp, flats, targets, updates, reducer, backend.put)
