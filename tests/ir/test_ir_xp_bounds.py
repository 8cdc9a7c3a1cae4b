"""max/min against a scalar go through clip on NumPy; the results must equal maximum/minimum exactly."""

import numpy as np
import pytest

from kuiper.ir import make
from kuiper.ir.codegen_numpy import compile_elementwise
from kuiper.ops.elementwise import ElementwiseMath, function_for
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


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("op, constant_first", [("max", False), ("max", True), ("min", False)])
def test_a_compiled_bound_of_one_array_is_one_clip_with_maximums_results(dtype, op, constant_first):
    """codegen_numpy runs max/min of its one input against a constant as one clip, bounds made once."""
    bound = (lambda x: make.arith(op, 0.5, x)) if constant_first else (lambda x: make.arith(op, x, 0.5))
    name = np.dtype(dtype).name
    run = compile_elementwise(function_for(ElementwiseMath(bound, 1), (name,)), np)
    assert run._clip_step() is not None  # the clip path, not the step table
    x = X.astype(dtype)
    reference = np.maximum if op == "max" else np.minimum
    want = reference(x, dtype(0.5))
    got = run(x)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, want)
    out = np.empty_like(x)
    assert run(x, out=out) is out
    np.testing.assert_array_equal(out, want)


def test_a_compiled_bound_of_integers_or_against_nan_is_no_clip():
    integers = compile_elementwise(function_for(ElementwiseMath(lambda x: make.arith("max", x, 2), 1), ("int64",)), np)
    assert integers._clip_step() is None
    np.testing.assert_array_equal(integers(np.array([-3, 2, 7])), [2, 2, 7])
    nan = compile_elementwise(function_for(ElementwiseMath(lambda x: make.arith("max", x, float("nan")), 1),
                                           ("float32",)), np)
    assert nan._clip_step() is None
    assert np.isnan(nan(X)).all()
