"""Linear algebra: nn.Linear."""

from __future__ import annotations

from ..errors import ShapeError
from .base import Op


class Linear(Op):
    types = ("nn.Linear",)

    def setup(self):
        self.require_inputs(1)
        weight = self.node.attrs.get("weight")
        if weight is None or weight.ndim != 2:
            raise self.error("needs a 2-D weight '@weight' (out_features, in_features)")
        self.in_features = weight.shape[1]
        # Transposed once here so forward is a plain x @ W^T without a per-call transpose.
        self.weight_t = self.xp.permute_dims(self.weight("weight"), (1, 0))
        self.bias = self.weight("bias", required=self.bool_param("bias", default="bias" in self.node.attrs))

    def forward(self, x):
        if x.shape[-1] != self.in_features:
            raise ShapeError(
                f"{self.node.describe()}: expected last dim {self.in_features}, found input shape {tuple(x.shape)}"
            )
        out = self.xp.matmul(x, self.weight_t)
        if self.bias is not None:
            out = out + self.bias
        return out


OPS = [Linear]
