"""StochasticConvert: float to a signed integer type, rounding up with probability equal to the fraction.

As XLA's CPU backend runs stochastic-convert: |x| is split into whole and fractional parts; the
fraction, scaled by 2**bits of the random operand, is compared with the random bits, and the whole
part goes up by one when the random value is below it. The sign goes back on, and values at or
past the type's limits give the limits.
"""

from __future__ import annotations

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
        info = xp.iinfo(array_dtype(xp, self.dtype))
        magnitude = xp.abs(x)
        whole = xp.floor(magnitude)
        fraction = (magnitude - whole).astype(xp.float32 if x.dtype == xp.float16 else x.dtype)
        scaled = fraction * float(2 ** (8 * random.dtype.itemsize))
        round_up = random < scaled.astype(random.dtype)
        clipped = xp.clip(whole, 0, info.max)  # past the limits the result is the limit (below)
        result = clipped.astype(self.dtype) + round_up.astype(self.dtype)
        result = xp.where(x < 0, -result, result)
        result = xp.where(x <= info.min, info.min, result)
        return xp.where(x >= info.max, info.max, result).astype(self.dtype)


OPS = [StochasticConvert]
