"""Reordering ops: the same elements in another order (transpose, reverse, roll)."""

from __future__ import annotations

from ..errors import ShapeError
from .base import Op, normalize_axis
from .params import Int, Ints
from .shape import DimsOp
from .specialize import same_shape


class Permute(DimsOp):
    """torch.permute, and the canonical Transpose: ``dims`` is the permutation (result dim i is input dim dims[i])."""

    types = ("Transpose",)
    rearranges = True

    def forward(self, x):
        if len(self.dims) != x.ndim:
            raise ShapeError(f"{self.node.describe()}: dims {list(self.dims)} do not match an input of rank {x.ndim}")
        axes = tuple(normalize_axis(d, x.ndim, self) for d in self.dims)
        if len(set(axes)) != len(axes):
            raise self.error(f"param 'dims' repeats a dim: {list(self.dims)}")
        return self.xp.permute_dims(x, axes)

    def specialized(self, inputs):
        """The input's own transpose by the axes resolved for its rank."""
        x = inputs[0]
        if len(self.dims) != getattr(x, "ndim", -1):
            return None
        axes = tuple(normalize_axis(d, x.ndim, self) for d in self.dims)
        return same_shape(x, lambda value: value.transpose(axes), self.forward)


class Transpose(Op):
    types = ("SwapAxes",)
    rearranges = True
    arity = 1
    params = (Int("dim0"), Int("dim1"))

    def forward(self, x):
        a = normalize_axis(self.dim0, x.ndim, self)
        b = normalize_axis(self.dim1, x.ndim, self)
        axes = list(range(x.ndim))
        axes[a], axes[b] = axes[b], axes[a]
        return self.xp.permute_dims(x, tuple(axes))


class MatrixTranspose(Op):
    """torch.t: transposes a 2-D tensor; 0-D and 1-D come back unchanged."""

    types = ("MatrixTranspose",)
    rearranges = True
    arity = 1

    def forward(self, x):
        if x.ndim > 2:
            raise ShapeError(f"{self.node.describe()}: expects a tensor of rank <= 2, found shape {tuple(x.shape)}")
        return x if x.ndim < 2 else self.xp.permute_dims(x, (1, 0))


class Flip(DimsOp):
    """torch.flip, and the canonical Reverse: ``dims`` are the dims reversed."""

    types = ("Reverse",)
    rearranges = True

    def forward(self, x):
        axes = tuple(sorted({normalize_axis(d, x.ndim, self) for d in self.dims}))
        return self.xp.flip(x, axis=axes) if axes else x


class Roll(Op):
    """torch.roll: shift along dims; without dims the flattened tensor is rolled."""

    types = ("Roll",)
    rearranges = True
    arity = 1
    params = (Ints("shifts"), Ints("dims", default=None))

    def setup(self):
        if self.dims is None and len(self.shifts) != 1:
            raise self.error(f"without 'dims', 'shifts' must be one integer, found {list(self.shifts)}")
        if self.dims is not None and len(self.dims) != len(self.shifts):
            raise self.error(f"'shifts' {list(self.shifts)} and 'dims' {list(self.dims)} differ in length")

    def forward(self, x):
        xp = self.xp
        if self.dims is None:
            return xp.reshape(xp.roll(xp.reshape(x, (-1,)), self.shifts[0]), tuple(x.shape))
        axes = tuple(normalize_axis(d, x.ndim, self) for d in self.dims)
        return xp.roll(x, self.shifts, axis=axes)


OPS = [Permute, Transpose, MatrixTranspose, Flip, Roll]
