"""Every derivative rule beside the IR's operation table against central differences in float64."""

from __future__ import annotations

import numpy as np
import pytest

from kuiper.ir import make, simplify
from kuiper.ir.codegen_numpy import compile_elementwise
from kuiper.ir.derivatives import DERIVATIVES
from kuiper.ir.functions import INTRINSICS, operation
from kuiper.ir.nodes import Assign, Block, Function, Var

ARITY = {name: operation(name).arity for name in DERIVATIVES}
# Points inside every function's smooth domain (asin/acos/atanh need |x| < 1, acosh x > 1, log x > 0).
POINTS = {1: np.array([0.3, 0.55, 0.8]), 2: (np.array([0.3, 0.55, 1.7]), np.array([0.45, 0.8, 0.35]))}
SHIFTED = {"acosh": 1.0}


def _node(name, *args):
    if name in INTRINSICS:
        return make.call(name, *args)
    builders = {"neg": make.neg, "max": make.maximum, "min": make.minimum}
    return builders.get(name, getattr(make, name, None))(*args)


def _run(value, params, inputs):
    out = Var("out", value.dtype)
    function = simplify(Function("f", params, Block((Assign(out, value),)), (out,)))
    return np.asarray(compile_elementwise(function, np)(*inputs), dtype=np.float64)


@pytest.mark.parametrize("name", sorted(DERIVATIVES))
def test_derivative_rule_matches_central_differences(name):
    arity = ARITY[name]
    params = tuple(Var(f"x{i}", "float64") for i in range(arity))
    inputs = [POINTS[1] + SHIFTED.get(name, 0.0)] if arity == 1 else list(POINTS[2])
    result = _node(name, *params)
    grads = DERIVATIVES[name](params, result, make.const(1.0, "float64"))
    step = 1e-6
    for position, grad in enumerate(grads):
        got = _run(make.add(grad, make.mul(params[0], 0.0)), params, inputs)  # broadcast a constant grad
        plus = [x + step if i == position else x for i, x in enumerate(inputs)]
        minus = [x - step if i == position else x for i, x in enumerate(inputs)]
        want = (_run(result, params, plus) - _run(result, params, minus)) / (2 * step)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7, err_msg=f"d{name}/dx{position}")


def test_abs_has_the_zero_subgradient_at_zero():
    x = Var("x0", "float64")
    (grad,) = DERIVATIVES["abs"]((x,), make.call("abs", x), make.const(1.0, "float64"))
    np.testing.assert_array_equal(_run(grad, (x,), [np.array([-2.0, 0.0, 3.0])]), [-1.0, 0.0, 1.0])
