"""Canonical data movement with explicit dimension numbers: Broadcast, Slice, Pad, DynamicSlice,
DynamicUpdateSlice, Iota.

These are the frontend-neutral forms (every dim spelled out, no negative axes, no
PyTorch defaults) that a frontend translates into; the PNNX ops of the same family
(``Tensor.expand``, ``Tensor.slice``, ``F.pad``) keep PyTorch's conventions. Reshape,
Transpose, Reverse, Concat, Identity and Constant are served by the existing classes
in shape.py, concat.py and io.py under those canonical types.
"""

from __future__ import annotations

from typing import Callable

from ..errors import ShapeError
from ..ir import dtypes
from ..limits import check_size
from .base import Op
from .params import DType, Float, Int, Ints
from .specialize import same_shape


def _clamped_start(index, size: int, dim: int) -> int:
    """A run-time start index clamped into [0, dim - size] (out-of-range starts never fail)."""
    return min(max(int(index), 0), dim - size)


class Broadcast(Op):
    """Operand dim i becomes result dim ``dims[i]`` (increasing); the other dims of ``shape`` repeat it."""

    types = ("Broadcast",)
    arity = 1
    params = (Ints("shape", low=0), Ints("dims", default=(), low=0))

    def setup(self):
        if len(set(self.dims)) != len(self.dims) or any(d >= len(self.shape) for d in self.dims):
            raise self.error(f"param 'dims' {list(self.dims)} does not fit the result shape {list(self.shape)}")
        # Operand dims in the order of the result dims they map to.
        self.order = tuple(sorted(range(len(self.dims)), key=lambda i: self.dims[i]))
        self.target = sorted(self.dims)

    def forward(self, x):
        xp = self.xp
        if x.ndim != len(self.dims):
            raise ShapeError(f"{self.node.describe()}: expected an input of rank {len(self.dims)}, found {x.ndim}")
        if self.order != tuple(range(len(self.order))):
            x = xp.permute_dims(x, self.order)
        return xp.broadcast_to(xp.reshape(x, self._expanded(x.shape)), self.shape)

    def _expanded(self, shape) -> tuple[int, ...]:
        """The operand's ``shape`` (in result-dim order) with 1s at the result dims it does not map to."""
        expanded = [1] * len(self.shape)
        for axis, position in enumerate(self.target):
            expanded[position] = shape[axis]
        return tuple(expanded)

    def specialized(self, inputs):
        """The operand reshaped and broadcast as its first call worked out, while its shape stays
        (a dims order that permutes keeps ``forward``)."""
        x = inputs[0]
        if (getattr(x, "ndim", -1) != len(self.dims) or self.order != tuple(range(len(self.order)))
                or not hasattr(x, "reshape")):  # (an array-API namespace's array may have no reshape method)
            return None
        expanded = self._expanded(x.shape)
        broadcast = self.backend.broadcaster(x.reshape(expanded), self.shape)
        return same_shape(x, lambda value: broadcast(value.reshape(expanded)), self.forward)


class Slice(Op):
    """``x[start:limit:stride]`` along every dim (starts and limits within the dims)."""

    types = ("Slice",)
    arity = 1
    params = (Ints("starts"), Ints("limits", length="starts"), Ints("strides", default=1, length="starts", low=1))

    def setup(self):
        self.index = tuple(slice(b, e, s) for b, e, s in zip(self.starts, self.limits, self.strides))

    def forward(self, x):
        if x.ndim != len(self.index) or any(not 0 <= b <= e <= d for b, e, d in zip(self.starts, self.limits, x.shape)):
            raise ShapeError(f"{self.node.describe()}: slice {self.starts}:{self.limits} does not fit input "
                             f"{tuple(x.shape)}")
        return x[self.index]

    def specialized(self, inputs):
        """The same index, while the input keeps the shape it fitted."""
        x = inputs[0]
        if getattr(x, "ndim", -1) != len(self.index):
            return None
        return same_shape(x, lambda value, index=self.index: value[index], self.forward)


