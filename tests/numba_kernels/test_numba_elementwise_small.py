"""Small calls of the compiled elementwise path (issue 27): straight to NumPy, same answers.

Below ``MIN_ELEMENTS`` output elements a call must not prepare the interpreter's
arguments at all (that cost more than the tiny NumPy passes); at and above it, the
interpreter still runs.  Values are checked against float64 references.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from kuiper.ir import composites, make
from kuiper.numba_kernels import elementwise as compiled
from kuiper.ops.elementwise import ElementwiseMath, function_for

RNG = np.random.default_rng(27)


def compile_math(build, arity):
    return compiled.CompiledElementwise(function_for(ElementwiseMath(build, arity), ("float32",) * arity))


def silu64(x):
    x = x.astype(np.float64)
    return x / (1.0 + np.exp(-x))


@pytest.mark.parametrize("shape", [(1, 8), (3, 5), (1023,), (2, 511)])
def test_calls_below_the_threshold_skip_the_interpreter_arguments(shape, monkeypatch):
    run = compile_math(composites.silu, 1)
    assert run.program is not None  # the interpreter could run it; the size decides

    def refuse(inputs):
        raise AssertionError("arguments() prepared for a call below MIN_ELEMENTS")

    monkeypatch.setattr(run.program, "arguments", refuse)
    x = RNG.standard_normal(shape).astype(np.float32)
    got = run(x)
    assert run.last_path == "numpy"
    np.testing.assert_allclose(got, silu64(x), rtol=2e-6, atol=1e-7)


def test_one_element_inputs_do_not_make_a_small_call_large():
    run = compile_math(lambda x, s: make.mul(x, s), 2)
    x = RNG.standard_normal((1, 8)).astype(np.float32)
    got = run(x, np.float32([2.0]))
    assert run.last_path == "numpy"
    np.testing.assert_array_equal(got, x * np.float32(2.0))


@pytest.mark.parametrize("shape", [(compiled.MIN_ELEMENTS,), (4, 300), (1, 1, 64, 64)])
def test_calls_at_or_above_the_threshold_still_take_the_interpreter(shape):
    run = compile_math(composites.silu, 1)
    x = RNG.standard_normal(shape).astype(np.float32)
    out = np.empty_like(x)
    assert run(x, out=out) is out
    assert run.last_path in ("serial", "parallel")
    np.testing.assert_allclose(out, silu64(x), rtol=2e-6, atol=1e-7)


def test_a_large_broadcast_input_with_a_small_one_goes_to_numpy():
    run = compile_math(lambda a, b: make.mul(make.add(a, b), a), 2)  # two steps: the interpreter's kind
    big = RNG.standard_normal((4, 1024)).astype(np.float32)
    row = RNG.standard_normal((1, 1024)).astype(np.float32)
    got = run(big, row)
    assert run.last_path == "numpy"  # full-size inputs of two shapes: not the interpreter's
    np.testing.assert_array_equal(got, (big + row) * big)


@pytest.mark.parametrize("step", [make.add, make.sub, make.mul, make.div])
def test_one_arithmetic_step_stays_on_numpy_below_the_parallel_line_with_the_interpreters_bits(step):
    run = compile_math(step, 2)
    a, b = (RNG.standard_normal((40, 1000)).astype(np.float32) for _ in range(2))
    got = run(a, b)
    assert run.last_path == "numpy"  # no numba for it: ViT's position-embedding add
    large = compiled.PARALLEL_WORK // 4 + 1
    x, y = a.reshape(-1)[:1].repeat(large), b.reshape(-1)[:1].repeat(large)
    x[: a.size], y[: b.size] = a.reshape(-1), b.reshape(-1)
    interpreted = run(x, y)
    assert run.last_path in ("serial", "parallel")
    np.testing.assert_array_equal(got.reshape(-1), interpreted[: a.size])  # IEEE: the same bits either way
