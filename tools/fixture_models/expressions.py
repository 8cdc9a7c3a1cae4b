"""pnnx.Expression: models whose arithmetic pnnx folds into expressions using every function it writes.

One output per group of functions, so an error points at a few functions, not
all.  Inputs are standard normal; each function gets arguments inside its
domain (sqrt/log of |x| + 0.5, asin of tanh(x), acosh of |x| + 1, ...).  The
integer and bitwise functions work on ``.long()`` casts of scaled inputs.

pnnx 20261020 drops ``rounding_mode="floor"`` from ``torch.div`` (it writes a
plain ``div``), so floor division is written with ``//`` here.
"""

import torch
from torch import nn

from fixturelib import spec


class UnaryFloat(nn.Module):
    def forward(self, x):
        pos = x.abs() + 0.5
        unit = torch.tanh(x) * 0.9
        return (
            -x + x.abs() + torch.sign(x) + torch.sqrt(pos) + torch.rsqrt(pos) + torch.square(x),
            torch.reciprocal(pos) + torch.exp(unit) + torch.expm1(unit) + torch.log(pos) + torch.log10(pos)
            + torch.log1p(pos),
            torch.sin(x) + torch.cos(x) + torch.tan(unit) + torch.asin(unit) + torch.acos(unit) + torch.atan(x),
            torch.sinh(unit) + torch.cosh(unit) + torch.tanh(x) + torch.asinh(x) + torch.acosh(pos + 0.5)
            + torch.atanh(unit),
            torch.erf(x) + torch.floor(x * 3) + torch.ceil(x * 3) + torch.round(x * 3) + torch.trunc(x * 3),
        )


class BinaryFloat(nn.Module):
    def forward(self, x, y):
        pos = x.abs() + 0.5
        return (
            x + y - x * y + x / (y.abs() + 0.5),
            (x * 4) // (y.abs() + 0.5) + torch.remainder(x * 4, y + 0.1 * torch.sign(y))
            + torch.fmod(x * 4, y + 0.1 * torch.sign(y)),
            torch.pow(pos, y) + torch.atan2(x, y) + torch.max(x, y) + torch.min(x, y),
            torch.maximum(x, y) + torch.minimum(x, y) + torch.logaddexp(x, y),
        )


class IntegerAndBitwise(nn.Module):
    def forward(self, x, y):
        a = (x * 10).long()
        b = (y.abs() * 3).long() + 1
        masks = (x > 0) & (y > 0), (x > 0) | (y > 0), (x > 0) ^ (y > 0)
        return (
            (a & b) + (a | b) + (a ^ b) + (a.abs() << 2) + (a.abs() >> 1),
            a // b + a % b + torch.fmod(a, b) + a * b - a,
            (masks[0].float() + masks[1].long() + masks[2].float() + (x > 0).bool().float()) * 1.5,
        )


def _spec(module, inputs, description):
    return spec(module, *[(1, 3, 4, 5)] * inputs, description=description)


MODELS = {
    "expr_unary_float": _spec(UnaryFloat, 1, "every unary math function pnnx folds into pnnx.Expression"),
    "expr_binary_float": _spec(BinaryFloat, 2, "arithmetic and binary torch functions as pnnx.Expression"),
    "expr_int_bitwise": _spec(IntegerAndBitwise, 2, "integer division/remainder, bitwise ops, shifts and casts"),
}
