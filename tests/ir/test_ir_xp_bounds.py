"""max/min against a scalar go through clip on NumPy; the results must equal maximum/minimum exactly."""

import numpy as np
import pytest

from kuiper.pnnx_expr import evaluate

X = np.array([[np.nan, -np.inf, -2.5, -0.0, 0.0, 1e-30, 3.0, 6.5, np.inf]], np.float32)


@pytest.mark.parametrize(
    "text, reference",
    [
        ("maximum(@0,0.0)", lambda x: np.maximum(x, np.float32(0))),
        ("minimum(@0,6.0)", lambda x: np.minimum(x, np.float32(6))),
        ("max(0.5,@0)", lambda x: np.maximum(np.float32(0.5), x)),
        ("clamp(@0,0,6)", lambda x: np.minimum(np.maximum(x, 0), 6).astype(np.float32)),
        ("relu(@0)", lambda x: np.maximum(x, np.float32(0))),
        ("maximum(@0,nan)", lambda x: np.maximum(x, np.float32(np.nan))),
    ],
)
def test_scalar_bounds_match_maximum_and_minimum_including_nan(text, reference):
    got = evaluate(text, [X])
    want = reference(X)
    assert got.dtype == want.dtype == np.float32
    np.testing.assert_array_equal(got, want)  # NaN positions included


def test_integer_tensors_keep_their_dtype():
    x = np.array([-3, 0, 4, 9], np.int64)
    got = evaluate("clamp(@0,0,6)", [x])
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, [0, 0, 4, 6])


def test_two_tensors_use_maximum():
    a = np.array([1.0, np.nan, -1.0], np.float32)
    b = np.array([0.0, 2.0, np.nan], np.float32)
    np.testing.assert_array_equal(evaluate("maximum(@0,@1)", [a, b]), np.maximum(a, b))
