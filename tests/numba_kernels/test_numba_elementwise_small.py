"""Small calls of the compiled elementwise path (issue 27): straight to NumPy, same answers.

Below ``MIN_ELEMENTS`` output elements a call must not prepare the interpreter's
arguments at all (that cost more than the tiny NumPy passes); at and above it, the
interpreter still runs, except for short programs of cheap steps, which NumPy runs
faster up to the parallel line.  Values are checked against float64 references, or
the two paths against each other.
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


CHEAP = {  # short programs of cheap steps: NumPy below the parallel line
    "add": (make.add, 2),
    "div": (make.div, 2),
    "relu": (composites.relu, 1),
    "leaky relu (3 steps)": (lambda x: composites.leaky_relu(x, 0.01), 1),
    "box decode (3 steps)": (lambda x, grid: make.mul(make.add(make.mul(x, 2.0), grid), 8.0), 2),
}


@pytest.mark.parametrize("name", sorted(CHEAP))
def test_short_cheap_programs_stay_on_numpy_below_the_parallel_line_with_the_interpreters_bits(name):
    build, arity = CHEAP[name]
    run = compile_math(build, arity)
    assert run.program.is_cheap()
    small = [RNG.standard_normal((40, 1000)).astype(np.float32) for _ in range(arity)]
    got = run(*small)
    assert run.last_path == "numpy"  # no numba for it: ViT's position-embedding add, YOLO's box decode
    large = []
    for value in small:  # the same values first, then more of them, up to the parallel line
        grown = np.resize(value.reshape(-1), compiled.PARALLEL_WORK)
        large.append(grown)
    interpreted = run(*large)
    assert run.last_path in ("serial", "parallel")
    np.testing.assert_array_equal(got.reshape(-1), interpreted[: got.size])  # IEEE: the same bits either way


@pytest.mark.parametrize("build", [composites.sigmoid, composites.hardswish, composites.gelu],
                         ids=["sigmoid (exp)", "hardswish (5 steps)", "gelu (erf)"])
def test_transcendental_or_longer_programs_take_the_interpreter_from_min_elements(build):
    run = compile_math(build, 1)
    assert not run.program.is_cheap()
    x = RNG.standard_normal((4, compiled.MIN_ELEMENTS // 4)).astype(np.float32)
    got = run(x)
    assert run.last_path in ("serial", "parallel")
    np.testing.assert_allclose(got, run.numpy_path(x), rtol=3e-6, atol=4e-7)
