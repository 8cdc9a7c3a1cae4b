"""HLO data movement: constants, iota, broadcast, reshape, transpose, bitcast, slices, pad, concat, reverse."""

from __future__ import annotations

from ..limits import check_size
from .module import Slice
from .ops_base import HloOp
from .shapes import ArrayShape


class Constant(HloOp):
    types = ("hlo.constant",)

    def hlo_setup(self):
        self.value = self.weight("data")

    def forward(self):
        return self.value


class Iota(HloOp):
    types = ("hlo.iota",)

    def hlo_setup(self):
        self.dimension = self.integer("iota_dimension")
        if not 0 <= self.dimension < self.result.rank:
            raise self.error(f"iota_dimension={self.dimension} is out of range for {self.result}")

    def forward(self):
        xp = self.xp
        dims = self.result.dims
        line = xp.arange(dims[self.dimension]).astype(self.dtype())
        shape = [1] * len(dims)
        shape[self.dimension] = dims[self.dimension]
        return xp.broadcast_to(xp.reshape(line, tuple(shape)), dims)


class Broadcast(HloOp):
    """Operand dim i becomes result dim ``dimensions[i]``; the other result dims repeat it."""

    types = ("hlo.broadcast",)

    def hlo_setup(self):
        self.dimensions = self.ints("dimensions", ())
        rank = self.result.rank
        if len(set(self.dimensions)) != len(self.dimensions) or any(not 0 <= d < rank for d in self.dimensions):
            raise self.error(f"dimensions={list(self.dimensions)} do not fit the result {self.result}")
        order = sorted(range(len(self.dimensions)), key=lambda i: self.dimensions[i])
        self.order = tuple(order) if order != list(range(len(order))) else None

    def forward(self, x):
        xp = self.xp
        if self.order is not None:
            x = xp.permute_dims(x, self.order)
        shape = [1] * self.result.rank
        for position in sorted(self.dimensions):
            shape[position] = x.shape[sorted(self.dimensions).index(position)]
        return xp.broadcast_to(xp.reshape(x, tuple(shape)), self.result.dims)


class Reshape(HloOp):
    types = ("hlo.reshape",)

    def forward(self, x):
        return self.xp.reshape(x, self.result.dims)


class Transpose(HloOp):
    types = ("hlo.transpose",)

    def hlo_setup(self):
        self.permutation = self.ints("dimensions")
        if sorted(self.permutation) != list(range(self.result.rank)):
            raise self.error(f"dimensions={list(self.permutation)} is not a permutation of {self.result.rank} dims")

    def forward(self, x):
        return self.xp.permute_dims(x, self.permutation)


def _major_to_minor(shape: ArrayShape) -> tuple[int, ...]:
    if shape.layout is None or len(shape.layout.minor_to_major) != shape.rank:
        return tuple(range(shape.rank))
    return tuple(reversed(shape.layout.minor_to_major))


class Bitcast(HloOp):
    """Reinterpret the operand's memory as the result shape: layouts say how dims lie in memory.

    The operand's logical array is put in its physical (major-to-minor) order, read as the
    result's physical dims, and put back in the result's logical order.  A change of element
    type reinterprets the bits as well.
    """

    types = ("hlo.bitcast",)

    def hlo_setup(self):
        operand = self.operand_shape(0)
        if operand.is_tuple:
            raise self.error("cannot bitcast a tuple")
        self.operand_order = _major_to_minor(operand)
        self.result_order = _major_to_minor(self.result)
        self.physical_dims = tuple(self.result.dims[d] for d in self.result_order)
        self.inverse = tuple(sorted(range(self.result.rank), key=lambda i: self.result_order[i]))
        self.retype = operand.element_type != self.result.element_type
        # Same dims in the same memory order: only the element type changes (this also holds
        # when a scalar comparator is applied to whole arrays).
        self.retype_only = operand.dims == self.result.dims and self.operand_order == self.result_order

    def forward(self, x):
        xp = self.xp
        if self.retype_only:
            return x.view(self.dtype()) if self.retype else x
        if self.operand_order != tuple(range(x.ndim)):
            x = xp.permute_dims(x, self.operand_order)
        if self.retype:
            x = xp.asarray(x, copy=True).view(self.dtype())
        x = xp.reshape(x, self.physical_dims)
        if self.inverse != tuple(range(len(self.inverse))):
            x = xp.permute_dims(x, self.inverse)
        return x


class SliceOp(HloOp):
    types = ("hlo.slice",)

    def hlo_setup(self):
        spec = self.attribute("slice")
        if not isinstance(spec, list) or not all(isinstance(s, Slice) for s in spec):
            raise self.error(f"slice={spec!r} must be a list of [start:limit:stride]")
        dims = self.operand_shape(0).dims
        for axis, (s, dim) in enumerate(zip(spec, dims)):
            if s.stride < 1 or not 0 <= s.start <= s.limit or (dim >= 0 and s.limit > dim):
                raise self.error(f"slice dim {axis} [{s.start}:{s.limit}:{s.stride}] must have a positive stride "
                                 f"and 0 <= start <= limit <= {dim}")
        self.index = tuple(slice(s.start, s.limit, s.stride) for s in spec)

    def forward(self, x):
        return x[self.index]


