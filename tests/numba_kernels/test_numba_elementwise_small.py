"""Small calls of the compiled elementwise path (issues 27 and 44): no preparing, same answers.

Below ``MIN_ELEMENTS`` output elements a call must not prepare the interpreter's
arguments at all (that cost more than the tiny NumPy passes): a one-pass program goes
straight to NumPy, a longer one over float32 inputs of one shape to the interpreter as
they are (``_small_call``: an LSTM cell's gates, 17 NumPy passes on 1 x 128, cost 20 us
there and 4-6 us in the interpreter).  At and above it the interpreter runs, except for
short programs of cheap steps, which NumPy runs faster up to the parallel line.  Values
are checked against float64 references, or the two paths against each other.
"""

from __future__ import annotations

import functools

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
@pytest.mark.parametrize("name, build, reference, path", [
    ("silu (5 passes)", composites.silu, lambda x: silu64(x), "serial"),
    ("exp (1 pass)", lambda x: make.call("exp", x), lambda x: np.exp(x.astype(np.float64)), "numpy"),
])
def test_calls_below_the_threshold_skip_the_interpreter_arguments(shape, name, build, reference, path, monkeypatch):
    run = compile_math(build, 1)
    assert run.program is not None  # the interpreter could run it; the size decides

    def refuse(inputs):
        raise AssertionError("arguments() prepared for a call below MIN_ELEMENTS")

    monkeypatch.setattr(run.program, "arguments", refuse)
    x = RNG.standard_normal(shape).astype(np.float32)
    got = run(x)
    assert run.last_path == path  # one pass: NumPy's one ufunc; more: the interpreter, unprepared
    np.testing.assert_allclose(got, reference(x), rtol=2e-6, atol=1e-7)


def lstm_cell(i_x, i_h, f_x, f_h, g_x, g_h, c):
    """An LSTM cell's new state from its gates' two halves (input and hidden products) and the old
    state: seven full-size inputs, more than a conv epilogue's four slots."""
    return make.add(make.mul(composites.sigmoid(make.add(f_x, f_h)), c),
                    make.mul(composites.sigmoid(make.add(i_x, i_h)), make.call("tanh", make.add(g_x, g_h))))


def lstm_cell64(i_x, i_h, f_x, f_h, g_x, g_h, c):
    i_x, i_h, f_x, f_h, g_x, g_h, c = (v.astype(np.float64) for v in (i_x, i_h, f_x, f_h, g_x, g_h, c))
    sigmoid = lambda v: 1.0 / (1.0 + np.exp(-v))
    return sigmoid(f_x + f_h) * c + sigmoid(i_x + i_h) * np.tanh(g_x + g_h)


SMALL_PROGRAMS = {  # name: (build, arity, float64 reference)
    "silu": (composites.silu, 1, silu64),
    "gelu (erf)": (composites.gelu, 1, None),
    "lstm cell (7 inputs)": (lstm_cell, 7, lstm_cell64),
    "8 inputs": (lambda *x: make.call("tanh", functools.reduce(make.mul, x)), 8,
                 lambda *x: np.tanh(functools.reduce(np.multiply, [v.astype(np.float64) for v in x]))),
}


@pytest.mark.parametrize("name", sorted(SMALL_PROGRAMS))
@pytest.mark.parametrize("shape", [(1, 128), (3, 7), ()])
def test_a_small_call_gives_the_bits_of_the_interpreters_large_call(name, shape):
    build, arity, reference = SMALL_PROGRAMS[name]
    run = compile_math(build, arity)
    small = [RNG.standard_normal(shape).astype(np.float32) for _ in range(arity)]
    got = run(*small)
    assert run.last_path == "serial" and got.shape == shape and got.dtype == np.float32
    # The same values first, then more of them: the prepared interpreter, which the small call must match.
    large = [np.resize(value.reshape(-1), 3 * compiled.MIN_ELEMENTS + 5) for value in small]
    interpreted = run(*large)
    assert run.last_path in ("serial", "parallel")
    np.testing.assert_array_equal(got.reshape(-1), interpreted[: got.size])
    if reference is not None:
        np.testing.assert_allclose(got, reference(*small), rtol=3e-6, atol=3e-7)


