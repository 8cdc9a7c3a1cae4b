"""erf built from array-API functions, for namespaces that have none.

NumPy has no erf (SciPy's is used when installed), so this is the fallback.
Two precisions, chosen by the input dtype:

* float64: accurate to about 1e-15 (the series and fraction below, ~120 array passes);
* float32/float16: the Chebyshev fit to erfc from Numerical Recipes (fractional
  error below 1.2e-7), ~12 array passes in float32 -- GELU on large activations
  must not pay for float64 accuracy.

For float64:

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


# Numerical Recipes' erfc fit: erfc(z) = t * exp(-z*z + P(t)), t = 1 / (1 + z/2), z >= 0.
# The compiled elementwise kernel (kuiper/numba_kernels/elementwise_kernels.py) evaluates the same fit.
ERFC_FIT = (
    -1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
    0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277,
)


def _astype(xp, x, dtype):
    return xp.astype(x, dtype) if hasattr(xp, "astype") else x.astype(dtype)


def erf(xp, x):
    original_dtype = x.dtype
    if original_dtype != xp.float64:
        # float32 arithmetic keeps the fit's error near float32's own (~1e-7 absolute).
        return _astype(xp, _erf_fit(xp, _astype(xp, x, xp.float32)), original_dtype)
    x = _astype(xp, x, xp.float64)
    small = xp.clip(x, -2.0, 2.0) if hasattr(xp, "clip") else xp.minimum(xp.maximum(x, -2.0), 2.0)
    series = _series(xp, small)
    large = xp.maximum(xp.abs(x), 2.0)
    tail = 1.0 - _erfc_fraction(xp, large)
    result = xp.where(xp.abs(x) < 2.0, series, xp.where(x < 0, -tail, tail))
    return _astype(xp, result, original_dtype)


def _erf_fit(xp, x):
    z = xp.abs(x)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = t * ERFC_FIT[-1]
    for coeff in reversed(ERFC_FIT[1:-1]):
        poly = (poly + coeff) * t
    erfc = t * xp.exp(-z * z + poly + ERFC_FIT[0])
    return xp.where(x < 0, erfc - 1.0, 1.0 - erfc)


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