def _start(index, size: int, limit: int) -> int:
    """A dynamic start index clamped into [0, dim - size], as XLA does."""
    return min(max(int(index), 0), limit - size)


class DynamicSlice(HloOp):
    types = ("hlo.dynamic-slice",)

    def hlo_setup(self):
        self.sizes = self.ints("dynamic_slice_sizes")

    def forward(self, x, *starts):
        if len(starts) == 1 and getattr(starts[0], "ndim", 0) == 1:  # old form: one index vector
            starts = list(starts[0])
        index = tuple(
            slice(begin, begin + size)
            for begin, size in (
                (_start(start, size, dim), size) for start, size, dim in zip(starts, self.sizes, x.shape)
            )
        )
        return x[index]


class DynamicUpdateSlice(HloOp):
    types = ("hlo.dynamic-update-slice",)
    fresh_output = True

    def forward(self, x, update, *starts):
        if len(starts) == 1 and getattr(starts[0], "ndim", 0) == 1:
            starts = list(starts[0])
        index = tuple(
            slice(begin, begin + size)
            for begin, size in (
                (_start(start, size, dim), size) for start, size, dim in zip(starts, update.shape, x.shape)
            )
        )
        result = self.xp.asarray(x, copy=True)
        result[index] = update
        return result


class Pad(HloOp):
    """``padding=lo_hi_interior`` per dim; negative lo/hi crop."""

    types = ("hlo.pad",)

    def hlo_setup(self):
        text = self.attribute("padding")
        text = str(text)
        try:
            self.config = [tuple(int(v) for v in dim.split("_")) for dim in text.split("x")] if text else []
        except ValueError:
            raise self.error(f"padding={text!r} is not lo_hi[_interior]x...") from None
        self.config = [(c + (0,))[:3] if len(c) == 2 else c for c in self.config]
        if len(self.config) != self.operand_shape(0).rank or any(len(c) != 3 or c[2] < 0 for c in self.config):
            raise self.error(f"padding={text!r} does not fit the operand {self.operand_shape(0)}")
        for axis, (dim, (low, high, interior)) in enumerate(zip(self.operand_shape(0).dims, self.config)):
            if dim >= 0 and dim + max(dim - 1, 0) * interior + low + high < 0:
                raise self.error(f"padding {low}_{high}_{interior} of dim {axis} crops more than its {dim} element(s)")

    def forward(self, x, value):
        xp = self.xp
        grown = []
        keep = []
        for dim, (low, high, interior) in zip(x.shape, self.config):
            dilated = dim + max(dim - 1, 0) * interior
            before, after = max(low, 0), max(high, 0)
            grown.append(before + dilated + after)
            keep.append(slice(-low if low < 0 else 0, before + dilated + after - (-high if high < 0 else 0)))
        check_size(grown, x.dtype.itemsize, self.node.describe())
        result = xp.full(tuple(grown), value, dtype=x.dtype)
        place = tuple(
            slice(max(low, 0), max(low, 0) + max(dim + max(dim - 1, 0) * interior, 0), interior + 1)
            for dim, (low, _, interior) in zip(x.shape, self.config)
        )
        result[place] = x
        return result[tuple(keep)]


class Concatenate(HloOp):
    types = ("hlo.concatenate",)

    def hlo_setup(self):
        (self.axis,) = self.ints("dimensions")

    def forward(self, *inputs):
        return self.xp.concat(inputs, axis=self.axis)


class Reverse(HloOp):
    types = ("hlo.reverse",)

    def hlo_setup(self):
        self.axes = self.ints("dimensions")

    def forward(self, x):
        return self.xp.flip(x, axis=self.axes) if self.axes else x


class Identity(HloOp):
    """Copies, barriers, and collectives on one device (every participant is this one): data passes through."""

    types = tuple(
        f"hlo.{opcode}" for opcode in (
            "all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
            "optimization-barrier", "copy-start", "copy-done", "copy",
        )
    )

    def forward(self, *inputs):
        return inputs[0] if len(inputs) == 1 else tuple(inputs)


class DeviceId(HloOp):
    types = ("hlo.replica-id", "hlo.partition-id")

    def forward(self):
        return self.xp.zeros((), dtype=self.dtype())


OPS = [Constant, Iota, Broadcast, Reshape, Transpose, Bitcast, SliceOp, DynamicSlice, DynamicUpdateSlice, Pad,
       Concatenate, Reverse, Identity, DeviceId]
