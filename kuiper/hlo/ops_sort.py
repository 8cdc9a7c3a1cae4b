"""HLO sort (variadic, any comparator) and top-k (``topk`` and the ``TopK`` custom call).

Sort ranks every element by counting the elements the comparator puts before it (ties
broken by position, so the sort is stable), evaluating the comparator on all pairs of a
row at once; rows are handled in chunks to bound memory.  Top-k orders floats by XLA's
total order (NaN largest) and breaks ties by lower index.
"""

from __future__ import annotations

from .ops_base import HloOp
from .ops_elementwise import total_order_key

PAIR_BUDGET = 1 << 22  # comparator evaluations per chunk


class Sort(HloOp):
    types = ("hlo.sort",)

    def hlo_setup(self):
        (self.axis,) = self.ints("dimensions")
        self.comparator = self.sub_model(self.called("to_apply"), vectorized=True)
        self.count = len(self.instruction.operands)

    def forward(self, *inputs):
        xp = self.xp
        moved = [xp.moveaxis(x, self.axis, -1) for x in inputs]
        length = moved[0].shape[-1]
        rows = moved[0].size // max(length, 1)
        chunk = max(1, PAIR_BUDGET // max(rows * length, 1))
        positions = xp.arange(length)
        ranks = []
        for start in range(0, length, chunk):
            stop = min(start + chunk, length)
            mine = [x[..., start:stop, None] for x in moved]  # element i (axis -2)
            others = [x[..., None, :] for x in moved]  # element j (axis -1)
            (j_first,) = self.comparator(*[v for pair in zip(others, mine) for v in pair])
            (i_first,) = self.comparator(*[v for pair in zip(mine, others) for v in pair])
            earlier = positions[None, :] < positions[start:stop, None]
            before = j_first | (~i_first & earlier)
            ranks.append(xp.sum(xp.astype(xp.broadcast_to(before, (*moved[0].shape[:-1], stop - start, length)),
                                          xp.int64), axis=-1))
        rank = xp.concat(ranks, axis=-1) if len(ranks) > 1 else ranks[0]
        permutation = xp.argsort(rank, axis=-1, stable=True)
        results = [xp.moveaxis(xp.take_along_axis(x, permutation, axis=-1), -1, self.axis) for x in moved]
        return results[0] if self.count == 1 else tuple(results)


def top_k(xp, x, k: int, largest: bool):
    key = total_order_key(xp, x) if x.dtype.kind == "f" else x
    order = xp.argsort(~key if largest else key, axis=-1, stable=True)[..., :k]
    return xp.take_along_axis(x, order, axis=-1), order


class TopK(HloOp):
    types = ("hlo.topk",)

    def hlo_setup(self):
        self.k = self.integer("k")
        self.largest = self.flag("largest", True)

    def forward(self, x):
        values, indices = top_k(self.xp, x, self.k, self.largest)
        return values, indices.astype(self.dtype(self.shape.leaves()[1]))


class TopKCustomCall(HloOp):
    """``custom-call(x), custom_call_target="TopK"`` with a greater-than comparator (k from the result shape)."""

    types = ("hlo.custom-call.TopK",)

    def hlo_setup(self):
        leaves = self.shape.leaves()
        self.k = leaves[0].dims[-1]
        names = self.instruction.called_computations()
        root = self.module.computations[names[0]].root if names else None
        direction = root.attributes.get("direction") if root is not None and root.opcode == "compare" else "GT"
        if direction not in ("GT", "LT"):
            raise self.unsupported("comparator", direction, ("GT", "LT"))
        self.largest = direction == "GT"

    def forward(self, x):
        values, indices = top_k(self.xp, x, self.k, self.largest)
        return values, indices.astype(self.dtype(self.shape.leaves()[1]))


OPS = [Sort, TopK, TopKCustomCall]