class Pad(Op):
    """Pad with a value: ``low``/``high`` per dim (negative amounts crop), ``interior`` between neighbours.

    The value is the second input (a scalar), or the param ``value`` when there is one input.
    """

    types = ("Pad",)
    fresh_output = True
    params = (Ints("low"), Ints("high", length="low"), Ints("interior", default=0, length="low", low=0),
              Float("value", default=0.0))

    def setup(self):
        self.require_inputs(1, 2)

    def forward(self, x, value=None):
        xp = self.xp
        if x.ndim != len(self.low):
            raise ShapeError(f"{self.node.describe()}: expected an input of rank {len(self.low)}, found {x.ndim}")
        grown, place, keep = [], [], []
        for size, low, high, interior in zip(x.shape, self.low, self.high, self.interior):
            dilated = size + max(size - 1, 0) * interior
            before, after = max(low, 0), max(high, 0)
            total = before + dilated + after
            if dilated + low + high < 0:
                raise ShapeError(f"{self.node.describe()}: padding {low}, {high} crops more than dim of size {size}")
            grown.append(total)
            place.append(slice(before, before + dilated, interior + 1))
            keep.append(slice(max(-low, 0), total - max(-high, 0)))
        check_size(tuple(grown), dtypes.itemsize(x.dtype), self.node.describe())
        fill = self.value if value is None else value
        if hasattr(fill, "shape"):  # a 0-d array: the standard's full takes a Python scalar
            result = xp.asarray(xp.broadcast_to(xp.astype(fill, x.dtype), tuple(grown)), copy=True)
        else:
            result = xp.full(tuple(grown), fill, dtype=x.dtype)
        result[tuple(place)] = x
        return result[tuple(keep)]


def _scalar_starts(x, starts) -> bool:
    """Whether ``starts`` are one 0-d array per dim of array ``x`` (not the older form, one index vector)."""
    return (hasattr(x, "shape") and hasattr(x, "ndim") and len(starts) == x.ndim and x.ndim > 0
            and all(getattr(start, "ndim", None) == 0 for start in starts))


def _writeable(x) -> bool:
    """Whether ``x`` may be written in place: an array whose flags say so (NumPy's; a broadcast view or a
    weight mapped from a file says not), never one of a namespace that does not say."""
    return getattr(getattr(x, "flags", None), "writeable", False) is True


def _clamped(index, limit: int) -> int:
    """``_clamped_start`` with dim - size worked out once: min(max(index, 0), limit)."""
    index = int(index)
    return 0 if index < 0 else (limit if index > limit else index)


def _window(shape, sizes) -> Callable[[tuple], tuple]:
    """``window(starts)``: the slices of the ``sizes`` block of an array of ``shape`` at the clamped 0-d
    ``starts``, one per dim.  A dim the block spans starts at 0 whatever its start says, so its slice is
    made once and its start never read; one varying dim (a scan's ``xs[t]`` and ``ys[t] = y``: a
    Flax LSTM's two) is written out (0.5 us a call of the 1.5-3 the two ops cost in a loop body)."""
    limits = [dim - size for dim, size in zip(shape, sizes)]
    varying = [axis for axis, limit in enumerate(limits) if limit > 0]
    whole = tuple(slice(0, size) for size in sizes)
    if not varying:
        return lambda starts: whole
    if len(varying) == 1:
        (axis,) = varying
        before, after, limit, size = whole[:axis], whole[axis + 1:], limits[axis], sizes[axis]

        def one(starts):
            begin = _clamped(starts[axis], limit)
            return (*before, slice(begin, begin + size), *after)

        return one
    return lambda starts: tuple([slice(b, b + s) for b, s in zip(map(_clamped, starts, limits), sizes)])


def _starts(x, starts) -> list:
    """Start indices as given: one scalar input per dim, or (older form) one index vector."""
    if len(starts) == 1 and getattr(starts[0], "ndim", 0) == 1 and x.ndim != 1:
        return list(starts[0])
    return list(starts)


