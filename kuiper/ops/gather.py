"""General gather and scatter with dimension numbers (XLA's, including batching dims).

Gather: each index vector (axis ``index_vector_dim`` of the indices; past the last axis
means a vector of one) gives, through ``start_index_map``, the start of one slice of
``slice_sizes`` in the operand; a start is clamped so the slice fits.  The output holds the
slices' kept dims at ``offset_dims`` and the batch (indices) dims elsewhere;
``collapsed_slice_dims`` (size 1) and ``operand_batching_dims`` are dropped from each slice.
``operand_batching_dims[i]`` takes its start from the position along indices dim
``start_indices_batching_dims[i]``.

Scatter is the reverse, with an update ``combiner``: ``"replace"``, a reducer name, or a
sub-graph ``(old..., new...) -> combined...``.  Updates are combined in order, and an
update window that does not fit is skipped.  Several operands may be scattered at once
(the sub-graph combines them together).
"""

from __future__ import annotations

from .base import Op
from .params import Bool, Int, Ints
from .reducers import Reducer, scatter_with


def _index_vectors(xp, indices, index_vector_dim: int):
    """Indices with the index vector as the last axis."""
    if index_vector_dim == indices.ndim:
        return indices[..., None]
    return xp.moveaxis(indices, index_vector_dim, -1)


def _starts(xp, vectors, rank: int, index_map, batching, index_batching, index_vector_dim: int) -> list:
    """One start per operand dim: an array of the batch shape, or the int 0."""
    batch_shape = vectors.shape[:-1]
    starts: list = [0] * rank
    for k, dim in enumerate(index_map):
        starts[dim] = xp.astype(vectors[..., k], xp.int64)
    for operand_dim, index_dim in zip(batching, index_batching):
        axis = index_dim if index_dim < index_vector_dim else index_dim - 1  # the vector dim removed
        shape = [1] * len(batch_shape)
        shape[axis] = batch_shape[axis]
        starts[operand_dim] = xp.reshape(xp.arange(batch_shape[axis]), tuple(shape))
    return starts


def _dims(key: str, attr: str | None = None) -> Ints:
    """A list of dimension numbers (XLA's: non-negative), empty when absent."""
    return Ints(key, default=(), low=0, attr=attr)


class Gather(Op):
    types = ("Gather",)
    arity = 2
    params = (
        _dims("offset_dims"), _dims("collapsed_slice_dims", "collapsed"),
        Ints("start_index_map", low=0, attr="index_map"), Int("index_vector_dim", low=0), Ints("slice_sizes", low=0),
        _dims("operand_batching_dims", "batching"), _dims("start_indices_batching_dims", "index_batching"),
        Bool("indices_are_sorted", default=False),  # a hint: the result is the same
    )

    def forward(self, operand, indices):
        xp = self.xp
        rank = operand.ndim
        if len(self.slice_sizes) != rank:
            raise self.error(f"slice_sizes={list(self.slice_sizes)} do not match an operand of rank {rank}")
        vectors = _index_vectors(xp, indices, self.index_vector_dim)
        batch_rank = vectors.ndim - 1
        # batch dims..., then every operand dim's window
        gathered = self._rows(operand, vectors) if self._takes_rows(operand.shape) else self._windows(operand, vectors)
        dropped = set(self.collapsed) | set(self.batching)
        gathered = xp.reshape(gathered, (*gathered.shape[:batch_rank],
                                         *[self.slice_sizes[d] for d in range(rank) if d not in dropped]))
        batch_axes = iter(range(batch_rank))
        window_axes = iter(range(batch_rank, gathered.ndim))
        offsets = set(self.offset_dims)
        permutation = [next(window_axes) if position in offsets else next(batch_axes)
                       for position in range(batch_rank + len(self.offset_dims))]
        return xp.permute_dims(gathered, tuple(permutation))

    def _takes_rows(self, shape) -> bool:
        """Whether each index vector picks single positions along the dims it indexes and the slice
        takes every other dim whole (an embedding lookup, ``w[i]`` of a stack of expert weights)."""
        if self.batching or not self.index_map:
            return False
        return all(self.slice_sizes[dim] == (1 if dim in self.index_map else size) for dim, size in enumerate(shape))

    def _rows(self, operand, vectors):
        """The gather of ``_takes_rows`` as one ``take`` of rows: the indexed dims moved first and made one,
        each index vector its row number (a MoE's 32 tokens x 2 experts of 128 x 256 weights: 11 ms as a
        window per element, 0.3 ms as rows)."""
        xp = self.xp
        rank = operand.ndim
        indexed = list(self.index_map)
        rows = xp.permute_dims(operand, (*indexed, *[d for d in range(rank) if d not in indexed]))
        rows = xp.reshape(rows, (-1, *rows.shape[len(indexed):]))  # a view when the indexed dims lead
        number = 0
        for k, dim in enumerate(indexed):
            # maximum/minimum, not the namespace's clip: array-api-compat's checks its arguments for
            # 35 us a call, most of a GPT's embedding lookup.
            position = xp.minimum(xp.maximum(xp.astype(vectors[..., k], xp.int64), 0), operand.shape[dim] - 1)
            number = number * operand.shape[dim] + position
        picked = xp.take(rows, xp.reshape(number, (-1,)), axis=0)  # the whole dims in operand order
        return xp.reshape(picked, (*vectors.shape[:-1], *self.slice_sizes))

    def _windows(self, operand, vectors):
        """Any gather: every element of every window indexed on its own."""
        xp = self.xp
        rank = operand.ndim
        starts = _starts(xp, vectors, rank, self.index_map, self.batching, self.index_batching,
                         self.index_vector_dim)
        index = []
        for dim in range(rank):
            start = xp.asarray(starts[dim])
            if dim in self.index_map:
                start = xp.clip(start, 0, operand.shape[dim] - self.slice_sizes[dim])
            start = xp.reshape(start, (*start.shape, *([1] * rank)))
            offset_shape = [1] * rank
            offset_shape[dim] = self.slice_sizes[dim]
            index.append(start + xp.reshape(xp.arange(self.slice_sizes[dim]), tuple(offset_shape)))
        return operand[tuple(xp.broadcast_arrays(*index))]


