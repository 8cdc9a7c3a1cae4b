"""Shape and data movement: ops that rearrange elements without arithmetic.

reshape/view, permute/transpose, squeeze/unsqueeze, flatten/unflatten,
expand/repeat/tile, flip/roll.  Slicing and indexing live in ``slicing.py``,
joining and splitting in ``concat.py``.

Shape-like arguments come either as a param (``shape=(-1,60)``) or, in
graphs exported with dynamic shapes, as an input bound to ``$shape`` /
``$sizes`` that a ``pnnx.Expression`` computes at run time (a Python list of
ints such as ``[size(@0,0),3,-1]``); :func:`int_list` accepts both.
"""

from __future__ import annotations

import operator

from ..errors import ShapeError
from ..limits import check_size
from .base import Op, normalize_axis, prod


def int_list(op: Op, value, what: str) -> tuple[int, ...]:
    """A shape-like value as Python ints.

    Accepts an int, a list/tuple of ints (also NumPy integers or 0-d backend
    arrays, as an expression may produce) or a 1-D integer backend array.
    """
    backend = op.backend
    if backend.is_array(value):
        value = backend.to_numpy(value).tolist()
    if isinstance(value, (list, tuple)):
        items = value
    else:
        items = [value]
    result = []
    for item in items:
        if backend.is_array(item):
            item = backend.to_numpy(item)
            if item.size != 1:
                raise op.error(f"{what} must hold integers, found an array of shape {tuple(item.shape)}")
            item = item.reshape(()).item()
        if isinstance(item, bool):
            raise op.error(f"{what} must hold integers, found {value!r}")
        try:
            result.append(operator.index(item))
        except TypeError:
            raise op.error(f"{what} must hold integers, found {value!r}") from None
    return tuple(result)


def data_input_index(op: Op) -> int:
    """Position of the tensor being reshaped: ``$input`` if named, else the first input."""
    return op.input_index("input", 0)


class ShapeArgOp(Op):
    """An op whose shape-like argument ``key`` is a param, or an input bound to ``$key``.

    Subclasses call ``self.read_shape_arg(...)`` in setup and
    ``self.shape_arg(inputs)`` in forward.
    """

    def read_shape_arg(self, key: str) -> None:
        self.require_inputs(1, 2)
        self.shape_key = key
        self.data_index = data_input_index(self)
        self.shape_index = self.input_index(key)
        if self.shape_index is None:
            if len(self.node.inputs) != 1:
                raise self.error(f"has {len(self.node.inputs)} inputs but none is bound to ${key}")
            self.shape_value = self.ints_param(key)
        else:
            self.shape_value = None

    def shape_arg(self, inputs) -> tuple[int, ...]:
        if self.shape_index is None:
            return self.shape_value
        return int_list(self, inputs[self.shape_index], f"input ${self.shape_key}")