class DynamicSlice(Op):
    """A ``sizes`` block of the first input at run-time start indices (the other inputs), clamped to fit."""

    types = ("DynamicSlice",)
    params = (Ints("sizes", low=0),)

    def forward(self, x, *starts):
        starts = _starts(x, starts)
        if len(starts) != x.ndim or len(self.sizes) != x.ndim or any(s > d for s, d in zip(self.sizes, x.shape)):
            raise ShapeError(f"{self.node.describe()}: sizes {list(self.sizes)} and {len(starts)} start(s) do not "
                             f"fit input {tuple(x.shape)}")
        begins = [_clamped_start(start, size, dim) for start, size, dim in zip(starts, self.sizes, x.shape)]
        return x[tuple(slice(b, b + s) for b, s in zip(begins, self.sizes))]

    def specialized(self, inputs):
        """For 0-d starts, one per dim (a scan's ``xs[t]``: 4 us -> 1.5 in a loop body): the clamped window
        straight away while the input keeps this call's class and shape."""
        x, *starts = inputs
        if not _scalar_starts(x, starts) or len(self.sizes) != x.ndim or any(s > d for s, d in zip(self.sizes, x.shape)):
            return None
        kind, shape, sizes, forward = type(x), x.shape, self.sizes, self.forward
        window = _window(shape, sizes)

        def direct(x, *starts):
            if x.__class__ is not kind or x.shape != shape or len(starts) != len(sizes):
                return forward(x, *starts)
            return x[window(starts)]

        return direct


class DynamicUpdateSlice(Op):
    """A copy of the first input with the second written at run-time start indices, clamped to fit; the
    first input itself, written in place, where the graph lent it (``donated_inputs``: nobody reads it
    after, as a scan's ``ys`` whose loop owns it) and it is a writeable array."""

    types = ("DynamicUpdateSlice",)
    fresh_output = True

    def forward(self, x, update, *starts):
        starts = _starts(x, starts)
        if len(starts) != x.ndim or update.ndim != x.ndim or any(u > d for u, d in zip(update.shape, x.shape)):
            raise ShapeError(f"{self.node.describe()}: update {tuple(update.shape)} does not fit input "
                             f"{tuple(x.shape)}")
        result = x if 0 in self.donated_inputs and _writeable(x) else self.xp.asarray(x, copy=True)
        begins = [_clamped_start(start, size, dim) for start, size, dim in zip(starts, update.shape, x.shape)]
        result[tuple(slice(b, b + s) for b, s in zip(begins, update.shape))] = update
        return result

    def specialized(self, inputs):
        """For 0-d starts, one per dim (a scan's ``ys[t] = y``: 5.9 us -> 3 in a loop body): the copy and the
        clamped write straight away while the input and update keep this call's classes and shapes."""
        x, update, *starts = inputs
        if not _scalar_starts(x, starts) or getattr(update, "ndim", None) != x.ndim \
                or any(u > d for u, d in zip(update.shape, x.shape)):
            return None
        kind, shape, sizes, forward, asarray = type(x), x.shape, update.shape, self.forward, self.xp.asarray
        update_kind, lent = type(update), 0 in self.donated_inputs
        window = _window(shape, sizes)

        def direct(x, update, *starts):
            if x.__class__ is not kind or update.__class__ is not update_kind or x.shape != shape \
                    or update.shape != sizes or len(starts) != len(sizes):
                return forward(x, update, *starts)
            result = x if lent and _writeable(x) else asarray(x, copy=True)
            result[window(starts)] = update
            return result

        return direct


class Iota(Op):
    """0, 1, 2 ... along ``dim`` of an array of ``shape`` and ``dtype``."""

    types = ("Iota",)
    arity = 0
    params = (Ints("shape", low=0), Int("dim", low=0), DType("dtype"))

    def setup(self):
        if self.dim >= len(self.shape):
            raise self.error(f"param 'dim'={self.dim} is out of range for shape {list(self.shape)}")
        line = self.xp.astype(self.xp.arange(self.shape[self.dim]), self.dtype)
        column = [1] * len(self.shape)
        column[self.dim] = self.shape[self.dim]
        self.value = self.xp.broadcast_to(self.xp.reshape(line, tuple(column)), self.shape)

    def forward(self):
        return self.value


OPS = [Broadcast, Slice, Pad, DynamicSlice, DynamicUpdateSlice, Iota]
