"""Binding ENTRY parameters to arrays at load time (kuiper/hlo/bind.py): JAX's weights-as-arguments, once."""

from __future__ import annotations

import numpy as np
import pytest

import kuiper
from kuiper.errors import InputError

# A dense layer as JAX lowers it with its weights as arguments: x @ w + b, then ReLU.
DENSE = """
HloModule dense_args

ENTRY main {
  x = f32[2,3] parameter(0)
  w = f32[3,4] parameter(1)
  b = f32[4] parameter(2)
  dot = f32[2,4] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bias = f32[2,4] broadcast(b), dimensions={1}
  sum = f32[2,4] add(dot, bias)
  zero = f32[] constant(0)
  zeros = f32[2,4] broadcast(zero), dimensions={}
  ROOT relu = f32[2,4] maximum(sum, zeros)
}
"""

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 3)).astype(np.float32)
W = RNG.standard_normal((3, 4)).astype(np.float32)
B = RNG.standard_normal(4).astype(np.float32)
EXPECTED = np.maximum(X.astype(np.float64) @ W + B, 0)


def test_bound_parameters_become_constants_and_leave_the_inputs():
    model = kuiper.load_hlo(DENSE, constants={1: W, "b": B})
    assert [spec.name for spec in model.inputs] == ["x"]
    np.testing.assert_allclose(model(X), EXPECTED, rtol=1e-6, atol=1e-6)
    # The dot saw a weight known at load time: a Linear holding it, as with JAX's closed-over weights.
    linear = [step for step in model.steps if step.node.type == "Linear"]
    assert len(linear) == 1 and "weight" in linear[0].node.attrs


def test_the_same_program_with_weights_passed_per_call_agrees():
    model = kuiper.load_hlo(DENSE)
    assert [spec.name for spec in model.inputs] == ["x", "w", "b"]
    np.testing.assert_allclose(model(X, W, B), EXPECTED, rtol=1e-6, atol=1e-6)


def test_a_bound_array_is_copied_so_later_changes_do_not_reach_the_model():
    w = W.copy()
    model = kuiper.load_hlo(DENSE, constants={1: w, 2: B})
    w[:] = 0
    np.testing.assert_allclose(model(X), EXPECTED, rtol=1e-6, atol=1e-6)


def test_parameters_left_are_numbered_in_order():
    model = kuiper.load_hlo(DENSE, constants={1: W})
    assert [spec.name for spec in model.inputs] == ["x", "b"]
    np.testing.assert_allclose(model(X, B), EXPECTED, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("constants, message", [
    ({3: W}, r"constants=\{3: \.\.\.\} names no ENTRY parameter; the parameters are 0 \(x: f32\[2,3\]\)"),
    ({1: W.T}, r"parameter 1 \(w\): expected shape \(3, 4\) \(f32\[3,4\]\), got \(4, 3\)"),
    ({1: W.astype(np.float64)}, r"parameter 1 \(w\): expected element type float32 \(f32\[3,4\]\), got float64"),
    ({"b": [1, 2, 3, 4]}, r"parameter 2 \(b\): expected an array of f32\[4\], got list"),
])
def test_a_constant_that_does_not_fit_its_parameter_is_an_input_error(constants, message):
    with pytest.raises(InputError, match=message):
        kuiper.load_hlo(DENSE, constants=constants)
