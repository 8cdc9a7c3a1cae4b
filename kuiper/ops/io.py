"""Graph plumbing: model inputs and outputs, and constant tensors."""

from __future__ import annotations

from .base import Op


class Input(Op):
    """A model input; the graph feeds its output operand directly."""

    types = ("pnnx.Input",)


class Output(Op):
    """A model output; the graph reads its input operand directly."""

    types = ("pnnx.Output",)


class Attribute(Op):
    """A constant tensor stored in the .bin as ``<op>.data``; moved to the backend once."""

    types = ("pnnx.Attribute",)

    def setup(self):
        self.require_inputs(0)
        if not self.node.attrs:
            raise self.error("has no weight (expected '@data=(shape)dtype')")
        # PNNX names the tensor 'data'; take whichever single attr is there.
        key = "data" if "data" in self.node.attrs else next(iter(self.node.attrs))
        # Aligned: a constant may reach a matmul (F.linear / torch.matmul with a weight pnnx folded).
        self.value = self.weight(key, aligned=True)

    def forward(self):
        return self.value


OPS = [Input, Output, Attribute]
