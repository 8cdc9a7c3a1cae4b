"""Shape ops: a tensor's dims change, its elements (in order) do not.

reshape/view, flatten/unflatten, squeeze/unsqueeze, identity; and the helpers the
shape-taking ops share.  Reordering elements (transpose, flip, roll) lives in
``reorder.py``, repeating them (expand, repeat, tile) in ``repeat.py``, slicing and
indexing in ``slicing.py``, joining and splitting in ``concat.py``.

Shape-like arguments come either as a param (``shape=(-1,60)``) or, in
graphs exported with dynamic shapes, as an input bound to ``$shape`` /
``$sizes`` that a ``pnnx.Expression`` computes at run time (a Python list of
ints such as ``[size(@0,0),3,-1]``); :func:`int_list` accepts both.
"""

from __future__ import annotations

import operator

import numpy as np  # to tell, when specializing, whether a reshape of the sample is a view; never to compute

from ..errors import ShapeError
from .base import Op, normalize_axis, prod
from .params import Int, Ints
from .specialize import same_shape


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
    """An op whose shape-like argument ``shape_key`` is a param, or an input bound to ``$shape_key``.

    Subclasses set ``shape_key`` and call ``self.data_and_shape_arg(inputs)`` in forward.
    """

    shape_key: str

    def setup(self):
        key = self.shape_key
        self.require_inputs(1, 2)
        self.data_index = data_input_index(self)
        self.shape_index = self.input_index(key)
        if self.shape_index is None:
            if len(self.node.inputs) != 1:
                raise self.error(f"has {len(self.node.inputs)} inputs but none is bound to ${key}")
            self.shape_value = self.ints_param(key)
        else:
            self.shape_value = None

    def data_and_shape_arg(self, inputs):
        """(the data input, the shape argument as a tuple of ints) for this call."""
        if self.shape_index is None:
            return inputs[self.data_index], self.shape_value
        return inputs[self.data_index], int_list(self, inputs[self.shape_index], f"input ${self.shape_key}")


class DimsOp(Op):
    """A one-input op whose ``dims`` param is a list of dims (permute, flip, tile)."""

    arity = 1
    params = (Ints("dims"),)


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
    rearranges = True
    shape_key = "shape"

    _last_resolved: tuple = ((), None, None)  # (input shape, shape argument, resolved shape) of the latest call

    def forward(self, *inputs):
        x, shape = self.data_and_shape_arg(inputs)
        # A model reshapes the same input shape call after call: resolve the -1 once per new shape
        # (one tuple swapped whole, so concurrent calls read a consistent entry).
        last_input, last_argument, resolved = self._last_resolved
        if x.shape != last_input or shape != last_argument:
            resolved = resolve_shape(self, shape, prod(x.shape), f"shape {tuple(x.shape)}")
            self._last_resolved = (x.shape, shape, resolved)
        return self.xp.reshape(x, resolved)

    def specialized(self, inputs):
        """The input's own reshape to the shape resolved for it, while the input keeps that shape."""
        seen, _, resolved = self._last_resolved
        sample = inputs[0] if inputs else None
        if self.shape_index is not None or sample is None or getattr(sample, "shape", None) != seen:
            return None
        strides = getattr(sample, "strides", None)
        if not isinstance(sample, np.ndarray) or np.shares_memory(sample.reshape(resolved), sample):
            return same_shape(sample, lambda x: x.reshape(resolved), self.forward)

        # The sample's layout is one no view reshapes (a transposed map flattened): where an input lies so,
        # the copy goes into an array of the op's own (``Op.empty``: the memory plan's), as NumPy's would.
        def reshape(x):
            if x.strides != strides:
                return x.reshape(resolved)
            out = self.empty(resolved, x.dtype)
            out.reshape(x.shape)[...] = x
            return out

        return same_shape(sample, reshape, self.forward)


class LikeOther(Op):
    """An op that takes a property of ``$other`` (its shape, its dtype) onto ``$input``."""

    input_names = ("input", "other")


class ReshapeAs(LikeOther):
    types = ("ReshapeAs",)

    def forward(self, *inputs):
        x, other = self.ordered(inputs)
        shape = resolve_shape(self, tuple(other.shape), prod(x.shape), f"shape {tuple(x.shape)}")
        return self.xp.reshape(x, shape)


class Flatten(Op):
    types = ("Flatten",)
    rearranges = True
    arity = 1
    params = (Int("start_dim", default=0), Int("end_dim", default=-1))

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
    rearranges = True
    arity = 1
    params = (Int("dim"), Ints("sizes"))

    def forward(self, x):
        axis = normalize_axis(self.dim, x.ndim, self)
        sizes = resolve_shape(self, self.sizes, x.shape[axis], f"dim {self.dim} of size {x.shape[axis]}")
        return self.xp.reshape(x, tuple(x.shape[:axis]) + sizes + tuple(x.shape[axis + 1 :]))


class Squeeze(Op):
    """Drop size-1 dims: all of them (no ``dim``), or the listed ones that have size 1."""

    types = ("Squeeze",)
    rearranges = True
    arity = 1
    params = (Ints("dim", default=None, attr="dims"),)

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
    rearranges = True
    arity = 1
    params = (Int("dim"),)

    def forward(self, x):
        axis = normalize_axis(self.dim, x.ndim + 1, self)
        return self.xp.expand_dims(x, axis=axis)


class Identity(Op):
    """The input itself: arrays are values here, so PyTorch's layout hints and copies (contiguous,
    clone, positive) and HLO's copies, barriers and single-device collectives are all this."""

    types = ("Identity",)
    rearranges = True
    arity = 1

    def forward(self, x):
        return x


OPS = [Reshape, ReshapeAs, Flatten, Unflatten, Squeeze, Unsqueeze, Identity]
