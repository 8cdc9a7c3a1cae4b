"""erf built from array-API functions, for namespaces that have none.

NumPy has no erf (SciPy's is used when installed), so this is the fallback:
accurate to about 1e-15 in float64.

* |x| < 2: the Maclaurin series  erf(x) = 2/sqrt(pi) * sum (-1)^n x^(2n+1) / (n! (2n+1)),
  40 terms (the last is below 1e-23 at |x| = 2).
* |x| >= 2: the continued fraction  erfc(x) = exp(-x^2)/sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))),
  evaluated bottom-up from a fixed depth.
Both are computed in float64 and the result is cast back to the input dtype.
"""

from __future__ import annotations

import math

SERIES_TERMS = 40
FRACTION_DEPTH = 80
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_ONE_OVER_SQRT_PI = 1.0 / math.sqrt(math.pi)


def erf(xp, x):
    original_dtype = x.dtype
    x = xp.astype(x, xp.float64) if hasattr(xp, "astype") else x.astype(xp.float64)
    small = xp.clip(x, -2.0, 2.0) if hasattr(xp, "clip") else xp.minimum(xp.maximum(x, -2.0), 2.0)
    series = _series(xp, small)
    large = xp.maximum(xp.abs(x), 2.0)
    tail = 1.0 - _erfc_fraction(xp, large)
    result = xp.where(xp.abs(x) < 2.0, series, xp.where(x < 0, -tail, tail))
    return xp.astype(result, original_dtype) if hasattr(xp, "astype") else result.astype(original_dtype)


def _series(xp, x):
    minus_x_squared = -(x * x)
    term = x
    total = x
    for n in range(1, SERIES_TERMS):
        term = term * minus_x_squared / n
        total = total + term / (2 * n + 1)
    return _TWO_OVER_SQRT_PI * total


def _erfc_fraction(xp, x):
    fraction = x
    for k in range(FRACTION_DEPTH, 0, -1):
        fraction = x + (k / 2.0) / fraction
    return xp.exp(-(x * x)) * _ONE_OVER_SQRT_PI / fraction
