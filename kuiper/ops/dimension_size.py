"""Ops on the sizes of dims known at run time: DimensionSize, SetDimensionSize, ReshapeToSizes.

A frontend with bounded dynamic dims (XLA's ``f32[<=8]``) writes the bound in the file and the
size in a run-time scalar; kuiper holds each array at its true size, so these ops read, cut and
reshape to that size.
"""

from __future__ import annotations

from ..errors import ShapeError
from .base import Op
from .params import DType, Int, Ints


class DimensionSize(Op):
    """The size of dim ``dim`` of the input, as a scalar of ``dtype``."""

    types = ("DimensionSize",)
    arity = 1
    fresh_output = True
    params = (Int("dim", low=0), DType("dtype", "int32"))

    def forward(self, x):
        if self.dim >= x.ndim:
            raise ShapeError(f"{self.node.describe()}: dim {self.dim} is out of range for an input of shape {x.shape}")
        return self.xp.asarray(x.shape[self.dim], dtype=self.dtype)


class SetDimensionSize(Op):
    """Inputs ``x, size``: x with dim ``dim`` cut to ``size`` (at most the size it has)."""

    types = ("SetDimensionSize",)
    arity = 2
    params = (Int("dim", low=0),)

    def forward(self, x, size):
        size = int(size)
        if self.dim >= x.ndim or not 0 <= size <= x.shape[self.dim]:
            raise ShapeError(f"{self.node.describe()}: cannot set dim {self.dim} of an input of shape {x.shape} "
                             f"to size {size}")
        index = [slice(None)] * x.ndim
        index[self.dim] = slice(0, size)
        return x[tuple(index)]


class ReshapeToSizes(Op):
    """Inputs ``x, size0, size1, ...``: x reshaped to the run-time sizes, each at most its ``bounds`` entry."""

    types = ("ReshapeToSizes",)

    params = (Ints("bounds", low=0),)

    def setup(self):
        self.require_inputs(1 + len(self.bounds))

    def forward(self, x, *sizes):
        shape = tuple(int(size) for size in sizes)
        count = 1
        for size in shape:
            count *= size
        if any(not 0 <= s <= b for s, b in zip(shape, self.bounds)) or count != x.size:
            raise ShapeError(f"{self.node.describe()}: cannot reshape an input of shape {x.shape} to {shape} "
                             f"(bounds {list(self.bounds)})")
        return self.xp.reshape(x, shape)


OPS = [DimensionSize, SetDimensionSize, ReshapeToSizes]