def resolve_shape(op: Op, shape: tuple[int, ...], size: int, where: str) -> tuple[int, ...]:
    """PyTorch's reshape rule: at most one -1, inferred from the element count."""
    unknown = [i for i, d in enumerate(shape) if d == -1]
    if len(unknown) > 1 or any(d < -1 for d in shape):
        raise ShapeError(f"{op.node.describe()}: invalid target shape {list(shape)}")
    known = prod(d for d in shape if d != -1)
    if unknown:
        if known == 0 or size % known:
            raise ShapeError(f"{op.node.describe()}: cannot reshape {where} into {list(shape)}")
        shape = tuple(size // known if d == -1 else d for d in shape)
    elif known != size:
        raise ShapeError(f"{op.node.describe()}: cannot reshape {where} into {list(shape)}")
    return shape


class Reshape(ShapeArgOp):
    """Tensor.reshape / Tensor.view and the canonical Reshape: ``shape`` param, or a ``$shape`` input
    from an expression."""

    types = ("Reshape",)

    def setup(self):
        self.read_shape_arg("shape")

    def forward(self, *inputs):
        x = inputs[self.data_index]
        shape = resolve_shape(self, self.shape_arg(inputs), prod(x.shape), f"shape {tuple(x.shape)}")
        return self.xp.reshape(x, shape)


class ReshapeAs(Op):
    types = ("ReshapeAs",)

    def setup(self):
        self.require_inputs(2)
        self.data_index = data_input_index(self)
        self.other_index = self.input_index("other", 1 - self.data_index)

    def forward(self, *inputs):
        x, other = inputs[self.data_index], inputs[self.other_index]
        shape = resolve_shape(self, tuple(other.shape), prod(x.shape), f"shape {tuple(x.shape)}")
        return self.xp.reshape(x, shape)


class Flatten(Op):
    types = ("Flatten",)

    def setup(self):
        self.require_inputs(1)
        self.start_dim = self.int_param("start_dim", default=0)
        self.end_dim = self.int_param("end_dim", default=-1)

    def forward(self, x):
        if x.ndim == 0:
            return self.xp.reshape(x, (1,))
        start = normalize_axis(self.start_dim, x.ndim, self)
        end = normalize_axis(self.end_dim, x.ndim, self)
        if start > end:
            raise self.error(f"start_dim {self.start_dim} comes after end_dim {self.end_dim} for rank {x.ndim}")
        shape = tuple(x.shape[:start]) + (prod(x.shape[start : end + 1]),) + tuple(x.shape[end + 1 :])
        return self.xp.reshape(x, shape)


class Unflatten(Op):
    """Tensor.unflatten(dim, sizes): split one dim into several; one size may be -1."""

    types = ("Unflatten",)

    def setup(self):
        self.require_inputs(1)
        self.dim = self.int_param("dim")
        self.sizes = self.ints_param("sizes")

    def forward(self, x):
        axis = normalize_axis(self.dim, x.ndim, self)
        sizes = resolve_shape(self, self.sizes, x.shape[axis], f"dim {self.dim} of size {x.shape[axis]}")
        return self.xp.reshape(x, tuple(x.shape[:axis]) + sizes + tuple(x.shape[axis + 1 :]))


class Permute(Op):
    """torch.permute, and the canonical Transpose: ``dims`` is the permutation (result dim i is input dim dims[i])."""

    types = ("Transpose",)

    def setup(self):
        self.require_inputs(1)
        self.dims = self.ints_param("dims")

    def forward(self, x):
        if len(self.dims) != x.ndim:
            raise ShapeError(f"{self.node.describe()}: dims {list(self.dims)} do not match an input of rank {x.ndim}")
        axes = tuple(normalize_axis(d, x.ndim, self) for d in self.dims)
        if len(set(axes)) != len(axes):
            raise self.error(f"param 'dims' repeats a dim: {list(self.dims)}")
        return self.xp.permute_dims(x, axes)


class Transpose(Op):
    types = ("SwapAxes",)

    def setup(self):
        self.require_inputs(1)
        self.dim0 = self.int_param("dim0")
        self.dim1 = self.int_param("dim1")

    def forward(self, x):
        a = normalize_axis(self.dim0, x.ndim, self)
        b = normalize_axis(self.dim1, x.ndim, self)
        axes = list(range(x.ndim))
        axes[a], axes[b] = axes[b], axes[a]
        return self.xp.permute_dims(x, tuple(axes))


class MatrixTranspose(Op):
    """torch.t: transposes a 2-D tensor; 0-D and 1-D come back unchanged."""

    types = ("MatrixTranspose",)

    def setup(self):
        self.require_inputs(1)

    def forward(self, x):
        if x.ndim > 2:
            raise ShapeError(f"{self.node.describe()}: expects a tensor of rank <= 2, found shape {tuple(x.shape)}")
        return x if x.ndim < 2 else self.xp.permute_dims(x, (1, 0))


class Squeeze(Op):
    """Drop size-1 dims: all of them (no ``dim``), or the listed ones that have size 1."""

    types = ("Squeeze",)

    def setup(self):
        self.require_inputs(1)
        self.dims = None if self.param("dim", None) is None else self.ints_param("dim")

    def forward(self, x):
        if self.dims is None:
            axes = tuple(i for i, size in enumerate(x.shape) if size == 1)
        else:
            rank = max(x.ndim, 1)  # PyTorch lets a 0-d tensor squeeze dim 0 / -1
            axes = {normalize_axis(d, rank, self) for d in self.dims}
            axes = tuple(sorted(a for a in axes if a < x.ndim and x.shape[a] == 1))
        return self.xp.squeeze(x, axis=axes) if axes else x


class Unsqueeze(Op):
    types = ("Unsqueeze",)

    def setup(self):
        self.require_inputs(1)
        self.dim = self.int_param("dim")

    def forward(self, x):
        axis = normalize_axis(self.dim, x.ndim + 1, self)
        return self.xp.expand_dims(x, axis=axis)


class Expand(ShapeArgOp):
    """Tensor.expand(sizes): broadcast size-1 dims; -1 keeps a dim; new dims go in front."""

    types = ("Expand",)

    def setup(self):
        self.read_shape_arg("sizes")

    def forward(self, *inputs):
        x = inputs[self.data_index]
        sizes = self.shape_arg(inputs)
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


class ExpandAs(Op):
    types = ("ExpandAs",)

    def setup(self):
        self.require_inputs(2)
        self.data_index = data_input_index(self)
        self.other_index = self.input_index("other", 1 - self.data_index)

    def forward(self, *inputs):
        x, other = inputs[self.data_index], inputs[self.other_index]
        try:
            return self.xp.broadcast_to(x, tuple(other.shape))
        except ValueError:
            raise ShapeError(f"{self.node.describe()}: cannot expand {tuple(x.shape)} to {tuple(other.shape)}") from None


class Repeat(ShapeArgOp):
    """Tensor.repeat(sizes): tile; ``sizes`` may be longer than the rank (new leading dims)."""

    types = ("Repeat",)

    def setup(self):
        self.read_shape_arg("sizes")

    def forward(self, *inputs):
        x = inputs[self.data_index]
        sizes = self.shape_arg(inputs)
        if len(sizes) < x.ndim or any(s < 0 for s in sizes):
            raise ShapeError(
                f"{self.node.describe()}: repeat sizes {list(sizes)} must be non-negative, one per dim of {tuple(x.shape)} or more"
            )
        x = self.xp.reshape(x, (1,) * (len(sizes) - x.ndim) + tuple(x.shape))
        check_size(tuple(s * d for s, d in zip(sizes, x.shape)), x.dtype.itemsize, self.node.describe())
        return self.xp.tile(x, sizes)


class Tile(Op):
    """torch.tile(dims): like repeat, but a short ``dims`` is padded with leading 1s."""

    types = ("Tile",)

    def setup(self):
        self.require_inputs(1)
        self.dims = self.ints_param("dims")
        if any(d < 0 for d in self.dims):
            raise self.error(f"param 'dims' must be non-negative, found {list(self.dims)}")

    def forward(self, x):
        rank = max(x.ndim, len(self.dims))
        x = self.xp.reshape(x, (1,) * (rank - x.ndim) + tuple(x.shape))
        reps = (1,) * (rank - len(self.dims)) + self.dims
        check_size(tuple(r * d for r, d in zip(reps, x.shape)), x.dtype.itemsize, self.node.describe())
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
        check_size((prod(x.shape), largest), x.dtype.itemsize, self.node.describe())  # an upper bound
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


class Flip(Op):
    """torch.flip, and the canonical Reverse: ``dims`` are the dims reversed."""

    types = ("Reverse",)

    def setup(self):
        self.require_inputs(1)
        self.dims = self.ints_param("dims")

    def forward(self, x):
        axes = tuple(sorted({normalize_axis(d, x.ndim, self) for d in self.dims}))
        return self.xp.flip(x, axis=axes) if axes else x


class Roll(Op):
    """torch.roll: shift along dims; without dims the flattened tensor is rolled."""

    types = ("Roll",)

    def setup(self):
        self.require_inputs(1)
        self.shifts = self.ints_param("shifts")
        self.dims = None if self.param("dims", None) is None else self.ints_param("dims")
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


class Contiguous(Op):
    """Tensor.contiguous: a layout hint in PyTorch, the identity here (arrays are immutable values);
    also the canonical Identity (copies, barriers, single-device collectives)."""

    types = ("Identity",)

    def setup(self):
        self.require_inputs(1)

    def forward(self, x):
        return x


OPS = [
    Reshape, ReshapeAs, Flatten, Unflatten, Permute, Transpose, MatrixTranspose, Squeeze, Unsqueeze,
    Expand, ExpandAs, Repeat, Tile, RepeatInterleave, Flip, Roll, Contiguous,
]
