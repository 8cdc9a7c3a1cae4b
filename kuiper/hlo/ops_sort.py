"""HLO sort (variadic, any comparator) and top-k (``topk`` and the ``TopK`` custom call).

Sort is a bottom-up merge sort over every row at once, with the comparator applied to whole
arrays: in each pass, every element finds its place in the neighbouring run by binary search
(left-run elements count the right-run elements strictly before them, right-run elements the
left-run elements not after them, which keeps the sort stable).  That is O(log^2 n) comparator
calls for rows of n.  Top-k orders floats by XLA's total order (NaN largest) and breaks ties
by lower index.
"""

from __future__ import annotations

from .ops_base import HloOp
from .ops_elementwise import total_order_key


class Sort(HloOp):
    types = ("hlo.sort",)

    def hlo_setup(self):
        (self.axis,) = self.ints("dimensions")
        self.comparator = self.sub_model(self.called("to_apply"), vectorized=True)
        self.count = len(self.instruction.operands)

    def before(self, x: list, x_valid, y: list, y_valid):
        """Where x comes strictly before y; padding (invalid) comes after everything."""
        (less,) = self.comparator(*[v for pair in zip(x, y) for v in pair])
        return x_valid & (~y_valid | self.xp.asarray(less, dtype=self.xp.bool))

    def forward(self, *inputs):
        xp = self.xp
        rows = [xp.moveaxis(x, self.axis, -1) for x in inputs]
        length = rows[0].shape[-1]
        if length <= 1:
            return inputs[0] if self.count == 1 else tuple(inputs)
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
            own = index - run_start - xp.where(is_left, 0, width)
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
        results = [xp.moveaxis(r[..., :length], -1, self.axis) for r in rows]
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
