"""Constant tensors stored in the model file."""

from __future__ import annotations

from .base import Op


class Attribute(Op):
    """A constant tensor stored in the .bin as ``<op>.data`` (the canonical Constant: ``@data``); moved to the
    backend once."""

    types = ("Constant",)
    arity = 0

    def setup(self):
        if not self.node.attrs:
            raise self.error("has no weight (expected '@data=(shape)dtype')")
        # PNNX names the tensor 'data'; take whichever single attr is there.
        key = "data" if "data" in self.node.attrs else next(iter(self.node.attrs))
        # Aligned: a constant may reach a matmul (F.linear / torch.matmul with a weight pnnx folded).
        self.value = self.weight(key, aligned=True)

    def forward(self):
        return self.value


OPS = [Attribute]
