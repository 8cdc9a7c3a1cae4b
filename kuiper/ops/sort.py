"""Sort (N operands along one axis, by a comparator) and TopK (the k largest or smallest).

Sort's ``comparator`` is either recognised or a sub-graph.  Recognised: ``key`` (which
operand holds the keys) and ``descending``: a stable argsort of the keys, floats in
total order (-NaN < -inf < ... < -0 < +0 < ... < inf < NaN), reorders every operand;
``canonical_nans_and_zeros`` sorts -0 as +0 and every NaN as one NaN (after +inf).
A sub-graph ``less(a0, b0, a1, b1, ...) -> pred`` (written for scalars) runs a bottom-up
merge sort over every row at once: in each pass every element finds its place in the
neighbouring run by binary search, O(log^2 n) comparator calls for rows of n.  Left-run
elements count the right-run elements strictly before them and right-run elements the
left-run elements not after them, which keeps the sort stable.

TopK orders floats by the same total order (NaN largest) and breaks ties by lower index.
"""

from __future__ import annotations

from ..ir.dtypes import array_dtype, is_extended, is_extended_float
from .base import Op
from .elementwise_exact import total_order_key
from .params import Bool, Choice, Int

INDEX_DTYPES = ("int32", "int64", "uint32", "uint64", "int16", "uint16", "int8", "uint8")


def sort_key(xp, x):
    """Keys whose order is the total order of ``x``: floats as signed integers (XLA's total order of
    floats, elementwise_exact.total_order_key), bools as int8, integers as they are."""
    if x.dtype == xp.bool:
        return xp.astype(x, xp.int8)
    if is_extended(x.dtype) and not is_extended_float(x.dtype):  # int4 ...: NumPy's isdtype does not know them
        return x
    if not (is_extended_float(x.dtype) or xp.isdtype(x.dtype, "real floating")):
        return x
    return total_order_key(xp, x)


def stable_order(xp, keys, axis: int, descending: bool):
    """Positions that sort ``keys`` along ``axis``, equal keys in their original order."""
    key = sort_key(xp, keys)
    return xp.argsort(~key if descending else key, axis=axis, stable=True)


class Sort(Op):
    types = ("Sort",)

    def setup(self):
        self.count = len(self.node.inputs)
        if self.count == 0 or len(self.node.outputs) != self.count:
            raise self.error(f"sorts N operands into N outputs, found {self.count} and {len(self.node.outputs)}")
        self.axis = self.int_param("axis")
        if self.has_param("key"):
            self.key = self.int_param("key")
            if not 0 <= self.key < self.count:
                raise self.error(f"param 'key' must name one of the {self.count} operand(s), found {self.key}")
            self.descending = self.bool_param("descending", default=False)
            self.canonical = self.bool_param("canonical_nans_and_zeros", default=False)
            self.comparator = None
        else:
            self.comparator = self.subgraph("comparator")

    def forward(self, *inputs):
        xp = self.xp
        if not 0 <= self.axis < inputs[0].ndim:
            raise self.error(f"axis {self.axis} is not a dim of a rank-{inputs[0].ndim} operand")
        if self.comparator is None:
            keys = inputs[self.key]
            if self.canonical and xp.isdtype(keys.dtype, "real floating"):
                zero, nan = xp.zeros((), dtype=keys.dtype), xp.asarray(float("nan"), dtype=keys.dtype)
                keys = xp.where(xp.isnan(keys), nan, xp.where(keys == 0, zero, keys))
            order = stable_order(xp, keys, self.axis, self.descending)
            results = [xp.take_along_axis(x, order, axis=self.axis) for x in inputs]
        else:
            rows = [xp.moveaxis(x, self.axis, -1) for x in inputs]
            results = [xp.moveaxis(r, -1, self.axis) for r in self.merge_sort(rows)]
        return results[0] if self.count == 1 else tuple(results)

    def before(self, x: list, x_valid, y: list, y_valid):
        """Where x comes strictly before y; padding (invalid) comes after everything."""
        less = self.comparator(*[v for pair in zip(x, y) for v in pair])
        return x_valid & (~y_valid | self.xp.astype(self.xp.asarray(less), self.xp.bool))

    def merge_sort(self, rows: list) -> list:
        xp = self.xp
        length = rows[0].shape[-1]
        if length <= 1:
            return rows
        batch = rows[0].shape[:-1]
        size = 1 << (length - 1).bit_length()
        if size != length:  # pad to a power of two with copies of element 0, marked invalid
            rows = [xp.concat([r, xp.broadcast_to(r[..., :1], (*batch, size - length))], axis=-1) for r in rows]
        index = xp.broadcast_to(xp.arange(size), (*batch, size))
        valid = index < length
        width = 1
        while width < size:
            run_start = (index // (2 * width)) * (2 * width)
            is_left = index - run_start < width
            own = index - run_start - xp.where(is_left, xp.zeros_like(index), width)
            partner_start = xp.where(is_left, run_start + width, run_start)
            low, high = xp.zeros_like(index), xp.full(index.shape, width, dtype=index.dtype)
            for _ in range(width.bit_length()):  # count the partner run's elements before each element
                middle = (low + high) // 2
                probe = partner_start + xp.minimum(middle, width - 1)
                partner = [xp.take_along_axis(r, probe, axis=-1) for r in rows]
                partner_valid = xp.take_along_axis(valid, probe, axis=-1)
                partner_first = xp.where(
                    is_left,
                    self.before(partner, partner_valid, rows, valid),
                    ~self.before(rows, valid, partner, partner_valid),
                )
                active = low < high
                low = xp.where(active & partner_first, middle + 1, low)
                high = xp.where(active & ~partner_first, middle, high)
            order = xp.argsort(run_start + own + low, axis=-1)  # new positions -> who goes there
            rows = [xp.take_along_axis(r, order, axis=-1) for r in rows]
            valid = xp.take_along_axis(valid, order, axis=-1)
            width *= 2
        return [r[..., :length] for r in rows]


class TopK(Op):
    """The ``k`` largest (or smallest) along the last axis, sorted, and their positions (``index_dtype``)."""

    types = ("TopK",)
    arity = 1
    params = (Int("k", low=0), Bool("largest", default=True), Choice("index_dtype", INDEX_DTYPES, default="int32"))

    def forward(self, x):
        xp = self.xp
        if x.ndim == 0 or self.k > x.shape[-1]:
            raise self.error(f"k={self.k} is more than the last dim of shape {tuple(x.shape)}")
        order = stable_order(xp, x, -1, self.largest)[..., : self.k]
        return xp.take_along_axis(x, order, axis=-1), xp.astype(order, array_dtype(xp, self.index_dtype))


OPS = [Sort, TopK]
