"""Unique: the distinct elements (or slices along a dim) of a tensor, with where they come from.

Outputs, as many as the node declares (1 to 4): the distinct values; the position of each one's first
occurrence; for every input element (or slice), which distinct value it is; how often each occurs
(int64, all but the first). ``sorted`` orders the distinct values ascending (slices lexicographically),
else in the order they first occur. NaNs count as one value and -0 as 0, as NumPy's ``unique`` does.
(ONNX's Unique; torch.unique gives the first, third and fourth of these.)
"""

from __future__ import annotations

from ..ir.dtypes import is_extended_float
from .base import Op, normalize_axis
from .params import Bool, Int
from .sort import sort_key


class Unique(Op):
    types = ("Unique",)
    arity = 1
    fresh_output = True
    params = (Int("dim", default=None), Bool("sorted", default=True))

    def setup(self):
        if not 1 <= len(self.node.outputs) <= 4:
            raise self.error(f"gives 1 to 4 outputs (values, first indices, inverse indices, counts), the file "
                             f"declares {len(self.node.outputs)}")

    def forward(self, x):
        xp = self.xp
        if self.dim is None:
            axis, rows = None, xp.reshape(x, (-1, 1))
        else:
            axis = normalize_axis(self.dim, x.ndim, self)
            moved = xp.moveaxis(x, axis, 0)
            rows = xp.reshape(moved, (moved.shape[0], -1))
        first, inverse, counts = self.groups(rows)
        values = xp.take(rows, first, axis=0)
        if axis is None:
            values = xp.reshape(values, (-1,))
        else:
            values = xp.moveaxis(xp.reshape(values, (first.shape[0], *moved.shape[1:])), 0, axis)
        return (values, first, inverse, counts)[:len(self.node.outputs)] if len(self.node.outputs) > 1 else values

    def groups(self, rows):
        """For rows (n, m): the first row of each group of equal rows, each row's group, each group's size."""
        xp = self.xp
        n = rows.shape[0]
        if n == 0:
            empty = xp.zeros((0,), dtype=xp.int64)
            return empty, empty, empty
        keys = sort_key(xp, self.canonical(rows))
        # Lexicographic order of the rows: stable sorts by each column, the last column first.
        order = xp.arange(n, dtype=xp.int64)
        for column in reversed(range(rows.shape[1])):
            column_keys = xp.take(keys[:, column], order)
            order = xp.take(order, xp.argsort(column_keys, stable=True))
        ordered = xp.take(keys, order, axis=0)
        # A group starts where a row differs from the one before it (the stable sorts keep its first row first).
        changes = xp.any(ordered[1:, ...] != ordered[:-1, ...], axis=1)
        starts = xp.concat([xp.ones((1,), dtype=xp.bool), changes])
        group_of_sorted = xp.cumulative_sum(xp.astype(starts, xp.int64)) - 1
        start_positions = xp.nonzero(starts)[0]
        first = xp.take(order, start_positions)
        counts = xp.diff(xp.concat([start_positions, xp.asarray([n], dtype=start_positions.dtype)]))
        inverse = xp.take(group_of_sorted, xp.argsort(order))
        if not self.sorted:  # number the groups by their first occurrence instead
            by_occurrence = xp.argsort(first)
            renumber = xp.argsort(by_occurrence)
            first, counts = xp.take(first, by_occurrence), xp.take(counts, by_occurrence)
            inverse = xp.take(renumber, inverse)
        return xp.astype(first, xp.int64), xp.astype(inverse, xp.int64), xp.astype(counts, xp.int64)

    def canonical(self, rows):
        """Floats with every NaN one NaN and -0 as 0, so that equal values get equal sort keys."""
        xp = self.xp
        if rows.dtype == xp.bool or not _is_float(xp, rows.dtype):
            return rows
        zero = xp.zeros((), dtype=rows.dtype)
        nan = xp.asarray(float("nan"), dtype=rows.dtype)
        return xp.where(rows != rows, nan, xp.where(rows == zero, zero, rows))


def _is_float(xp, dtype) -> bool:
    return is_extended_float(dtype) or xp.isdtype(dtype, "real floating")


OPS = [Unique]
