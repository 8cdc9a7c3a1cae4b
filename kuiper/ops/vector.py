"""Products and distances of vectors along one dim: torch.cross, F.pairwise_distance."""

from __future__ import annotations

from ..errors import ShapeError
from .base import Op, normalize_axis
from .params import Bool, Float, Int


class Cross(Op):
    """torch.cross(input, other, dim): the 3-vector cross product along ``dim`` (inputs broadcast).

    Without ``dim`` (pnnx writes dim=None), PyTorch's deprecated default: the first dim of size 3.
    """

    types = ("Cross",)
    input_names = ("input", "other")
    params = (Int("dim", default=None),)

    def forward(self, *inputs):
        xp = self.xp
        a, b = xp.broadcast_arrays(*self.ordered(inputs))
        if self.dim is None:
            axis = next((axis for axis, size in enumerate(a.shape) if size == 3), None)
            if axis is None:
                raise ShapeError(f"{self.node.describe()}: no dim of size 3 in shape {tuple(a.shape)}")
        else:
            axis = normalize_axis(self.dim, a.ndim, self)
        if a.shape[axis] != 3:
            raise ShapeError(f"{self.node.describe()}: dim {self.dim} must have size 3, found shape {tuple(a.shape)}")
        a, b = xp.moveaxis(a, axis, -1), xp.moveaxis(b, axis, -1)
        a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
        b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
        product = xp.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)
        return xp.moveaxis(product, -1, axis)


class PairwiseDistance(Op):
    """F.pairwise_distance(x1, x2, p, eps, keepdim) = ||x1 - x2 + eps||_p over the last dim."""

    types = ("PairwiseDistance",)
    input_names = ("x1", "x2")
    params = (Float("p", default=2.0, low=0), Float("eps", default=1e-6), Bool("keepdim", default=False))

    def forward(self, *inputs):
        xp = self.xp
        x1, x2 = self.ordered(inputs)
        rank = max(x1.ndim, x2.ndim)
        difference = xp.abs(x1 - x2 + self.eps)
        if rank == 0:
            raise ShapeError(f"{self.node.describe()}: needs inputs of rank >= 1")
        p = self.p
        if p == 0:
            norm = xp.sum(xp.astype(difference != 0, difference.dtype), axis=-1, keepdims=self.keepdim)
        elif p == float("inf"):
            norm = xp.max(difference, axis=-1, keepdims=self.keepdim)
        elif p == 1:
            norm = xp.sum(difference, axis=-1, keepdims=self.keepdim)
        elif p == 2:
            norm = xp.sqrt(xp.sum(difference * difference, axis=-1, keepdims=self.keepdim))
        else:
            norm = xp.sum(difference**p, axis=-1, keepdims=self.keepdim) ** (1.0 / p)
        return norm


OPS = [Cross, PairwiseDistance]
