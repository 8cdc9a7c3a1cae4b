"""Windowed reductions: ReduceWindow and SelectAndScatter, with a named or sub-graph reducer.

Window params, one value per operand dim: ``window`` (sizes), ``strides``, ``padding``
(``[low, high]`` pairs; negative crops), ``base_dilation`` (holes between operand elements)
and ``window_dilation`` (holes between window taps).  Taps that fall into padding or holes
take no part (XLA's rule): a named reducer sees its identity there, a sub-graph reducer
skips them.  A window that does not fit gives an empty output dim.
"""

from __future__ import annotations

from ..ir import dtypes
from ..limits import check_size
from .base import Op
from .params import Bool, Ints
from .reducers import Reducer, combine, identity, operands_and_inits, scatter_with


class Windowed(Op):
    """Reads the window params: one value per operand dim, as many as ``window`` has."""

    params = (
        Ints("window", low=1), Ints("strides", default=1, length="window", low=1),
        Ints("base_dilation", default=1, length="window", low=1),
        Ints("window_dilation", default=1, length="window", low=1),
    )

    def read_padding(self) -> None:
        rank = len(self.window)
        padding = self.param("padding", [[0, 0]] * rank)
        if not isinstance(padding, (list, tuple)) or len(padding) != rank or not all(
            isinstance(p, (list, tuple)) and len(p) == 2 and all(isinstance(v, int) for v in p) for p in padding
        ):
            raise self.error(f"param 'padding' must be {rank} [low, high] pairs, found {padding!r}")
        self.padding = tuple((low, high) for low, high in padding)

    def windows(self, x, fill):
        """Every window of ``x`` as trailing axes: shape (output dims..., window dims...)."""
        xp = self.xp
        rank = x.ndim
        itemsize, what = dtypes.itemsize(x.dtype), self.node.describe()  # every copy is checked against the budget first
        if any(f != 1 for f in self.base_dilation):
            shape = tuple((d - 1) * f + 1 if d else 0 for d, f in zip(x.shape, self.base_dilation))
            check_size(shape, itemsize, what)
            dilated = _full(xp, shape, fill, x.dtype)
            dilated[tuple(slice(None, None, f) for f in self.base_dilation)] = x
            x = dilated
        grown = tuple(d + max(low, 0) + max(high, 0) for d, (low, high) in zip(x.shape, self.padding))
        if grown != tuple(x.shape):
            check_size(grown, itemsize, what)
            padded = _full(xp, grown, fill, x.dtype)
            padded[tuple(slice(max(low, 0), max(low, 0) + d) for d, (low, _) in zip(x.shape, self.padding))] = x
            x = padded
        x = x[tuple(slice(max(-low, 0), max(d - max(-high, 0), max(-low, 0)))
                    for d, (low, high) in zip(x.shape, self.padding))]
        extent = [(k - 1) * d + 1 for k, d in zip(self.window, self.window_dilation)]
        if any(e > d for e, d in zip(extent, x.shape)):  # no window fits: an empty output
            out = tuple(max(0, (d - e) // s + 1) if d >= e else 0 for d, e, s in zip(x.shape, extent, self.strides))
            check_size((*out, *self.window), itemsize, what)
            return xp.zeros((*out, *self.window), dtype=x.dtype)
        views = self.backend.sliding_window(x, extent, list(range(rank)))
        index = tuple(slice(None, None, s) for s in self.strides) + tuple(slice(None, None, d)
                                                                          for d in self.window_dilation)
        return views[index]


class ReduceWindow(Windowed):
    """Inputs ``operands..., inits...``: each window of the operands reduced to one element.

    ``sequential``: each window folds its elements one after another, each step in the operand's
    dtype (kuiper/ops/reducers.py).
    """

    types = ("ReduceWindow",)
    params = (*Windowed.params, Bool("sequential", default=False))

    def setup(self):
        self.count = operands_and_inits(self)
        self.read_padding()
        self.reducer = Reducer(self, "reducer", self.count)
        self.padded = any(p != (0, 0) for p in self.padding) or set(self.base_dilation) != {1}
        # Windows that tile the operand exactly (pooling): a reshape gives them as axes, no copy.
        self.tiles = self.reducer.name is not None and not self.sequential and self.window == self.strides and all(
            pad == (0, 0) for pad in self.padding) and set(self.base_dilation) | set(self.window_dilation) == {1}

    def forward(self, *inputs):
        xp = self.xp
        arrays, inits = list(inputs[: self.count]), list(inputs[self.count :])
        rank = arrays[0].ndim
        if rank != len(self.window):
            raise self.error(f"has a {len(self.window)}-dim window for a rank-{rank} operand")
        if self.tiles and all(d % k == 0 for d, k in zip(arrays[0].shape, self.window)):
            return self.reduce_tiles(arrays[0], inits[0])
        axes = tuple(range(rank, 2 * rank))
        if self.reducer.name is not None:
            x = arrays[0]
            windowed = self.windows(x, identity(xp, self.reducer.name, x.dtype))
            return self.reducer.reduce([windowed], inits, axes, sequential=self.sequential)[0]
        windowed = [self.windows(a, xp.zeros((), dtype=a.dtype)) for a in arrays]
        valid = None
        if self.padded:
            valid = self.windows(xp.ones(arrays[0].shape, dtype=xp.bool), xp.asarray(False))
        results = self.reducer.reduce(windowed, inits, axes, valid, sequential=self.sequential)
        return results[0] if self.count == 1 else tuple(results)

    def reduce_tiles(self, x, init):
        """Windows that tile ``x``: combine the few elements of each window slice by slice
        (elementwise ops on strided views beat reductions over many tiny axes)."""
        xp, name = self.xp, self.reducer.name
        dtype = x.dtype
        if dtype == xp.float16 and name in ("add", "mul"):
            x = xp.astype(x, xp.float32)  # accumulate float16 in float32, as in reduce_named
        split = [part for dim, size in zip(x.shape, self.window) for part in (dim // size, size)]
        x = xp.reshape(x, tuple(split))
        # A max or min gives the same bits in any order: the outer window axes first, so the larger early
        # passes read whole rows (a 2x2 max pool of 8 x 32 x 28 x 28: 154 -> 93 us); sums keep the order
        # they were always folded in.
        window_axes = list(range(1, len(split), 2))
        if name in ("max", "min"):  # each folded axis leaves: the later ones move one place in
            window_axes = [axis - done for done, axis in enumerate(window_axes)]
        else:
            window_axes.reverse()
        for axis in window_axes:
            lead = (slice(None),) * axis
            folded = x[(*lead, 0)]
            for offset in range(1, x.shape[axis]):
                folded = combine(xp, name, folded, x[(*lead, offset)])
            x = folded
        return xp.astype(combine(xp, name, x, xp.astype(xp.asarray(init), x.dtype)), dtype, copy=False)


class SelectAndScatter(Windowed):
    """Inputs ``operand, source, init``: in each window of the operand, ``select`` picks one
    element (``select(a, b)`` true keeps the earlier ``a``); each ``source`` element is combined
    into the result at its window's pick with ``scatter``, starting from ``init`` everywhere."""

    types = ("SelectAndScatter",)
    fresh_output = True
    arity = 3

    def setup(self):
        self.read_padding()
        if set(self.base_dilation) | set(self.window_dilation) != {1}:
            raise self.error("select-and-scatter windows have no dilation")
        self.select = self.subgraph("select")
        self.scatter = Reducer(self, "scatter")

    def forward(self, operand, source, init):
        xp = self.xp
        rank = operand.ndim
        positions = xp.reshape(xp.arange(operand.size), operand.shape)
        value_windows = self.windows(operand, xp.zeros((), dtype=operand.dtype))
        position_windows = self.windows(positions, xp.asarray(-1, dtype=positions.dtype))
        values = xp.reshape(value_windows, (*value_windows.shape[:rank], -1))
        places = xp.reshape(position_windows, (*position_windows.shape[:rank], -1))
        chosen_value, chosen_place = values[..., 0], places[..., 0]
        for k in range(1, values.shape[-1]):
            candidate, place = values[..., k], places[..., k]
            keep = self.select(chosen_value, candidate)
            take = (chosen_place < 0) | ((place >= 0) & ~xp.astype(xp.asarray(keep), xp.bool))
            chosen_value = xp.where(take, candidate, chosen_value)
            chosen_place = xp.where(take, place, chosen_place)
        result = _full(xp, (operand.size,), init, source.dtype)
        targets = xp.reshape(chosen_place, (-1,))
        updates = xp.reshape(source, (-1,))
        valid = targets >= 0
        scatter_with(self.backend, self.scatter, [result], targets[valid], [updates[valid]])
        return xp.reshape(result, operand.shape)


OPS = [ReduceWindow, SelectAndScatter]


def _full(xp, shape, fill, dtype):
    """``xp.full`` for a fill that may be a 0-d array (the standard's full takes a Python scalar)."""
    if hasattr(fill, "shape"):
        return xp.asarray(xp.broadcast_to(xp.astype(fill, dtype), tuple(shape)), copy=True)
    return xp.full(tuple(shape), fill, dtype=dtype)