def test_more_than_eight_inputs_stay_on_numpy():
    run = compile_math(lambda *x: make.call("tanh", functools.reduce(make.add, x)), 9)
    assert run.program is not None and not run.small_calls
    inputs = [RNG.standard_normal((2, compiled.MIN_ELEMENTS)).astype(np.float32) for _ in range(9)]
    got = run(*inputs)
    assert run.last_path == "numpy"
    np.testing.assert_array_equal(got, run.numpy_path(*inputs))


def test_a_small_strided_input_is_read_in_its_logical_order():
    run = compile_math(lstm_cell, 7)
    base = RNG.standard_normal((8, 6)).astype(np.float32)
    inputs = [base.T] + [RNG.standard_normal((6, 8)).astype(np.float32) for _ in range(6)]  # a transposed view
    got = run(*inputs)
    assert run.last_path == "serial"
    np.testing.assert_array_equal(got, run(*[np.ascontiguousarray(v) for v in inputs]))
    np.testing.assert_allclose(got, lstm_cell64(*inputs), rtol=3e-6, atol=3e-7)


def test_the_specialized_small_call_gives_the_calls_bits_and_leaves_other_inputs_to_the_fallback():
    run = compile_math(lstm_cell, 7)
    sample = [RNG.standard_normal((1, 128)).astype(np.float32) for _ in range(7)]
    fallen = []

    def fallback(*xs):  # the op's forward, in a model
        fallen.append(xs)

    fast = run.specialized(sample, fallback)
    assert fast is not None
    np.testing.assert_array_equal(fast(*sample), run(*sample))
    assert not fallen
    others = {
        "another shape": [v.reshape(2, 64) for v in sample],
        "one input of another shape": sample[:6] + [sample[6].reshape(128, 1)],  # refused by the kernel
        "one input larger": sample[:6] + [np.tile(sample[6], (2, 1))],
        "float64": [sample[0].astype(np.float64)] + sample[1:],
        "a NumPy scalar": [np.float32(0.5)] + sample[1:],
        "an input fewer": sample[:-1],
        "an input more": sample + sample[:1],
    }
    for what, inputs in others.items():
        fast(*inputs)
        assert len(fallen) == 1, what
        fallen.clear()
    # No specialization where the call would not take the small path.
    assert run.specialized([v.repeat(8, axis=1) for v in sample], fallback) is None  # 1024 elements
    assert compile_math(make.neg, 1).specialized(sample[:1], fallback) is None  # one pass: NumPy's ufunc


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


def test_the_specialized_small_call_reads_its_inputs_as_they_lie(monkeypatch):
    """The kernel flattens them (``run_small``): views into a wider array, a transposed view and a 3-D
    input give the bits of the same values made contiguous; nothing is raveled in Python first."""
    run = compile_math(lstm_cell, 7)
    gates = RNG.standard_normal((1, 512)).astype(np.float32)
    sample = [gates[:, 128 * k:128 * (k + 1)] for k in range(4)] + [
        RNG.standard_normal((1, 128)).astype(np.float32) for _ in range(3)]
    fast = run.specialized(sample, None)
    monkeypatch.setattr(compiled.vm, "run_program", None)  # the small path needs no other kernel
    np.testing.assert_allclose(fast(*sample), lstm_cell64(*sample), rtol=3e-6, atol=3e-7)
    np.testing.assert_array_equal(fast(*sample), run(*[np.ascontiguousarray(v) for v in sample]))
    transposed = [np.ascontiguousarray(v.T).T for v in sample]  # (1, 128) views of (128, 1) arrays
    np.testing.assert_array_equal(fast(*transposed), fast(*sample))
    cube = [RNG.standard_normal((2, 3, 4)).astype(np.float32) for _ in range(7)]
    fast3 = run.specialized(cube, None)
    np.testing.assert_array_equal(fast3(*cube), fast3(*[np.asfortranarray(v) for v in cube]))
    np.testing.assert_allclose(fast3(*cube), lstm_cell64(*cube), rtol=3e-6, atol=3e-7)
