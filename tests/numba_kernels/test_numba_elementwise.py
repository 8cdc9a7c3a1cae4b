"""The compiled elementwise interpreter (kuiper/numba_kernels/elementwise*.py).

References are independent of the code under test: float64 math from Python's
``math`` module or NumPy in float64, and the NumPy evaluation of the same IR
(kuiper.ir.codegen_numpy).  Sizes are not multiples of the interpreter's chunk,
so partial chunks and partial blocks are exercised.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

pytest.importorskip("numba")

from kuiper.ir import composites, make
from kuiper.ir.codegen_numpy import compile_elementwise as compile_numpy
from kuiper.numba_kernels import elementwise as compiled
from kuiper.numba_kernels import kernel_codes as codes
from kuiper.numba_kernels import elementwise_kernels as vm
from kuiper.numba_kernels import runtime
from kuiper.ops.elementwise import ElementwiseMath, function_for

SIZE = 3 * vm.CHUNK + 517  # partial chunks


pytestmark = pytest.mark.usefixtures("kernel_variant")  # both builds of every kernel (conftest.py)


def compile_math(build, arity, dtype="float32"):
    function = function_for(ElementwiseMath(build, arity), (dtype,) * arity)
    return compiled.CompiledElementwise(function), compile_numpy(function)


def interpreted(run):
    """``run`` taking the interpreter from its own floor (MIN_ELEMENTS) up, for a short program of
    cheap steps too, which otherwise stays on NumPy below PARALLEL_WORK: so the interpreter's
    answers for such programs are checked at a test's size."""
    run.min_elements = compiled.MIN_ELEMENTS
    return run


def ulps_apart(got, want):
    """Distance in float32 units in the last place (sign-aware), for finite values."""
    as_int = lambda a: np.where(a.view(np.int32) < 0, np.int32(-2**31) - a.view(np.int32), a.view(np.int32))
    return np.abs(as_int(got).astype(np.int64) - as_int(want).astype(np.int64))


def interpreted_within_ulps(func: str, reference, x, ulps: int):
    """The interpreter's ``func`` over x, checked to be at most ``ulps`` from ``reference`` in float64
    (rounded to float32) wherever that is finite; returns (got, that reference)."""
    run, _ = compile_math(lambda v: make.call(func, v), 1)
    got = run(x)
    assert run.last_path in ("serial", "parallel")
    with np.errstate(all="ignore"):
        want = reference(x.astype(np.float64)).astype(np.float32)  # correctly rounded to float32
    finite = np.isfinite(want)
    assert ulps_apart(got[finite], want[finite]).max() <= ulps, f"{func}: over {ulps} ulps from float64"
    return got, want


def test_exp_is_within_a_few_ulps_of_float64_over_the_whole_float32_range():
    x = np.concatenate([np.linspace(-110, 95, 200_003, dtype=np.float32),
                        np.float32([-np.inf, np.inf, 0.0, -0.0, 1e-30, -1e-30, 88.72, 88.73, -87.33, -103.9])])
    run, _ = compile_math(lambda v: make.call("exp", v), 1)
    got = run(x)
    assert run.last_path in ("serial", "parallel")
    with np.errstate(over="ignore"):
        want = np.exp(x.astype(np.float64)).astype(np.float32)  # correctly rounded to float32
    normal = np.abs(want) >= np.finfo(np.float32).tiny
    assert ulps_apart(got[normal], want[normal]).max() <= 3
    # Denormal results: absolute error within one denormal step; zero and inf exactly where float64 says so.
    assert np.abs(got[~normal].astype(np.float64) - want[~normal]).max() <= 2.0 ** -149
    assert np.array_equal(np.isinf(got), np.isinf(want)) and np.array_equal(got == 0, want == 0)


def test_exp_and_erf_keep_nan():
    x = np.full(SIZE, np.nan, np.float32)
    x[::3] = 1.0
    for func in ("exp", "erf"):
        run, _ = compile_math(lambda v, f=func: make.call(f, v), 1)
        got = run(x)
        assert np.isnan(got[1::3]).all() and not np.isnan(got[::3]).any()


def test_erf_is_as_accurate_as_the_float32_fit_it_implements():
    x = np.linspace(-7, 7, 100_001, dtype=np.float32)
    run, _ = compile_math(lambda v: make.call("erf", v), 1)
    got = run(x).astype(np.float64)
    want = np.array([math.erf(v) for v in x.astype(np.float64)])
    # The fit's own error is 1.2e-7; evaluated in float32 it is 3.5e-7 on the NumPy path too
    # (kuiper/ir/erf.py, the same formula), at small |x| where 1 - erfc cancels.
    assert np.abs(got - want).max() < 4e-7


