"""Activations: elementwise functions of one tensor."""

from __future__ import annotations

from .base import Op


class ReLU(Op):
    types = ("nn.ReLU", "F.relu")

    def setup(self):
        self.require_inputs(1)

    def forward(self, x):
        return self.xp.maximum(x, 0.0)


OPS = [ReLU]
