"""StochasticConvert: float to a signed integer type, rounding up with probability equal to the fraction.

As XLA's CPU backend runs stochastic-convert: |x| is split into whole and fractional parts; the
fraction, scaled by 2**bits of the random operand, is compared with the random bits, and the whole
part goes up by one when the random value is below it. The sign goes back on, and values at or
past the type's limits give the limits.
"""

from __future__ import annotations

from ..ir import dtypes
from ..ir.dtypes import array_dtype
from .base import Op
from .params import Choice

SIGNED = ("int8", "int16", "int32", "int64")


class StochasticConvert(Op):
    """Inputs ``x`` (float) and ``random`` (unsigned bits of x's shape): x as ``dtype``."""

    types = ("StochasticConvert",)
    arity = 2
    fresh_output = True
    params = (Choice("dtype", SIGNED),)

    def forward(self, x, random):
        xp = self.xp
        dtype = array_dtype(xp, self.dtype)
        info = xp.iinfo(dtype)
        magnitude = xp.abs(x)
        whole = xp.floor(magnitude)
        fraction = xp.astype(magnitude - whole, xp.float32 if dtypes.name_of(x.dtype) == "float16" else x.dtype)
        scaled = fraction * float(2 ** (8 * dtypes.itemsize(random.dtype)))
        round_up = random < xp.astype(scaled, random.dtype)
        clipped = xp.clip(whole, 0, info.max)  # past the limits the result is the limit (below)
        result = xp.astype(clipped, dtype) + xp.astype(round_up, dtype)
        result = xp.where(x < 0, -result, result)
        result = xp.where(x <= info.min, info.min, result)
        return xp.astype(xp.where(x >= info.max, info.max, result), dtype)

OPS = [StochasticConvert]
