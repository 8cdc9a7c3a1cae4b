"""Ops on the bits of numbers: BitcastConvert (reinterpret as another type), ReducePrecision (round
to a float with fewer exponent and mantissa bits and back, bit for bit as XLA does)."""

from __future__ import annotations

from typing import ClassVar

from ..ir import dtypes
from ..ir.dtypes import array_dtype
from .base import Op
from .params import DType, Int


class BitcastConvert(Op):
    """The bits of each element read as ``dtype``: a narrower type adds a minor dim, a wider one removes it."""

    types = ("BitcastConvert",)
    arity = 1
    fresh_output = True
    params = (DType("dtype"),)

    def setup(self):
        self.itemsize = dtypes.itemsize(self.dtype)

    def forward(self, x):
        contiguous = self.xp.asarray(x, copy=True)
        target_size, bitcast = self.itemsize, self.backend.bitcast
        if target_size == dtypes.itemsize(x.dtype):
            return bitcast(contiguous, self.dtype)
        if target_size < dtypes.itemsize(x.dtype):  # each element becomes several: a new minor dim
            return self.xp.reshape(bitcast(contiguous, self.dtype), (*x.shape, dtypes.itemsize(x.dtype) // target_size))
        return self.xp.reshape(bitcast(contiguous, self.dtype), x.shape[:-1])  # the minor dim is consumed


class ReducePrecision(Op):
    """Round to a float with ``exponent_bits``/``mantissa_bits`` and back (XLA's bit-level algorithm)."""

    types = ("ReducePrecision",)
    arity = 1
    LAYOUT: ClassVar[dict] = {2: (5, 10), 4: (8, 23), 8: (11, 52)}  # itemsize -> (exponent, mantissa bits)
    params = (Int("exponent_bits", low=1), Int("mantissa_bits", low=0))

    def forward(self, x):
        xp = self.xp
        source_exponent, source_mantissa = self.LAYOUT[dtypes.itemsize(x.dtype)]
        unsigned_type = array_dtype(xp, f"uint{dtypes.itemsize(x.dtype) * 8}")
        bits = self.backend.bitcast(x, unsigned_type)

        def const(value):
            return xp.asarray(value, dtype=unsigned_type)

        if self.mantissa_bits < source_mantissa:
            drop = source_mantissa - self.mantissa_bits
            last_bit = (bits & const(1 << drop)) >> const(drop)
            bits = (bits + last_bit + const((1 << (drop - 1)) - 1)) & ~const((1 << drop) - 1)
        if self.exponent_bits < source_exponent:
            width = dtypes.itemsize(x.dtype) * 8
            exponent_mask = const(((1 << source_exponent) - 1) << source_mantissa)
            bias = (1 << (source_exponent - 1)) - 1
            reduced_bias = (1 << (self.exponent_bits - 1)) - 1
            exponent = bits & exponent_mask
            overflows = exponent > const((bias + reduced_bias) << source_mantissa)
            underflows = exponent <= const((bias - reduced_bias) << source_mantissa)
            signed_zero = bits & const(1 << (width - 1))
            bits = xp.where(overflows, signed_zero | exponent_mask, bits)
            bits = xp.where(underflows, signed_zero, bits)
        result = self.backend.bitcast(bits, x.dtype)
        return xp.where(xp.isnan(x), x, result) if self.mantissa_bits > 0 else result


OPS = [BitcastConvert, ReducePrecision]
