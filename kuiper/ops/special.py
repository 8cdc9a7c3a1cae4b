"""Elementwise functions the array API lacks or that need no arithmetic: torch.lgamma, torch.positive.

lgamma is the Lanczos approximation (g = 7, nine terms; relative error near 1e-15)
evaluated in float64, with the reflection formula below 1/2.  As in PyTorch, it is
+inf at 0 and the negative integers, and an integer input gives float32.
"""

from __future__ import annotations

import math

from .base import Op

_LANCZOS_G = 7.0
_LANCZOS = (
    0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
    12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7,
)


def _lgamma_from_half(xp, x):
    """log|Gamma(x)| for x >= 1/2 (float64)."""
    z = x - 1.0
    series = xp.full_like(z, _LANCZOS[0])
    for i, coefficient in enumerate(_LANCZOS[1:], start=1):
        series = series + coefficient / (z + i)
    t = z + _LANCZOS_G + 0.5
    return 0.5 * math.log(2.0 * math.pi) + (z + 0.5) * xp.log(t) - t + xp.log(series)


def lgamma(xp, x):
    """log|Gamma(x)| elementwise, float64 in and out."""
    reflect = x < 0.5
    direct = _lgamma_from_half(xp, xp.where(reflect, 1.0 - x, x))
    # Gamma(x) Gamma(1 - x) = pi / sin(pi x)
    sine = xp.abs(xp.sin(math.pi * xp.where(reflect, x, 0.5)))
    pole = reflect & (x == xp.floor(x))  # 0, -1, -2, ...: sin(pi x) is not exactly 0 in floating point
    reflected = math.log(math.pi) - xp.log(xp.where(pole, 1.0, sine)) - direct
    result = xp.where(reflect, reflected, direct)
    return xp.where(pole, math.inf, result)


class Lgamma(Op):
    types = ("Lgamma",)
    arity = 1

    def forward(self, x):
        xp = self.xp
        dtype = x.dtype if xp.isdtype(x.dtype, "real floating") else xp.float32
        return xp.astype(lgamma(xp, xp.astype(x, xp.float64)), dtype)


OPS = [Lgamma]
