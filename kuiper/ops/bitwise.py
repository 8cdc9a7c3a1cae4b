"""Bitwise and logical ops: torch.bitwise_and/or/xor/not, bitwise_left/right_shift, logical_and/or/xor/not.

pnnx writes the tensor operands as ``$input`` / ``$other`` and a number operand as
the param ``other=3``.  Dtypes follow PyTorch: bitwise ops take bool or integer
tensors and keep their promoted dtype (a number only decides the kind: an int
with a bool tensor gives int64); logical ops take anything (non-zero, NaN too,
is True) and give bool.

Shifts do what PyTorch's CPU kernels do where C leaves it undefined: a shift
amount that is negative or at least the bit width gives 0 for a left shift and
the sign fill (0 or -1) for a right shift.
"""

from __future__ import annotations

from ..errors import InputError
from ..ir import dtypes
from .base import Op
from .compare import promoted_dtype
from .params import Choice



def _is_number(value) -> bool:
    return isinstance(value, (bool, int, float))


class BinaryOperands(Op):
    """Reads ``$input`` and ``$other`` (a second input, or a number param); subclasses declare
    the ``operation`` param."""

    def setup(self):
        self.input_at = self.input_index("input", default=0)
        self.other_at = self.input_index("other", default=1 if len(self.node.inputs) == 2 else None)
        if self.other_at is None:
            self.require_inputs(1)
            self.other = self.param("other", None)
            if not _is_number(self.other):
                raise self.error(f"needs 'other': a tensor input bound to $other or a number, found {self.other!r}")
        else:
            self.require_inputs(2)

    def operands(self, inputs):
        x = inputs[self.input_at]
        other = self.other if self.other_at is None else inputs[self.other_at]
        return x, other


def left_shift(xp, a, b):
    """a << b in a's integer dtype; shifts outside [0, bits) give 0."""
    bits = dtypes.itemsize(a.dtype) * 8
    outside = (b < 0) | (b >= bits)
    shifted = xp.bitwise_left_shift(a, xp.where(outside, xp.zeros_like(b), b))
    return xp.where(outside, xp.zeros_like(shifted), shifted)


def right_shift(xp, a, b):
    """a >> b (arithmetic for signed dtypes); shifts outside [0, bits) give the sign fill."""
    bits = dtypes.itemsize(a.dtype) * 8
    signed = xp.isdtype(a.dtype, "signed integer")
    longest = bits - 1 if signed else bits
    outside = (b < 0) | (b >= longest)
    b = xp.where(outside, xp.full_like(b, bits - 1), b)
    shifted = xp.bitwise_right_shift(a, b)
    if signed:
        return shifted  # a >> (bits - 1) is the sign fill already
    return xp.where(outside, xp.zeros_like(shifted), shifted)


class Bitwise(BinaryOperands):
    """``operation``: and, or, xor, lshift or rshift, on bool or integer operands."""

    types = ("Bitwise",)
    params = (Choice("operation", ("and", "or", "xor", "lshift", "rshift")),)

    def forward(self, *inputs):
        xp = self.xp
        x, other = self.operands(inputs)
        dtype = promoted_dtype(self, [x, other])
        if xp.isdtype(dtype, "real floating") or xp.isdtype(dtype, "complex floating"):
            raise InputError(f"{self.node.describe()}: needs bool or integer operands, found {dtype}")
        x, other = (xp.astype(v, dtype, copy=False) if self.backend.is_array(v) else xp.asarray(v, dtype=dtype)
                    for v in (x, other))
        if self.operation in ("lshift", "rshift"):
            if xp.isdtype(dtype, "bool"):
                raise InputError(f"{self.node.describe()}: cannot shift bool tensors")
            x, other = xp.broadcast_arrays(x, other)
            return (left_shift if self.operation == "lshift" else right_shift)(xp, x, other)
        return getattr(xp, f"bitwise_{self.operation}")(x, other)  # xp.bitwise_and, _or, _xor


class BitwiseNot(Op):
    types = ("BitwiseNot",)
    arity = 1

    def forward(self, x):
        xp = self.xp
        if xp.isdtype(x.dtype, "bool"):
            return xp.logical_not(x)
        if not xp.isdtype(x.dtype, "integral"):
            raise InputError(f"{self.node.describe()}: needs a bool or integer tensor, found {x.dtype}")
        return xp.bitwise_invert(x)


def truth(xp, value):
    """PyTorch's truth of a tensor or number: non-zero (NaN included) is True."""
    return xp.astype(xp.asarray(value), xp.bool)


class Logical(BinaryOperands):
    """``operation``: and, or or xor of the operands' truth values."""

    types = ("Logical",)
    params = (Choice("operation", ("and", "or", "xor")),)

    def forward(self, *inputs):
        xp = self.xp
        x, other = (truth(xp, v) for v in self.operands(inputs))
        return getattr(xp, f"logical_{self.operation}")(x, other)  # xp.logical_and, _or, _xor


class LogicalNot(Op):
    types = ("LogicalNot",)
    arity = 1

    def forward(self, x):
        return self.xp.logical_not(truth(self.xp, x))


OPS = [Bitwise, BitwiseNot, Logical, LogicalNot]
