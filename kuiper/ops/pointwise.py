"""Fused multiply-add ops pnnx keeps as ATen calls: addcmul and addcdiv.

``torch.addcmul(input, tensor1, tensor2, value=1)`` is input + value * tensor1 * tensor2,
addcdiv the same with a division.  pnnx has no converter for them and writes
``aten::addcmul`` with four positional operands, the last being ``value`` (a
pnnx.Expression constant); the torch.* spellings take keywords and a ``value`` param.
"""

from __future__ import annotations

from ..errors import ShapeError
from .base import Op


class AddCMul(Op):
    types = ("AddScaled",)
    fresh_output = True
    keys = ("input", "tensor1", "tensor2", "value")

    def setup(self):
        self.divide = self.bool_param("divide", default=False)
        self.require_inputs(3, 4)
        self.order = [self.input_index(key, default=i) for i, key in enumerate(self.keys[: len(self.node.inputs)])]
        if sorted(self.order) != list(range(len(self.node.inputs))):
            raise self.error("expects inputs input, tensor1, tensor2[, value], by position or bound to $keys")
        self.value = self.float_param("value", default=1.0)
        if len(self.node.inputs) == 4 and self.has_param("value"):
            raise self.error("gives 'value' both as a param and as an input")

    def forward(self, *inputs):
        xp = self.xp
        base, a, b = (inputs[i] for i in self.order[:3])
        value = inputs[self.order[3]] if len(self.order) == 4 else self.value
        if getattr(value, "ndim", 0) != 0:
            raise ShapeError(f"{self.node.describe()}: value must be a scalar, found shape {tuple(value.shape)}")
        product = a / b if self.divide else a * b
        if not (isinstance(value, (int, float)) and value == 1):
            product = product * (value if isinstance(value, (int, float)) else xp.astype(value, product.dtype))
        return base + product


OPS = [AddCMul]
