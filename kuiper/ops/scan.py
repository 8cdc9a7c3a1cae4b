"""Scans and top-k along one dim: torch.cumsum, torch.cumprod, torch.topk.

pnnx writes ``dim`` (negative counts from the end) and, for topk, ``k``,
``largest`` and ``sorted``.  As in PyTorch, scans of bool or integer tensors give
int64.  topk returns the values and their int64 positions; equal values keep
their order of appearance (a stable sort).  ``sorted=False`` leaves the order to
the implementation in PyTorch; here the k values come sorted as well.
"""

from __future__ import annotations

from ..errors import ShapeError
from .base import Op, normalize_axis
from .params import Bool, Choice, Int


class Scan(Op):
    types = ("CumulativeScan",)
    arity = 1
    params = (Int("dim"), Choice("reduction", ("sum", "prod")))

    def forward(self, x):
        xp = self.xp
        axis = normalize_axis(self.dim, max(x.ndim, 1), self)  # a 0-d tensor scans as one element
        dtype = x.dtype if xp.isdtype(x.dtype, ("real floating", "complex floating")) else xp.int64
        if xp.isdtype(x.dtype, "bool"):
            x = xp.astype(x, dtype)  # the standard's scans take numbers only
        scan = xp.cumulative_prod if self.reduction == "prod" else xp.cumulative_sum
        return xp.reshape(scan(xp.reshape(x, tuple(x.shape) or (1,)), axis=axis, dtype=dtype), tuple(x.shape))


class TopK(Op):
    types = ("TopKDim",)
    arity = 1
    params = (Int("k", low=0), Int("dim", default=-1), Bool("largest", default=True),
              Bool("sorted", default=True))  # sorted: validated; the result is always sorted

    def setup(self):
        if len(self.node.outputs) != 2:
            raise self.error(f"gives values and indices: 2 outputs, the file declares {len(self.node.outputs)}")

    def forward(self, x):
        xp = self.xp
        axis = normalize_axis(self.dim, max(x.ndim, 1), self)
        size = x.shape[axis] if x.ndim else 1
        if self.k > size:
            raise ShapeError(f"{self.node.describe()}: k={self.k} is larger than dim {self.dim} of size {size}")
        if x.ndim == 0:
            return x, xp.zeros((), dtype=xp.int64)
        order = xp.argsort(x, axis=axis, descending=self.largest, stable=True)
        key = [slice(None)] * x.ndim
        key[axis] = slice(0, self.k)
        indices = xp.astype(order[tuple(key)], xp.int64)
        return xp.take_along_axis(x, indices, axis=axis), indices


OPS = [Scan, TopK]
