"""Activations beyond activation.py: F.glu/nn.GLU (gated halves) and F.rrelu/nn.RReLU in eval mode.

RReLU samples its negative slope in training; an exported (eval-mode) model uses the
fixed slope (lower + upper) / 2, a leaky ReLU.
"""

from __future__ import annotations

from ..errors import ShapeError
from ..ir import composites
from .elementwise import apply
from .base import Op, normalize_axis
from .params import Choice, Float, Int


class GLU(Op):
    """glu(x, dim) = a * sigmoid(b), a and b the first and second half of x along dim."""

    types = ("GLU",)
    arity = 1
    params = (Int("dim", default=-1),)

    def forward(self, x):
        axis = normalize_axis(self.dim, x.ndim, self)
        size = x.shape[axis]
        if size % 2:
            raise ShapeError(f"{self.node.describe()}: dim {self.dim} must have an even size, found {tuple(x.shape)}")
        first = [slice(None)] * x.ndim
        second = [slice(None)] * x.ndim
        first[axis], second[axis] = slice(0, size // 2), slice(size // 2, size)
        return x[tuple(first)] * apply(self.backend, composites.sigmoid, x[tuple(second)])


class RReLU(Op):
    types = ("RReLU",)
    arity = 1
    params = (Float("lower", default=1.0 / 8.0), Float("upper", default=1.0 / 3.0),
              Choice("training", (False,), default=False))  # training draws random slopes

    def setup(self):
        if self.lower > self.upper:
            raise self.error(f"param 'lower' ({self.lower}) must not exceed 'upper' ({self.upper})")
        self.slope = (self.lower + self.upper) / 2.0

    def forward(self, x):
        return self.xp.where(x >= 0, x, x * self.slope)


OPS = [GLU, RReLU]
