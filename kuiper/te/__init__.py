"""Tensor expressions: kernels in index notation, differentiated, lowered and compiled.

    kernel = kuiper.te.parse("C<4, 16>[i, j] = A<4, 16>[i, k] * B<16, 16>[k, j];")
    dkernel = kuiper.te.grad(kernel, wrt=["A"])     # dA<4, 16>[i, k] += dC<4, 16>[i, j] * B<16, 16>[k, j];
    f = kuiper.te.compile(dkernel)                   # f(B=..., dC=...) -> {"dA": ...}
    source = kuiper.te.emit(dkernel, "c++", name="grad_case3")
    ir = kuiper.te.lower(dkernel)                    # the tensor-IR Function the generators consume
    Op = kuiper.te.op_class("my.Layer", text)        # an op type for a plugin's kuiper_add_ops

See README.md ("Tensor expressions") for the language.
"""

from __future__ import annotations

from kuiper.te.compile import compile  # noqa: A004 - kuiper.te.compile is the public name
from kuiper.te.emit import emit
from kuiper.te.grad import grad
from kuiper.te.kernel import Kernel, Statement
from kuiper.te.lower import lower
from kuiper.te.op import op_class
from kuiper.te.parser import parse

__all__ = ["Kernel", "Statement", "compile", "emit", "grad", "lower", "op_class", "parse"]
