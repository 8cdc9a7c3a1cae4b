"""Repeating ops: expand (a broadcast view), repeat, tile, repeat_interleave.

Shape-like arguments come as a param or as an input a ``pnnx.Expression`` computes
(see ``shape.int_list``).
"""

from __future__ import annotations

from ..errors import ShapeError
from ..ir import dtypes
from ..limits import check_size
from .base import Op, normalize_axis, prod
from .params import Ints
from .shape import DimsOp, LikeOther, ShapeArgOp, data_input_index


class Expand(ShapeArgOp):
    """Tensor.expand(sizes): broadcast size-1 dims; -1 keeps a dim; new dims go in front."""

    types = ("Expand",)
    shape_key = "sizes"

    def forward(self, *inputs):
        x, sizes = self.data_and_shape_arg(inputs)
        lead = len(sizes) - x.ndim
        if lead < 0:
            raise ShapeError(f"{self.node.describe()}: sizes {list(sizes)} have fewer dims than the input {tuple(x.shape)}")
        shape = []
        for i, size in enumerate(sizes):
            if size == -1:
                if i < lead:
                    raise ShapeError(f"{self.node.describe()}: -1 is not allowed for a new leading dim in {list(sizes)}")
                size = x.shape[i - lead]
            elif i >= lead and x.shape[i - lead] not in (1, size):
                raise ShapeError(
                    f"{self.node.describe()}: cannot expand dim {i - lead} of size {x.shape[i - lead]} to {size}"
                )
            shape.append(size)
        return self.xp.broadcast_to(x, tuple(shape))


class ExpandAs(LikeOther):
    types = ("ExpandAs",)

    def forward(self, *inputs):
        x, other = self.ordered(inputs)
        try:
            return self.xp.broadcast_to(x, tuple(other.shape))
        except ValueError:
            raise ShapeError(f"{self.node.describe()}: cannot expand {tuple(x.shape)} to {tuple(other.shape)}") from None


class Repeat(ShapeArgOp):
    """Tensor.repeat(sizes): tile; ``sizes`` may be longer than the rank (new leading dims)."""

    types = ("Repeat",)
    shape_key = "sizes"

    def forward(self, *inputs):
        x, sizes = self.data_and_shape_arg(inputs)
        if len(sizes) < x.ndim or any(s < 0 for s in sizes):
            raise ShapeError(
                f"{self.node.describe()}: repeat sizes {list(sizes)} must be non-negative, one per dim of {tuple(x.shape)} or more"
            )
        x = self.xp.reshape(x, (1,) * (len(sizes) - x.ndim) + tuple(x.shape))
        check_size(tuple(s * d for s, d in zip(sizes, x.shape)), dtypes.itemsize(x.dtype), self.node.describe())
        return self.xp.tile(x, sizes)


class Tile(DimsOp):
    """torch.tile(dims): like repeat, but a short ``dims`` is padded with leading 1s."""

    types = ("Tile",)
    params = (Ints("dims", low=0),)

    def forward(self, x):
        rank = max(x.ndim, len(self.dims))
        x = self.xp.reshape(x, (1,) * (rank - x.ndim) + tuple(x.shape))
        reps = (1,) * (rank - len(self.dims)) + self.dims
        check_size(tuple(r * d for r, d in zip(reps, x.shape)), dtypes.itemsize(x.dtype), self.node.describe())
        return self.xp.tile(x, reps)


class RepeatInterleave(Op):
    """torch.repeat_interleave with an int ``repeats`` or a tensor of per-element repeats bound to
    ``$repeats``; without ``dim`` the input is flattened first."""

    types = ("RepeatInterleave",)

    def setup(self):
        self.dim = self.optional_int_param("dim")
        self.data_index = data_input_index(self)
        self.repeats_index = self.input_index("repeats")
        if self.repeats_index is not None:
            self.require_inputs(2)
            return
        self.require_inputs(1)
        repeats = self.param("repeats")
        if isinstance(repeats, list) and len(repeats) == 1:
            repeats = repeats[0]
        if isinstance(repeats, bool) or not isinstance(repeats, int):
            raise self.unsupported("repeats", repeats, "a single non-negative integer, or a tensor input $repeats")
        if repeats < 0:
            raise self.error(f"param 'repeats' must be non-negative, found {repeats}")
        self.repeats = repeats

    def forward(self, *inputs):
        xp = self.xp
        x = inputs[self.data_index]
        repeats = self.repeats if self.repeats_index is None else self._repeat_counts(inputs[self.repeats_index])
        largest = repeats if isinstance(repeats, int) else (int(xp.max(repeats)) if repeats.size else 0)
        check_size((prod(x.shape), largest), dtypes.itemsize(x.dtype), self.node.describe())  # an upper bound
        if self.dim is None:
            return xp.repeat(xp.reshape(x, (-1,)), repeats, axis=0)
        axis = normalize_axis(self.dim, x.ndim, self)
        if not isinstance(repeats, int) and repeats.shape[0] not in (1, x.shape[axis]):
            raise ShapeError(f"{self.node.describe()}: {repeats.shape[0]} repeats for dim {self.dim} of size {x.shape[axis]}")
        return xp.repeat(x, repeats, axis=axis)

    def _repeat_counts(self, repeats):
        xp = self.xp
        if not xp.isdtype(repeats.dtype, "integral") or repeats.ndim > 1:
            raise ShapeError(f"{self.node.describe()}: repeats must be a 0-d or 1-d integer tensor, "
                             f"found {tuple(repeats.shape)} {repeats.dtype}")
        if repeats.size and int(xp.min(repeats)) < 0:
            raise ShapeError(f"{self.node.describe()}: repeats must be non-negative")
        return int(repeats) if repeats.ndim == 0 else repeats


OPS = [Expand, ExpandAs, Repeat, Tile, RepeatInterleave]
