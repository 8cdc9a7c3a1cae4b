"""HLO gather and scatter with their full dimension numbers (incl. operand batching dims).

Gather clamps each slice's start so the slice fits (XLA's rule); scatter skips an update
window that does not fit.  Scatter applies its ``to_apply`` combiner in update order:
updates that hit the same element are applied in rounds, one per element per round.
"""

from __future__ import annotations

from .ops_base import HloOp, binary_root_opcode


def combine_into(xp, flats: list, targets, updates: list, combine) -> None:
    """``flats[i][t] = combine(*[f[t] for f in flats], *[u for u in updates])[i]`` for every update, in order.

    ``flats`` are 1-D arrays changed in place; several updates of one element are applied
    one after another (round r applies each element's r-th update).
    """
    if targets.shape[0] == 0:
        return
    order = xp.argsort(targets, stable=True)
    ordered = targets[order]
    rank = xp.arange(ordered.shape[0]) - xp.searchsorted(ordered, ordered, side="left")
    for round_number in range(int(xp.max(rank)) + 1):
        chosen = order[rank == round_number]
        where = targets[chosen]
        results = combine(*[f[where] for f in flats], *[u[chosen] for u in updates])
        for flat, result in zip(flats, results):
            flat[where] = result


def _batch_axis(dim: int, index_vector_dim: int) -> int:
    """Position of an indices dim among the batch dims (the index vector dim removed)."""
    return dim if dim < index_vector_dim else dim - 1


def _index_vectors(xp, indices, index_vector_dim: int):
    """Indices with the index vector as the last axis."""
    if index_vector_dim == indices.ndim:
        return indices[..., None]
    return xp.moveaxis(indices, index_vector_dim, -1)


def _starts(xp, op, indices, operand_rank, index_map, batching, index_batching, index_vector_dim):
    """One start per operand dim, each an array of the batch shape (or the int 0)."""
    batch_shape = indices.shape[:-1]
    starts: list = [0] * operand_rank
    for k, dim in enumerate(index_map):
        starts[dim] = indices[..., k].astype(xp.int64)
    for operand_dim, index_dim in zip(batching, index_batching):
        axis = _batch_axis(index_dim, index_vector_dim)
        shape = [1] * len(batch_shape)
        shape[axis] = batch_shape[axis]
        starts[operand_dim] = xp.reshape(xp.arange(batch_shape[axis]), tuple(shape))
    return starts


class Gather(HloOp):
    types = ("hlo.gather",)

    def hlo_setup(self):
        self.offset_dims = self.ints("offset_dims", ())
        self.collapsed = self.ints("collapsed_slice_dims", ())
        self.index_map = self.ints("start_index_map")
        self.index_vector_dim = self.integer("index_vector_dim")
        self.slice_sizes = self.ints("slice_sizes")
        self.batching = self.ints("operand_batching_dims", ())
        self.index_batching = self.ints("start_indices_batching_dims", ())
        if len(self.slice_sizes) != self.operand_shape(0).rank:
            raise self.error(f"slice_sizes={list(self.slice_sizes)} do not match the operand {self.operand_shape(0)}")

    def forward(self, operand, indices):
        xp = self.xp
        vectors = _index_vectors(xp, indices, self.index_vector_dim)
        batch_rank = vectors.ndim - 1
        rank = operand.ndim
        starts = _starts(xp, self, vectors, rank, self.index_map, self.batching, self.index_batching,
                         self.index_vector_dim)
        index = []
        for dim in range(rank):
            start = starts[dim]
            if dim in self.index_map:
                start = xp.clip(start, 0, operand.shape[dim] - self.slice_sizes[dim])
            start = xp.reshape(xp.asarray(start), (*xp.asarray(start).shape, *([1] * rank)))
            offset_shape = [1] * rank
            offset_shape[dim] = self.slice_sizes[dim]
            index.append(start + xp.reshape(xp.arange(self.slice_sizes[dim]), tuple(offset_shape)))
        index = xp.broadcast_arrays(*index)
        gathered = operand[tuple(index)]  # batch dims..., every operand dim's window
        dropped = set(self.collapsed) | set(self.batching)
        gathered = xp.reshape(gathered, (*gathered.shape[:batch_rank],
                                         *[self.slice_sizes[d] for d in range(rank) if d not in dropped]))
        out_rank = batch_rank + len(self.offset_dims)
        batch_axes = iter(range(batch_rank))
        window_axes = iter(range(batch_rank, gathered.ndim))
        offsets = set(self.offset_dims)
        permutation = [next(window_axes) if position in offsets else next(batch_axes) for position in range(out_rank)]
        return xp.permute_dims(gathered, tuple(permutation))


class Scatter(HloOp):
    types = ("hlo.scatter",)
    fresh_output = True

    def hlo_setup(self):
        self.count = (len(self.instruction.operands) - 1) // 2
        self.window_dims = self.ints("update_window_dims", ())
        self.inserted = self.ints("inserted_window_dims", ())
        self.index_map = self.ints("scatter_dims_to_operand_dims")
        self.index_vector_dim = self.integer("index_vector_dim")
        self.batching = self.ints("input_batching_dims", ())
        self.index_batching = self.ints("scatter_indices_batching_dims", ())
        computation = self.called("to_apply")
        opcode = binary_root_opcode(computation)
        root = computation.root
        if self.count == 1 and root.opcode == "parameter" and root.parameter_number == 1:
            self.combine = lambda old, new: [new]  # overwrite
        elif self.count == 1 and opcode in ("add", "multiply", "maximum", "minimum"):
            from .ops_reduce import combine

            self.combine = lambda old, new: [combine(self.xp, opcode, old, new)]
        else:
            self.combine = self.sub_model(computation, vectorized=True)

    def forward(self, *inputs):
        xp = self.xp
        operands = inputs[: self.count]
        indices = inputs[self.count]
        updates = inputs[self.count + 1 :]
        operand_shape = operands[0].shape
        rank = len(operand_shape)
        update = updates[0]
        scatter_dims = [d for d in range(update.ndim) if d not in self.window_dims]
        order = (*scatter_dims, *self.window_dims)
        updates = [xp.permute_dims(u, order) for u in updates]
        vectors = _index_vectors(xp, indices, self.index_vector_dim)
        batch_rank = vectors.ndim - 1
        window_rank = len(self.window_dims)
        starts = _starts(xp, self, vectors, rank, self.index_map, self.batching, self.index_batching,
                         self.index_vector_dim)
        operand_window_dims = [d for d in range(rank) if d not in self.inserted and d not in self.batching]
        window_sizes = dict(zip(operand_window_dims, updates[0].shape[batch_rank:]))
        flat_target = 0
        valid = True
        stride = 1
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
        valid = xp.reshape(xp.asarray(valid), (*xp.asarray(valid).shape, *([1] * window_rank)))
        full = updates[0].shape
        flat_target = xp.reshape(xp.broadcast_to(flat_target, full), (-1,))
        keep = xp.reshape(xp.broadcast_to(valid, full), (-1,))
        flats = [xp.reshape(xp.asarray(o, copy=True), (-1,)) for o in operands]
        combine_into(xp, flats, flat_target[keep], [xp.reshape(u, (-1,))[keep] for u in updates], self.combine)
        results = [xp.reshape(f, operand_shape) for f in flats]
        return results[0] if self.count == 1 else tuple(results)


OPS = [Gather, Scatter]