def test_tanh_is_within_an_ulp_or_two_of_float64_and_keeps_signs_and_specials():
    # Both sides of the switch from the series to the exp form (|x| = 0.55), and far out where exp overflows.
    x = np.concatenate([np.linspace(-12, 12, 400_003, dtype=np.float32),
                        np.float32([0.55, -0.55, np.nextafter(np.float32(0.55), np.float32(0)), 44.0, 45.0, 1e30]),
                        np.float32([0.0, -0.0, 1e-30, -1e-40, np.inf, -np.inf, np.nan])])
    got, _ = interpreted_within_ulps("tanh", np.tanh, x, 2)
    assert np.isnan(got[-1]) and np.signbit(got[-6]) and not np.signbit(got[-7])
    assert got[-3] == 1.0 and got[-2] == -1.0


def test_log_is_within_two_ulps_of_float64_over_the_whole_float32_range():
    rng = np.random.default_rng(7)
    x = np.concatenate([np.exp(rng.uniform(-103, 88.7, 300_000)).astype(np.float32),  # denormals to the largest
                        np.linspace(0.5, 2.0, 100_001, dtype=np.float32),  # around 1, where log is near 0
                        np.float32([np.finfo(np.float32).max, 1e-45, np.nextafter(np.float32(1), np.float32(2))]),
                        np.float32([1.0, 0.0, -0.0, -1.0, np.inf, -np.inf, np.nan])])
    got, _ = interpreted_within_ulps("log", np.log, x, 2)  # NumPy's own float32 log: 3
    np.testing.assert_array_equal(got[-7:], [0.0, -np.inf, -np.inf, np.nan, np.inf, np.nan, np.nan])


def test_log1p_is_within_three_ulps_of_float64_and_keeps_small_inputs_digits():
    rng = np.random.default_rng(8)
    x = np.concatenate([np.linspace(-0.999, 2.0, 300_001, dtype=np.float32),
                        np.exp(rng.uniform(-100, 88, 100_000)).astype(np.float32),  # tiny to huge
                        -np.exp(rng.uniform(-100, -0.01, 100_000)).astype(np.float32),  # -1 < x < 0
                        np.float32([1e-8, -1e-8, 1e-30, -1e-40]),
                        np.float32([0.0, -0.0, -1.0, -2.0, np.inf, -np.inf, np.nan])])
    got, _ = interpreted_within_ulps("log1p", np.log1p, x, 3)
    np.testing.assert_array_equal(got[-7:], [0.0, -0.0, -np.inf, np.nan, np.inf, np.nan, np.nan])
    assert np.signbit(got[-6])


def test_expm1_is_within_two_ulps_of_float64_and_keeps_small_inputs_digits():
    # Both sides of the switch from the series to exp(x) - 1 (|x| = 1), tiny inputs, overflow.
    x = np.concatenate([np.linspace(-110, 89, 400_003, dtype=np.float32),
                        np.linspace(-1.5, 1.5, 100_001, dtype=np.float32),
                        np.float32([1.0, -1.0, np.nextafter(np.float32(1), np.float32(0)), 1e-8, -1e-30, 1e-45]),
                        np.float32([0.0, -0.0, np.inf, -np.inf, np.nan])])
    got, want = interpreted_within_ulps("expm1", np.expm1, x, 2)
    np.testing.assert_array_equal(got[-5:], [0.0, -0.0, np.inf, -1.0, np.nan])
    assert np.signbit(got[-4]) and np.array_equal(np.isinf(got), np.isinf(want))


def test_costly_steps_count_towards_the_parallel_launch(monkeypatch):
    """A program's work weighs each step by its cost: 100 K elements of tanh are worth a second
    thread, where 100 K elements of a multiply-add with as many steps are not."""
    monkeypatch.setattr(runtime, "PARALLEL_WORK", 500_000)
    runtime.set_threads(2)
    try:
        x = np.random.default_rng(0).standard_normal(100_000).astype(np.float32)
        costly, _ = compile_math(lambda v: make.call("tanh", v), 1)
        cheap, _ = compile_math(lambda v: make.arith("add", make.arith("mul", v, v), v), 1)
        costly(x)
        interpreted(cheap)(x)
        assert (costly.last_path, cheap.last_path) == ("parallel", "serial")
    finally:
        runtime.set_threads(None)


