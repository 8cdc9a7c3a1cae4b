"""Division by a magnitude, without centring: nn.LocalResponseNorm / F.local_response_norm (over
neighbouring channels) and F.normalize (a p-norm along one dim)."""

from __future__ import annotations

from ..errors import ShapeError
from .base import normalize_axis
from .norm_base import NormOp, describe_value


class LocalResponseNorm(NormOp):
    """nn.LocalResponseNorm / F.local_response_norm over the channel dim (1):
    x / (k + alpha / size * sum of x^2 over a window of ``size`` channels) ** beta.

    The window runs from c - size // 2 to c + (size - 1) // 2 (zeros past the ends, as
    PyTorch pads), and PyTorch divides by ``size`` whatever the window holds.
    """

    types = ("LocalResponseNorm",)
    arity = 1

    def setup(self):
        self.size = self.positive_int_param("size")
        self.alpha = self.float_param("alpha", default=1e-4)
        self.beta = self.float_param("beta", default=0.75)
        self.k = self.float_param("k", default=1.0)

    def forward(self, x):
        if not self.backend.is_array(x) or x.ndim < 3:
            raise ShapeError(f"{self.node.describe()}: expected (N, C, ...) with at least 3 dims, found {describe_value(x)}")
        channels = x.shape[1]
        pads = [(0, 0)] * x.ndim
        pads[1] = (self.size // 2, (self.size - 1) // 2)
        squares = self.backend.pad(x * x, tuple(pads), "constant", value=0.0)
        total = squares[:, :channels, ...]
        for offset in range(1, self.size):  # size is small (2 to 5): a sum of shifted views
            total = total + squares[:, offset:offset + channels, ...]
        return x / (total * (self.alpha / self.size) + self.k) ** self.beta


class Normalize(NormOp):
    """F.normalize: x / max(||x||_p along dim, eps)."""

    types = ("Normalize",)
    arity = 1

    def setup(self):
        self.p = self.float_param("p", default=2.0)
        self.dim = self.int_param("dim", default=1)
        self.eps = self.float_param("eps", default=1e-12)

    def norm(self, x, axis: int):
        xp = self.xp
        magnitude = xp.abs(x)
        p = self.p
        if p == float("inf"):
            return xp.max(magnitude, axis=axis, keepdims=True)
        if p == float("-inf"):
            return xp.min(magnitude, axis=axis, keepdims=True)
        if p == 0:  # the count of non-zeros, as torch.linalg.vector_norm defines it
            return xp.sum(xp.astype(magnitude != 0, x.dtype), axis=axis, keepdims=True)
        if p == 1:
            return xp.sum(magnitude, axis=axis, keepdims=True)
        if p == 2:
            return xp.sqrt(xp.sum(x * x, axis=axis, keepdims=True))
        return xp.pow(xp.sum(xp.pow(magnitude, p), axis=axis, keepdims=True), 1.0 / p)

    def forward(self, x):
        if not self.backend.is_array(x) or x.ndim == 0:
            raise ShapeError(f"{self.node.describe()}: expected a tensor of rank >= 1, found {describe_value(x)}")
        axis = normalize_axis(self.dim, x.ndim, self)
        return x / self.xp.maximum(self.norm(x, axis), self.xp.asarray(self.eps, dtype=x.dtype))


OPS = [LocalResponseNorm, Normalize]
