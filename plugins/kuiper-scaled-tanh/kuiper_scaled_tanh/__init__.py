"""A third-party kuiper plugin: one op that the core does not ship.

PNNX exports a custom module it is told to keep whole (``moduleop=``) as one
op whose type is the module's dotted path and whose parameters are ``@``
weights::

    example.layers.ScaledTanh act 1 1 1 2 @alpha=(4)f32 @beta=(4)f32 ...

This plugin computes it, y = alpha * tanh(beta * x) per channel, with the
backend's array namespace, so it runs on every kuiper backend.
"""

from __future__ import annotations

import kuiper
from kuiper.ops.base import Op


class ScaledTanh(Op):
    types = ("example.layers.ScaledTanh",)

    def setup(self):
        self.require_inputs(1)
        self.alpha = self.weight("alpha")
        self.beta = self.weight("beta")
        if self.alpha.shape != self.beta.shape or len(self.alpha.shape) != 1:
            raise self.error(f"alpha {self.alpha.shape} and beta {self.beta.shape} must be equal 1-D shapes")

    def forward(self, x):
        xp = self.xp
        # Per-channel parameters broadcast over (N, C, *spatial).
        shape = (1, -1) + (1,) * (x.ndim - 2)
        return xp.reshape(self.alpha, shape) * xp.tanh(xp.reshape(self.beta, shape) * x)


@kuiper.hookimpl
def kuiper_add_ops():
    return [ScaledTanh]
