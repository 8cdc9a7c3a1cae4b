"""HLO reductions: reduce, reduce-window, select-and-scatter, and map.

A reducer that is one binary op of its two parameters (add, multiply, maximum, minimum,
and, or) becomes an array reduction.  Any other reducer (argmax's variadic pairs, ...) is
built once as a sub-Model and applied to whole arrays: the reduced elements are folded
pairwise, halving the count each round, so a reduction of K elements makes log2(K) calls
and keeps left-to-right order (which tie-breaking reducers rely on).
"""

from __future__ import annotations

from .ops_base import HloOp, binary_root_opcode
from .ops_gather import combine_into
from .ops_linalg import parse_window

SIMPLE_REDUCERS = ("add", "multiply", "maximum", "minimum", "and", "or")


def simple_reduce(xp, opcode: str, x, axes: tuple[int, ...]):
    """Reduce ``x`` over ``axes`` with a binary op; no empty axes."""
    if opcode == "add":
        return xp.any(x, axis=axes) if x.dtype.kind == "b" else xp.sum(x, axis=axes, dtype=x.dtype)
    if opcode == "multiply":
        return xp.all(x, axis=axes) if x.dtype.kind == "b" else xp.prod(x, axis=axes, dtype=x.dtype)
    if opcode == "maximum":
        return xp.max(x, axis=axes)
    if opcode == "minimum":
        return xp.min(x, axis=axes)
    if opcode == "and":
        return xp.all(x, axis=axes)
    return xp.any(x, axis=axes)


def combine(xp, opcode: str, a, b):
    if opcode == "add":
        return (a | b) if a.dtype.kind == "b" else a + b
    if opcode == "multiply":
        return (a & b) if a.dtype.kind == "b" else a * b
    if opcode == "maximum":
        return xp.maximum(a, b)
    if opcode == "minimum":
        return xp.minimum(a, b)
    return (a & b) if opcode == "and" else (a | b)


def fold_last_axis(xp, reducer, arrays: list, inits: list) -> list:
    """Fold the last axis of every array with ``reducer(*accumulators, *elements)``, starting from ``inits``."""
    count = arrays[0].shape[-1]
    if count == 0:
        return [xp.broadcast_to(init, a.shape[:-1]) for a, init in zip(arrays, inits)]
    while count > 1:
        half = count // 2
        left = [a[..., :half] for a in arrays]
        right = [a[..., half : 2 * half] for a in arrays]
        folded = reducer(*left, *right)
        if count % 2:
            folded = [xp.concat([f, a[..., 2 * half :]], axis=-1) for f, a in zip(folded, arrays)]
        arrays = folded
        count = arrays[0].shape[-1]
    return reducer(*inits, *[a[..., 0] for a in arrays])


def _is_simple(op: HloOp, operand_count: int) -> str | None:
    opcode = binary_root_opcode(op.called("to_apply"))
    if operand_count != 1 or opcode not in SIMPLE_REDUCERS:
        return None
    if opcode in ("and", "or") and op.operand_shape(0).element_type != "pred":
        return None  # bitwise and/or of integers: no array reduction, take the general path
    return opcode


class Reduce(HloOp):
    types = ("hlo.reduce",)

    def hlo_setup(self):
        self.count = len(self.instruction.operands) // 2
        self.axes = self.ints("dimensions")
        self.simple = _is_simple(self, self.count)
        self.reducer = None if self.simple else self.sub_model(self.called("to_apply"), vectorized=True)
        self.dtypes = [self.dtype(leaf) for leaf in self.shape.leaves()]

    def forward(self, *inputs):
        xp = self.xp
        arrays, inits = list(inputs[: self.count]), list(inputs[self.count :])
        if self.simple:
            x = arrays[0]
            if any(x.shape[a] == 0 for a in self.axes):
                result = xp.broadcast_to(inits[0], tuple(d for i, d in enumerate(x.shape) if i not in self.axes))
            else:
                result = combine(xp, self.simple, simple_reduce(xp, self.simple, x, self.axes), inits[0])
            return xp.asarray(result).astype(self.dtypes[0])
        kept = [d for d in range(arrays[0].ndim) if d not in self.axes]
        flat = []
        for a in arrays:
            moved = xp.permute_dims(a, (*kept, *self.axes))
            flat.append(xp.reshape(moved, (*moved.shape[: len(kept)], -1)))
        results = fold_last_axis(xp, self.reducer, flat, inits)
        results = [xp.asarray(r).astype(d) for r, d in zip(results, self.dtypes)]
        shape = tuple(arrays[0].shape[d] for d in kept)
        results = [xp.broadcast_to(r, shape) if r.shape != shape else r for r in results]
        return results[0] if self.count == 1 else tuple(results)


def _dilate_with(xp, x, factors, value):
    if all(f == 1 for f in factors):
        return x
    shape = tuple((d - 1) * f + 1 if d else 0 for d, f in zip(x.shape, factors))
    result = xp.full(shape, value, dtype=x.dtype)
    result[tuple(slice(None, None, f) for f in factors)] = x
    return result


def _pad_with(xp, x, pads, value):
    """Pad with ``value`` (positive amounts) and crop (negative amounts)."""
    grown = tuple(d + max(lo, 0) + max(hi, 0) for d, (lo, hi) in zip(x.shape, pads))
    if grown != x.shape:
        result = xp.full(grown, value, dtype=x.dtype)
        result[tuple(slice(max(lo, 0), max(lo, 0) + d) for d, (lo, _) in zip(x.shape, pads))] = x
        x = result
    return x[tuple(slice(max(-lo, 0), d - max(-hi, 0)) for d, (lo, hi) in zip(x.shape, pads))]