class Scatter(Op):
    """Inputs ``operands..., indices, updates...`` (N operands, N updates); N outputs."""

    types = ("Scatter",)
    fresh_output = True
    params = (
        _dims("update_window_dims", "window_dims"), _dims("inserted_window_dims", "inserted"),
        Ints("scatter_dims_to_operand_dims", low=0, attr="index_map"), Int("index_vector_dim", low=0),
        _dims("input_batching_dims", "batching"), _dims("scatter_indices_batching_dims", "index_batching"),
        Bool("indices_are_sorted", default=False), Bool("unique_indices", default=False),  # hints
    )

    def setup(self):
        self.count = (len(self.node.inputs) - 1) // 2
        if self.count == 0 or len(self.node.inputs) != 2 * self.count + 1 or len(self.node.outputs) != self.count:
            raise self.error(f"takes N operands, the indices and N updates for N outputs, found "
                             f"{len(self.node.inputs)} input(s) and {len(self.node.outputs)} output(s)")
        self.combiner = None if self.param("combiner") == "replace" else Reducer(self, "combiner", self.count)

    def forward(self, *inputs):
        xp = self.xp
        operands, indices, updates = inputs[: self.count], inputs[self.count], inputs[self.count + 1 :]
        operand_shape = tuple(operands[0].shape)
        rank = len(operand_shape)
        scatter_dims = [d for d in range(updates[0].ndim) if d not in self.window_dims]
        updates = [xp.permute_dims(u, (*scatter_dims, *self.window_dims)) for u in updates]
        vectors = _index_vectors(xp, indices, self.index_vector_dim)
        batch_rank = vectors.ndim - 1
        window_rank = len(self.window_dims)
        starts = _starts(xp, vectors, rank, self.index_map, self.batching, self.index_batching,
                         self.index_vector_dim)
        operand_window_dims = [d for d in range(rank) if d not in self.inserted and d not in self.batching]
        window_sizes = dict(zip(operand_window_dims, updates[0].shape[batch_rank:]))
        flat_target, valid, stride = 0, True, 1
        for dim in reversed(range(rank)):
            start = xp.asarray(starts[dim])
            size = window_sizes.get(dim, 1)
            valid = valid & (start >= 0) & (start + size <= operand_shape[dim])
            start = xp.reshape(start, (*start.shape, *([1] * window_rank)))
            if dim in window_sizes:
                offset_shape = [1] * (batch_rank + window_rank)
                offset_shape[batch_rank + operand_window_dims.index(dim)] = size
                start = start + xp.reshape(xp.arange(size), tuple(offset_shape))
            flat_target = flat_target + start * stride
            stride *= operand_shape[dim]
        valid = xp.asarray(valid)
        valid = xp.reshape(valid, (*valid.shape, *([1] * window_rank)))
        full = tuple(updates[0].shape)
        flat_target = xp.reshape(xp.broadcast_to(flat_target, full), (-1,))
        keep = xp.reshape(xp.broadcast_to(valid, full), (-1,))
        flats = [xp.reshape(xp.asarray(o, copy=True), (-1,)) for o in operands]
        scatter_with(self.backend, self.combiner, flats, flat_target[keep],
                     [xp.reshape(u, (-1,))[keep] for u in updates])
        results = [xp.reshape(f, operand_shape) for f in flats]
        return results[0] if self.count == 1 else tuple(results)


OPS = [Gather, Scatter]