ACTIVATIONS = {
    "relu": (composites.relu, lambda x: max(x, 0.0)),
    "relu6": (lambda v: composites.clamp(v, 0.0, 6.0), lambda x: min(max(x, 0.0), 6.0)),
    "sigmoid": (composites.sigmoid, lambda x: 1 / (1 + math.exp(-x)) if x > -700 else 0.0),
    "silu": (composites.silu, lambda x: x / (1 + math.exp(-x)) if x > -700 else -0.0),
    "gelu": (composites.gelu, lambda x: 0.5 * x * (1 + math.erf(x / math.sqrt(2)))),
    "hardswish": (composites.hardswish, lambda x: x * min(max(x + 3, 0.0), 6.0) / 6),
    "elu": (composites.elu, lambda x: x if x > 0 else math.expm1(x)),
    "leaky_relu": (lambda v: composites.leaky_relu(v, 0.01), lambda x: x if x > 0 else 0.01 * x),
    "tanh": (lambda v: make.call("tanh", v), math.tanh),
    "gelu_tanh": (composites.gelu_tanh,
                  lambda x: 0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
    "mish": (composites.mish, lambda x: x * math.tanh(math.log1p(math.exp(x))) if x < 700 else x),
    "softplus": (composites.softplus, lambda x: x if x > 20 else math.log1p(math.exp(x))),
    "selu": (composites.selu, lambda x: 1.0507009873554805 * (x if x > 0 else 1.6732632423543772 * math.expm1(x))),
    "celu": (lambda v: composites.celu(v, 0.5), lambda x: max(x, 0.0) + min(0.0, 0.5 * math.expm1(min(x, 0.0) / 0.5))),
    "log_sigmoid": (composites.log_sigmoid, lambda x: min(x, 0.0) - math.log1p(math.exp(-abs(x)))),
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activations_match_float64(name):
    build, reference = ACTIVATIONS[name]
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(SIZE) * 6).astype(np.float32)
    x[:8] = [-3e-8, 1e-7, -20, 20, -88, 88, -1000, 1000]
    run = interpreted(compile_math(build, 1)[0])
    got = run(x)
    assert run.last_path in ("serial", "parallel")
    want = np.array([reference(v) for v in x.astype(np.float64)])
    # GELU: the float32 erf fit's absolute error 1.2e-7, scaled by |x| / 2; with tanh, 1 + tanh cancels
    # for negative x, so float32's step at 1 (1.2e-7) is the error, whatever computes the tanh.
    allowed = 2e-6 * np.abs(want) + 1e-30 + (1.3e-7 * np.abs(x) if name in ("gelu", "gelu_tanh") else 0.0)
    bad = np.abs(got - want) > allowed
    assert not bad.any(), f"{name}: at x={x[bad][:5]} got {got[bad][:5]}, float64 {want[bad][:5]}"


def test_two_inputs_constants_and_one_element_inputs_match_numpy():
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((3, 7, 251)).astype(np.float32) for _ in range(2))
    scale = np.float32([[[1.5]]])

    def build(x, y, s):
        return make.select(make.compare("gt", x, y), make.mul(x, s), make.sub(make.div(y, 3.0), 0.25))

    run, reference = compile_math(build, 3)
    got = run(a, b, scale)
    assert run.last_path in ("serial", "parallel")
    np.testing.assert_allclose(got, reference(a, b, scale), rtol=1e-6, atol=0)


BINARY_STEPS = {
    **{op: functools.partial(make.arith, op) for op in ("add", "sub", "mul", "max", "min")},
    "div": make.div,
    **{op: (lambda a, b, op=op: make.cast(make.compare(op, a, b), "float32"))
       for op in ("gt", "ge", "lt", "le", "eq", "ne")},
}