def windows_of(op: HloOp, x, window: dict, fill):
    """Every window of ``x`` as trailing axes: shape (out dims..., window dims...)."""
    xp = op.xp
    x = _dilate_with(xp, x, window["lhs_dilate"], fill)
    x = _pad_with(xp, x, window["pad"], fill)
    dilation = window["rhs_dilate"]
    extent = [(k - 1) * d + 1 for k, d in zip(window["size"], dilation)]
    views = op.backend.sliding_window(x, extent, list(range(x.ndim)))
    rank = x.ndim
    index = tuple(slice(None, None, s) for s in window["stride"]) + tuple(slice(None, None, d) for d in dilation)
    return views[index], rank


class ReduceWindow(HloOp):
    types = ("hlo.reduce-window",)

    def hlo_setup(self):
        self.count = len(self.instruction.operands) // 2
        self.window = parse_window(self, self.operand_shape(0).rank)
        self.simple = _is_simple(self, self.count)
        self.reducer = None if self.simple else self.sub_model(self.called("to_apply"), vectorized=True)
        self.dtypes = [self.dtype(leaf) for leaf in self.shape.leaves()]
        window, dims = self.window, self.operand_shape(0).dims
        # Windows that tile the operand exactly (pooling): a reshape gives them as axes, no copy.
        self.tiles = bool(self.simple) and all(
            size == stride and dim % size == 0 and pad == (0, 0) and base == 1 and dilation == 1
            for size, stride, pad, base, dilation, dim in zip(
                window["size"], window["stride"], window["pad"], window["lhs_dilate"], window["rhs_dilate"], dims
            )
        )

    def forward(self, *inputs):
        xp = self.xp
        arrays, inits = list(inputs[: self.count]), list(inputs[self.count :])
        if self.tiles:
            x, sizes = arrays[0], self.window["size"]
            split = [part for dim, size in zip(x.shape, sizes) for part in (dim // size, size)]
            x = xp.reshape(x, tuple(split))
            # Combine the few elements of each window slice by slice: elementwise ops on strided
            # views are much faster than NumPy's reductions over many tiny axes.
            for axis in reversed(range(1, len(split), 2)):
                lead = (slice(None),) * axis
                folded = x[(*lead, 0)]
                for offset in range(1, split[axis]):
                    folded = combine(xp, self.simple, folded, x[(*lead, offset)])
                x = folded
            return xp.asarray(combine(xp, self.simple, x, inits[0])).astype(self.dtypes[0])
        windowed = []
        for a, init in zip(arrays, inits):
            views, rank = windows_of(self, a, self.window, init)
            windowed.append(views)
        if self.simple:
            axes = tuple(range(rank, 2 * rank))
            result = combine(xp, self.simple, simple_reduce(xp, self.simple, windowed[0], axes), inits[0])
            return xp.asarray(result).astype(self.dtypes[0])
        flat = [xp.reshape(w, (*w.shape[:rank], -1)) for w in windowed]
        results = fold_last_axis(xp, self.reducer, flat, inits)
        results = [xp.asarray(r).astype(d) for r, d in zip(results, self.dtypes)]
        return results[0] if self.count == 1 else tuple(results)


class SelectAndScatter(HloOp):
    """Pick one element per window of the operand with ``select``; scatter ``source`` there with ``scatter``."""

    types = ("hlo.select-and-scatter",)
    fresh_output = True

    def hlo_setup(self):
        self.window = parse_window(self, self.operand_shape(0).rank)
        self.select = self.sub_model(self.called("select"), vectorized=True)
        scatter = self.called("scatter")
        self.scatter_opcode = binary_root_opcode(scatter)
        self.scatter = None if self.scatter_opcode in SIMPLE_REDUCERS else self.sub_model(scatter, vectorized=True)

    def forward(self, operand, source, init):
        xp = self.xp
        positions = xp.reshape(xp.arange(operand.size), operand.shape)
        value_windows, rank = windows_of(self, operand, self.window, xp.zeros((), dtype=operand.dtype))
        position_windows, _ = windows_of(self, positions, self.window, xp.asarray(-1, dtype=positions.dtype))
        values = xp.reshape(value_windows, (*value_windows.shape[:rank], -1))
        places = xp.reshape(position_windows, (*position_windows.shape[:rank], -1))
        chosen_value, chosen_place = values[..., 0], places[..., 0]
        for k in range(1, values.shape[-1]):
            candidate, place = values[..., k], places[..., k]
            (keep,) = self.select(chosen_value, candidate)
            take = (chosen_place < 0) | ((place >= 0) & ~xp.asarray(keep, dtype=xp.bool))
            chosen_value = xp.where(take, candidate, chosen_value)
            chosen_place = xp.where(take, place, chosen_place)
        result = xp.full((operand.size,), init, dtype=source.dtype)
        targets = xp.reshape(chosen_place, (-1,))
        updates = xp.reshape(source, (-1,))
        valid = targets >= 0
        if self.scatter is None:
            opcode = self.scatter_opcode
            combine_into(xp, [result], targets[valid], [updates[valid]], lambda a, b: [combine(xp, opcode, a, b)])
        else:
            combine_into(xp, [result], targets[valid], [updates[valid]], lambda a, b: self.scatter(a, b))
        return xp.reshape(result, operand.shape)


class Map(HloOp):
    types = ("hlo.map",)

    def hlo_setup(self):
        self.function = self.sub_model(self.called("to_apply"), vectorized=True)

    def forward(self, *inputs):
        (result,) = self.function(*inputs)
        return self.xp.broadcast_to(self.xp.asarray(result).astype(self.dtype()), self.result.dims)


OPS = [Reduce, ReduceWindow, SelectAndScatter, Map]
