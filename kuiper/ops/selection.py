"""Selection and scattering: torch.masked_select, torch.diag, torch.scatter_add, torch.slice_scatter.

pnnx binds the tensors by name (``$input``, ``$mask``, ``$index``, ``$src``); the
rest are params.  Scatters never change their input: they work on a copy.
"""

from __future__ import annotations

from ..errors import ShapeError
from ..ir import dtypes
from ..limits import check_size
from .base import Op, is_to_the_end, normalize_axis
from .params import Int


class MaskedSelect(Op):
    """The elements of ``input`` where ``mask`` (broadcast together) is True, as a 1-D tensor."""

    types = ("MaskedSelect",)
    input_names = ("input", "mask")

    def forward(self, *inputs):
        xp = self.xp
        x, mask = xp.broadcast_arrays(*self.ordered(inputs))
        if not xp.isdtype(mask.dtype, "bool"):
            raise ShapeError(f"{self.node.describe()}: mask must be bool, found {mask.dtype}")
        return x[mask]


class Diag(Op):
    """torch.diag: a vector becomes a square matrix with it on diagonal ``diagonal``; a matrix gives that diagonal."""

    types = ("Diag",)
    arity = 1
    params = (Int("diagonal", default=0),)

    def forward(self, x):
        xp = self.xp
        k = self.diagonal
        if x.ndim == 1:
            n = x.shape[0]
            size = n + abs(k)
            check_size((size, size), dtypes.itemsize(x.dtype), self.node.describe())  # n + |diagonal| squared
            out = xp.zeros((size * size,), dtype=x.dtype)
            steps = xp.arange(n)
            self.backend.put(out, (steps + max(-k, 0)) * size + steps + max(k, 0), x)
            return xp.reshape(out, (size, size))
        if x.ndim == 2:
            length = max(0, min(x.shape[0] - max(-k, 0), x.shape[1] - max(k, 0)))
            steps = xp.arange(length)
            return x[steps + max(-k, 0), steps + max(k, 0)]
        raise ShapeError(f"{self.node.describe()}: expects a 1-D or 2-D input, found shape {tuple(x.shape)}")


def _flat_positions(xp, index, axis: int, shape) -> object:
    """Row-major positions in an array of ``shape`` of each element of ``index``, with dim ``axis`` replaced by its value."""
    position = xp.zeros(index.shape, dtype=xp.int64)
    stride = 1
    for dim in reversed(range(len(shape))):
        if dim == axis:
            coordinate = index
        else:
            view = [1] * index.ndim
            view[dim] = index.shape[dim]
            coordinate = xp.reshape(xp.arange(index.shape[dim], dtype=xp.int64), tuple(view))
        position = position + coordinate * stride
        stride *= shape[dim]
    return position


class ScatterAdd(Op):
    """torch.scatter_add(input, dim, index, src): out[..., index[i], ...] += src[i] along ``dim``.

    ``index`` may be smaller than ``src`` (only its leading part is used) and than ``input``
    in the other dims, as in PyTorch.
    """

    types = ("ScatterAdd",)
    input_names = ("input", "index", "src")
    params = (Int("dim"),)

    def forward(self, *inputs):
        xp = self.xp
        x, index, src = self.ordered(inputs)
        axis = normalize_axis(self.dim, x.ndim, self)
        fits = index.ndim == x.ndim == src.ndim and all(
            n <= s and (d == axis or n <= i) for d, (n, s, i) in enumerate(zip(index.shape, src.shape, x.shape))
        )
        if not fits:
            raise ShapeError(f"{self.node.describe()}: index {tuple(index.shape)} must fit in src "
                             f"{tuple(src.shape)} and, except in dim {self.dim}, in input {tuple(x.shape)}")
        if index.size and (int(xp.min(index)) < 0 or int(xp.max(index)) >= x.shape[axis]):
            raise ShapeError(f"{self.node.describe()}: index values must lie in [0, {x.shape[axis]}) for dim {self.dim}")
        positions = _flat_positions(xp, xp.astype(index, xp.int64), axis, tuple(x.shape))
        values = src[tuple(slice(0, n) for n in index.shape)]
        out = xp.reshape(xp.asarray(x, copy=True), (-1,))
        self.backend.scatter_add(out, xp.reshape(positions, (-1,)), xp.reshape(xp.astype(values, x.dtype), (-1,)))
        return xp.reshape(out, tuple(x.shape))


class SliceScatter(Op):
    """torch.slice_scatter(input, src, dim, start, end, step): a copy of input with ``src`` in that slice."""

    types = ("SliceScatter",)
    input_names = ("input", "src")
    params = (Int("dim", default=0), Int("start", default=None), Int("end", default=None),
              Int("step", default=1, low=1))

    def setup(self):
        if self.end is not None and is_to_the_end(self.end):
            self.end = None

    def forward(self, *inputs):
        xp = self.xp
        x, src = self.ordered(inputs)
        axis = normalize_axis(self.dim, x.ndim, self)
        key = [slice(None)] * x.ndim
        key[axis] = slice(self.start, self.end, self.step)
        key = tuple(key)
        out = xp.asarray(x, copy=True)
        target_shape = tuple(out[key].shape)
        if tuple(src.shape) != target_shape:
            raise ShapeError(f"{self.node.describe()}: src has shape {tuple(src.shape)}, the slice {target_shape}")
        out[key] = src
        return out


OPS = [MaskedSelect, Diag, ScatterAdd, SliceScatter]