@pytest.mark.parametrize("step", sorted(BINARY_STEPS))
def test_a_constant_on_either_side_of_a_step_gives_numpys_bits(step):
    """A constant operand is read once, not streamed from a register: on the right, or on the left
    for steps whose operands do not commute; the others' operands swap (k + x, k < x) and keep their
    bits.  Signed zeros, NaN and infinities on both sides, constants in the IR and one-element inputs."""
    x = np.random.default_rng(2).standard_normal(SIZE).astype(np.float32) * 4
    x[:8] = [0.0, -0.0, np.nan, np.inf, -np.inf, 0.5, -2.0, 3.0]
    op = BINARY_STEPS[step]
    for k in (0.5, -0.0, 0.0, 3.0, float("nan"), float("inf")):
        cases = [(lambda v: op(v, k), (x,)), (lambda v: op(k, v), (x,)),
                 (lambda v, c: op(v, c), (x, np.float32([k]))), (lambda v, c: op(c, v), (x, np.float32([k])))]
        for build, inputs in cases:
            run, reference = compile_math(build, len(inputs))
            with np.errstate(all="ignore"):
                got, want = interpreted(run)(*inputs), reference(*inputs)
            assert run.last_path in ("serial", "parallel")
            number = ~np.isnan(want)
            assert np.array_equal(got, want, equal_nan=True), f"{step} with {k}"
            if step not in ("max", "min"):  # IEEE leaves max(0, -0)'s sign open; NumPy's depends on a scalar operand
                assert np.array_equal(np.signbit(got[number]), np.signbit(want[number])), f"{step} with {k}"


def test_a_polynomial_runs_as_multiply_adds_with_numpys_bits():
    """Horner's steps (acc * t + c) are one MULADD row each, the product rounded before the add as
    NumPy's is; a product read twice stays a step of its own."""
    x = np.random.default_rng(4).standard_normal(SIZE).astype(np.float32) * 3
    x[:4] = [0.0, -0.0, np.inf, np.nan]
    coefficients = (0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807)

    def horner(v, c, w):
        acc = make.arith("mul", v, coefficients[0])
        for coefficient in coefficients[1:]:
            acc = make.arith("add", make.arith("mul", acc, v), coefficient)
        shared = make.arith("mul", acc, w)  # read by both terms below: not merged
        return make.arith("add", make.arith("add", shared, c), make.arith("mul", shared, shared))

    run, reference = compile_math(horner, 3)
    rows = [row[0] for row in run.program.body]
    assert rows.count(codes.MULADD) == 5 and rows.count(codes.MUL) == 2  # acc * v + c four times, shared^2 + .
    w = np.random.default_rng(5).standard_normal(SIZE).astype(np.float32)
    for c in (np.float32([0.5]), np.full(SIZE, -2.0, np.float32)):  # a constant, and streamed
        with np.errstate(all="ignore"):
            got, want = run(x, c, w), reference(x, c, w)
        assert run.last_path in ("serial", "parallel")
        assert np.array_equal(got, want, equal_nan=True)


def test_a_constant_power_or_base_gives_the_bits_of_the_same_value_streamed():
    """pow is libm's powf in the interpreter, where NumPy special-cases exponents (** 0.5 is its sqrt:
    -inf ** 0.5 is NaN there, inf in C), so the reference here is the interpreter itself, the
    constant given as a full-size input."""
    x = np.random.default_rng(3).standard_normal(SIZE).astype(np.float32) * 3
    x[:6] = [0.0, -0.0, np.nan, np.inf, -np.inf, -2.0]
    streamed, _ = compile_math(lambda a, b: make.arith("pow", a, b), 2)
    for k in (0.5, 1.7, -1.0, 3.0, float("nan")):  # not 2: x ** 2 simplifies to x * x
        full = np.full_like(x, k)
        for build, want in ((lambda v: make.arith("pow", v, k), streamed(x, full)),
                            (lambda v: make.arith("pow", k, v), streamed(full, x))):
            run, _ = compile_math(build, 1)
            got = interpreted(run)(x)
            assert run.last_path in ("serial", "parallel") and streamed.last_path in ("serial", "parallel")
            assert np.array_equal(got.view(np.int32), want.view(np.int32)), f"pow with {k}"


def test_one_element_inputs_change_between_calls_and_keep_numpys_result_shape():
    x = np.random.default_rng(6).standard_normal(5000).astype(np.float32)
    run, reference = compile_math(lambda v, s: make.mul(make.add(v, s), s), 2)
    interpreted(run)
    for scale in (np.float32([2.0]), np.float32([-0.5])):  # the same tables, new values
        np.testing.assert_array_equal(run(x, scale), reference(x, scale))
        assert run.last_path in ("serial", "parallel")
    wider = np.float32([[3.0]])  # broadcasting adds a dim: (1, 5000)
    got = run(x, wider)
    assert got.shape == (1, 5000) and run.last_path == "numpy"
    np.testing.assert_array_equal(got, reference(x, wider))


