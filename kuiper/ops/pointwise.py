"""Fused multiply-add ops pnnx keeps as ATen calls: addcmul and addcdiv.

``torch.addcmul(input, tensor1, tensor2, value=1)`` is input + value * tensor1 * tensor2,
addcdiv the same with a division.  pnnx has no converter for them and writes
``aten::addcmul`` with four positional operands, the last being ``value`` (a
pnnx.Expression constant); the torch.* spellings take keywords and a ``value`` param.
"""

from __future__ import annotations

from ..errors import ShapeError
from ..ir import make
from .base import NodeParams, Op
from .elementwise import ElementwiseMath


class AddCMul(Op):
    types = ("AddScaled",)
    fresh_output = True
    keys = ("input", "tensor1", "tensor2", "value")

    def setup(self):
        self.divide, self.order, self.value = _read(self)

    @classmethod
    def elementwise(cls, node):
        """input + value * tensor1 * tensor2 (or / tensor2) as math, so that the fusion pass can merge it
        with the elementwise ops around it (ConvNeXt-V2's global response norm: three passes become one)."""
        divide, order, value = _read(NodeParams(node))

        def build(*inputs):
            base, a, b = (inputs[i] for i in order[:3])
            product = make.div(a, b) if divide else make.mul(a, b)
            if len(order) == 4:
                product = make.mul(product, make.cast(inputs[order[3]], product.dtype))
            elif value != 1:
                product = make.mul(product, make.const(value, product.dtype))
            return make.add(base, product)

        return ElementwiseMath(build, len(order))

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


def _read(params: Op) -> tuple[bool, list[int], float]:
    """(divide, the positions of input, tensor1, tensor2[, value], the value param) of an op or a bare node."""
    divide = params.bool_param("divide", default=False)
    params.require_inputs(3, 4)
    keys = AddCMul.keys[: len(params.node.inputs)]
    order = [params.input_index(key, default=i) for i, key in enumerate(keys)]
    if sorted(order) != list(range(len(params.node.inputs))):
        raise params.error("expects inputs input, tensor1, tensor2[, value], by position or bound to $keys")
    value = params.float_param("value", default=1.0)
    if len(params.node.inputs) == 4 and params.has_param("value"):
        raise params.error("gives 'value' both as a param and as an input")
    return divide, order, value
