"""A te kernel as an op type: write a custom layer once in index notation, run it in a PNNX model.

    ScaledTanh = kuiper.te.op_class(
        "example.layers.ScaledTanh",
        "Y<1, 4, 8, 8>[n, c, h, w] = alpha<4>[c] * tanh(beta<4>[c] * X<1, 4, 8, 8>[n, c, h, w]);",
    )

    @kuiper.hookimpl
    def kuiper_add_ops():
        return [ScaledTanh]

A kernel input named like one of the op's ``@name`` weights is read from
it; the op's input operands feed the other kernel inputs, in order; the op's
outputs are the kernel's outputs in order.  Shapes are the kernel's static
shapes, checked when the model is built (weights) and at every call (inputs).
It runs through kuiper.te.compile on the model's backend.
"""

from __future__ import annotations

import re

from kuiper.errors import ShapeError
from kuiper.ops.base import Op
from kuiper.te.compile import compile as compile_kernel
from kuiper.te.kernel import Kernel
from kuiper.te.parser import parse


def op_class(op_type: str, kernel: Kernel | str, dtype: str = "float32") -> type[Op]:
    if isinstance(kernel, str):
        # "example.layers.ScaledTanh" -> op_example_layers_ScaledTanh: an identifier, never a keyword
        kernel = parse(kernel, dtype=dtype, name="op_" + re.sub(r"[^A-Za-z0-9_]", "_", op_type))

    class KernelOp(Op):
        types = (op_type,)
        fresh_output = True
        te_kernel = kernel

        def setup(self):
            self.operand_names = [name for name in kernel.inputs if name not in self.node.attrs]
            if len(self.node.inputs) != len(self.operand_names):
                raise self.error(
                    f"has {len(self.node.inputs)} input(s) but its kernel reads {self.operand_names} "
                    f"besides the weights {[n for n in kernel.inputs if n in self.node.attrs]}"
                )
            if len(self.node.outputs) != len(kernel.outputs):
                raise self.error(f"has {len(self.node.outputs)} outputs but its kernel writes {kernel.outputs}")
            self.weights = {}
            for name in kernel.inputs:
                if name in self.node.attrs:
                    array = self.weight(name)
                    if tuple(array.shape) != kernel.shapes[name]:
                        raise self.error(
                            f"weight @{name} has shape {tuple(array.shape)}, its kernel needs {kernel.shapes[name]}"
                        )
                    self.weights[name] = array
            self.run = compile_kernel(kernel, self.backend)

        def forward(self, *inputs):
            feeds = dict(self.weights)
            for name, value in zip(self.operand_names, inputs):
                if tuple(value.shape) != kernel.shapes[name]:
                    raise ShapeError(
                        f"{self.node.describe()}: input {name} has shape {tuple(value.shape)}, "
                        f"its kernel needs {kernel.shapes[name]}"
                    )
                feeds[name] = value
            outputs = self.run(**feeds)
            values = tuple(outputs[name] for name in kernel.outputs)
            return values[0] if len(values) == 1 else values

    KernelOp.__name__ = KernelOp.__qualname__ = f"TE_{op_type.replace('.', '_')}"
    return KernelOp
