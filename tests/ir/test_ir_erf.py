"""erf without SciPy: float64 to ~1e-15, float32 by the fast fit to well under the model tolerance."""

import math

import numpy as np
import pytest

from kuiper.backends.numpy_backend import NumpyBackend
from kuiper.ir.erf import erf

X = np.linspace(-7.0, 7.0, 20001)
REFERENCE = np.array([math.erf(v) for v in X])


@pytest.mark.parametrize("dtype, bound", [(np.float64, 1e-14), (np.float32, 5e-7)])
def test_erf_against_math_erf(dtype, bound):
    result = erf(np, X.astype(dtype))
    assert result.dtype == dtype
    assert float(np.abs(result.astype(np.float64) - REFERENCE).max()) < bound


def test_erf_is_odd_and_saturates():
    x = np.array([0.0, 1e-8, 3.0, 10.0], np.float32)
    np.testing.assert_array_equal(erf(np, -x), -erf(np, x))
    assert erf(np, np.float32([10.0]))[0] == 1.0


def test_backend_erf_uses_the_same_function():
    x = X.astype(np.float32)
    np.testing.assert_array_equal(NumpyBackend().erf(x), erf(np, x))