@pytest.mark.parametrize("case", ["broadcast", "float64", "nine inputs", "tiny, one element broadcast"])
def test_calls_the_interpreter_does_not_take_go_to_numpy_with_the_same_answer(case):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 64, 40)).astype(np.float32)
    arity, dtype, inputs = 2, "float32", None
    if case == "broadcast":
        inputs = (x, rng.standard_normal((64, 1)).astype(np.float32))
    elif case == "float64":
        dtype, inputs = "float64", (x.astype(np.float64), x.astype(np.float64))
    elif case == "tiny, one element broadcast":  # tiny inputs of one shape take the interpreter (``_small_call``)
        inputs = (x[0, 0], x[0, 1, :1])
    else:  # more than PROGRAM_INPUTS
        arity, inputs = 9, tuple(x + k for k in range(9))

    def build(*values):
        total = values[0]
        for value in values[1:]:
            total = make.add(total, make.call("exp", value))
        return total

    run, reference = compile_math(build, arity, dtype)
    got = run(*inputs)
    assert run.last_path == "numpy"
    np.testing.assert_array_equal(got, reference(*inputs))


def test_results_do_not_depend_on_the_thread_count():
    x = np.random.default_rng(3).standard_normal(1 << 18).astype(np.float32)
    run, _ = compile_math(composites.gelu, 1)
    results = []
    for count in (1, 2, 3):
        runtime.set_threads(count)
        results.append(run(x))
    runtime.set_threads(None)
    assert all(np.array_equal(results[0], r) for r in results[1:])


def test_strided_inputs_are_taken():
    x = np.random.default_rng(5).standard_normal((2, 300, 17)).astype(np.float32)
    permuted = np.transpose(x, (0, 2, 1))
    run, reference = compile_math(composites.gelu, 1)
    got = run(permuted)
    assert run.last_path in ("serial", "parallel") and got.shape == permuted.shape
    np.testing.assert_array_equal(got, run(np.ascontiguousarray(permuted)))
    np.testing.assert_allclose(got, reference(permuted), rtol=1e-5, atol=3e-7)


def test_permuted_inputs_run_in_memory_order_and_keep_their_layout():
    """Inputs that are the same permutation of dense buffers (a transpose before GELU) stream
    without a copy; the result has their layout and the values of the C-ordered run."""
    rng = np.random.default_rng(7)
    a = np.transpose(rng.standard_normal((2, 40, 70)).astype(np.float32), (0, 2, 1))
    b = np.transpose(rng.standard_normal((2, 40, 70)).astype(np.float32), (0, 2, 1))
    run, reference = compile_math(lambda x, y: make.add(composites.gelu(x), make.mul(y, 0.5)), 2)
    got = run(a, b)
    assert run.last_path in ("serial", "parallel")
    assert got.shape == a.shape and got.strides == a.strides and not np.shares_memory(got, a)
    np.testing.assert_array_equal(got, run(np.ascontiguousarray(a), np.ascontiguousarray(b)))
    np.testing.assert_allclose(got, reference(a, b), rtol=1e-5, atol=3e-7)


def test_inputs_of_different_layouts_or_an_out_buffer_give_c_order():
    rng = np.random.default_rng(8)
    c_ordered = rng.standard_normal((70, 40)).astype(np.float32)
    transposed = np.transpose(rng.standard_normal((40, 70)).astype(np.float32))
    run, reference = compile_math(lambda x, y: make.mul(x, y), 2)
    mixed = run(c_ordered, transposed)
    assert mixed.flags.c_contiguous
    np.testing.assert_array_equal(mixed, reference(c_ordered, transposed))
    out = np.empty((70, 40), np.float32)
    assert run(transposed, transposed, out=out) is out
    np.testing.assert_array_equal(out, transposed * transposed)


def test_out_may_be_an_input_buffer():
    x = np.random.default_rng(4).standard_normal(SIZE).astype(np.float32)
    run, reference = compile_math(composites.silu, 1)
    want = reference(x)
    result = run(x, out=x)
    assert result is x and run.last_path in ("serial", "parallel")
    np.testing.assert_allclose(x, want, rtol=2e-6, atol=0)


def test_unsupported_math_stays_on_numpy():
    run, reference = compile_math(lambda v: make.call("atan2", v, v), 1)
    assert run.program is None and "NumPy" in run.reason
    x = np.linspace(-3, 3, SIZE, dtype=np.float32)
    np.testing.assert_array_equal(run(x), reference(x))
