"""HLO opcodes follow XLA's semantics where they differ from NumPy's (values worked out by hand)."""

from __future__ import annotations

import math
import pickle

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kuiper
from kuiper.errors import HloSyntaxError, UnsupportedOperatorError


def run(body: str, *inputs, computations: str = ""):
    """Run ``body`` (the ENTRY's instructions) on ``inputs``."""
    model = kuiper.load_hlo(f"HloModule test\n{computations}\nENTRY main {{\n{body}\n}}\n", backend="numpy")
    result = model(*inputs, to_numpy=True)
    return [np.asarray(r) for r in result] if isinstance(result, tuple) else np.asarray(result)


def binary(opcode: str, a, b, type_: str = "s32", extra: str = ""):
    n = len(a)
    return run(f"  a = {type_}[{n}] parameter(0)\n  b = {type_}[{n}] parameter(1)\n"
               f"  ROOT r = {type_}[{n}] {opcode}(a, b){extra}", np.asarray(a), np.asarray(b))


INT_MIN = -(2**31)


# XLA's hyperbolic and inverse trigonometric opcodes, each on values inside its domain and one
# outside it (NaN); references from Python's math module in double precision.
INVERSE_AND_HYPERBOLIC = {
    "asin": (math.asin, [-1.0, -0.5, 0.0, 0.25, 1.0], 1.5),
    "acos": (math.acos, [-1.0, -0.5, 0.0, 0.25, 1.0], -1.5),
    "sinh": (math.sinh, [-3.0, -0.5, 0.0, 1e-4, 2.0], None),
    "cosh": (math.cosh, [-3.0, -0.5, 0.0, 1e-4, 2.0], None),
    "asinh": (math.asinh, [-100.0, -0.5, 0.0, 1e-4, 3.0], None),
    "acosh": (math.acosh, [1.0, 1.5, 2.0, 10.0, 1e4], 0.5),
    "atanh": (math.atanh, [-0.99, -0.5, 0.0, 1e-4, 0.75], 2.0),
}


@pytest.mark.parametrize("type_", ["f32", "f64", "bf16"])
@pytest.mark.parametrize("opcode", sorted(INVERSE_AND_HYPERBOLIC))
def test_inverse_trigonometric_and_hyperbolic_opcodes(opcode, type_):
    function, values, outside = INVERSE_AND_HYPERBOLIC[opcode]
    values = values + ([outside] if outside is not None else [])
    dtype = {"f32": np.float32, "f64": np.float64, "bf16": ml_dtypes.bfloat16}[type_]
    x = np.asarray(values, dtype)
    got = run(f"  x = {type_}[{len(x)}] parameter(0)\n  ROOT r = {type_}[{len(x)}] {opcode}(x)", x)
    expected = np.array([function(v) if outside is None or v != outside else math.nan for v in x.astype(float)])
    assert got.dtype == dtype
    tolerance = {"f32": 1e-6, "f64": 1e-14, "bf16": 8e-3}[type_]
    np.testing.assert_allclose(got.astype(np.float64), expected, rtol=tolerance, atol=tolerance * 1e-3)


def test_a_chain_of_hyperbolic_opcodes_and_their_inverses():
    x = np.float32([-1.0, 0.75, 2.0])
    # asinh(sinh(x)) = x and acosh(cosh(x)) = |x| (a chain the graph fuses into one elementwise op);
    # acosh near 1 amplifies cosh's rounding by 1/sinh(x), under 2 here, hence 2e-6.
    got = run("  x = f32[3] parameter(0)\n  s = f32[3] sinh(x)\n  a = f32[3] asinh(s)\n  c = f32[3] cosh(a)\n"
              "  ROOT r = f32[3] acosh(c)", x)
    np.testing.assert_allclose(got, [1.0, 0.75, 2.0], rtol=2e-6)


def test_complex_keeps_infinite_parts_and_convert_makes_and_drops_the_imaginary_part():
    inf, nan = math.inf, math.nan
    real, imag = np.float32([1, inf, nan, -2]), np.float32([inf, -inf, 1, 0])
    got = run("  a = f32[4] parameter(0)\n  b = f32[4] parameter(1)\n  ROOT c = c64[4] complex(a, b)", real, imag)
    # (1, inf) stays (1, inf): built as a + b * 1j it became (nan, inf), since inf * 1j = 0 * inf + inf i
    np.testing.assert_array_equal(got.real, real)
    np.testing.assert_array_equal(got.imag, imag)
    x = np.float32([1.5, -2, inf])
    made = run("  x = f32[3] parameter(0)\n  ROOT c = c64[3] convert(x)", x)
    assert made.dtype == np.complex64
    np.testing.assert_array_equal(made.real, x)
    np.testing.assert_array_equal(made.imag, [0, 0, 0])
    dropped = run("  x = f32[3] parameter(0)\n  c = c64[3] convert(x)\n  n = c64[3] negate(c)\n"
                  "  ROOT r = f32[3] real(n)", x)
    np.testing.assert_array_equal(dropped, -x)


def test_complex_division_gives_xlas_answers_at_zeros_and_infinities():
    inf, nan = math.inf, math.nan
    a = np.complex64([1 + 2j, 1 + 1j, 1 - 1j, complex(1, 1), complex(inf, 1), 1 + 1j])
    b = np.array([3 + 4j, 0, 0, complex(nan, inf), 2, complex(inf, 0)], np.complex64)  # complex() keeps parts
    got = run("  a = c64[6] parameter(0)\n  b = c64[6] parameter(1)\n  ROOT q = c64[6] divide(a, b)", a, b)
    expected = [
        (0.44, 0.08),  # (1+2i)(3-4i)/25
        (inf, inf),  # a zero divisor: each part times inf with the divisor's real sign
        (inf, -inf),
        (0.0, -0.0),  # finite over infinite: 0 * (1*0 + 1*1) and 0 * (1*0 - 1*1), as XLA gives
        (inf, nan),  # Smith's algorithm gives (inf, (1 - 0*inf)/2): not both NaN, so kept
        (0.0, 0.0),  # Smith's algorithm: (0*1 + 1)/inf, (1 - 0*1)/inf
    ]
    np.testing.assert_allclose(got.real, [r for r, _ in expected], rtol=1e-6)
    np.testing.assert_allclose(got.imag, [i for _, i in expected], rtol=1e-6)
    assert math.copysign(1, got[3].imag) == -1.0


def test_integer_divide_and_remainder_truncate_and_define_zero_divisors():
    a = np.array([7, -7, 7, -7, 5, INT_MIN, -5], np.int32)
    b = np.array([2, 2, -2, -2, 0, -1, 0], np.int32)
    np.testing.assert_array_equal(binary("divide", a, b), [3, -3, -3, 3, -1, INT_MIN, -1])
    np.testing.assert_array_equal(binary("remainder", a, b), [1, -1, 1, -1, 5, 0, -5])


def test_float_remainder_keeps_the_dividend_sign():
    np.testing.assert_allclose(binary("remainder", np.float32([-7.5, 7.5]), np.float32([2, -2]), "f32"), [-1.5, 1.5])


def test_shifts_by_the_width_or_more():
    x = np.array([-8, 1, -1, 5], np.int32)
    n = np.array([1, 31, 32, -1], np.int32)
    np.testing.assert_array_equal(binary("shift-left", x, n), [-16, INT_MIN, 0, 0])
    np.testing.assert_array_equal(binary("shift-right-arithmetic", x, n), [-4, 0, -1, 0])
    np.testing.assert_array_equal(binary("shift-right-logical", x, n), [2147483644, 0, 0, 0])


def test_integer_overflow_wraps():
    np.testing.assert_array_equal(binary("add", np.int8([127, -128]), np.int8([1, -1]), "s8"), [-128, 127])
    np.testing.assert_array_equal(binary("multiply", np.uint8([16, 255]), np.uint8([16, 255]), "u8"), [0, 1])


def test_rounding_modes():
    x = np.float32([0.5, 1.5, 2.5, -0.5, -2.5, 0.49999997])
    body = "  x = f32[6] parameter(0)\n  ROOT r = f32[6] {}(x)"
    np.testing.assert_array_equal(run(body.format("round-nearest-afz"), x), [1, 2, 3, -1, -3, 0])
    np.testing.assert_array_equal(run(body.format("round-nearest-even"), x), [0, 2, 2, -0.0, -2, 0])


def test_popcnt_and_count_leading_zeros():
    x = np.array([0, 1, -1, 255], np.int32)
    body = "  x = s32[4] parameter(0)\n  ROOT r = s32[4] {}(x)"
    np.testing.assert_array_equal(run(body.format("popcnt"), x), [0, 1, 32, 8])
    np.testing.assert_array_equal(run(body.format("count-leading-zeros"), x), [32, 31, 0, 24])


def test_compare_total_order_and_float_order():
    a = np.float32([np.nan, -0.0, 1.0, -np.nan])
    b = np.float32([1.0, 0.0, np.nan, -np.inf])
    body = ("  a = f32[4] parameter(0)\n  b = f32[4] parameter(1)\n"
            "  ROOT r = pred[4] compare(a, b), direction=LT{}")
    np.testing.assert_array_equal(run(body.format(", type=TOTALORDER"), a, b), [False, True, True, True])
    np.testing.assert_array_equal(run(body.format(""), a, b), [False, False, False, False])


def test_convert_float_to_int_saturates_and_maps_nan_to_zero():
    x = np.float32([np.nan, 3e9, -3e9, -1.7, 1.7])
    np.testing.assert_array_equal(run("  x = f32[5] parameter(0)\n  ROOT r = s32[5] convert(x)", x),
                                  [0, 2**31 - 1, INT_MIN, -1, 1])


def test_clamp_with_scalar_bounds():
    x = np.float32([-2, 0.5, 3])
    body = ("  x = f32[3] parameter(0)\n  lo = f32[] constant(0)\n  hi = f32[] constant(1)\n"
            "  ROOT r = f32[3] clamp(lo, x, hi)")
    np.testing.assert_array_equal(run(body, x), [0, 0.5, 1])


def test_dynamic_slice_clamps_its_start_into_range():
    x = np.arange(5, dtype=np.float32)
    body = "  x = f32[5] parameter(0)\n  i = s32[] parameter(1)\n  ROOT r = f32[2] dynamic-slice(x, i), dynamic_slice_sizes={2}"
    np.testing.assert_array_equal(run(body, x, np.int32(4)), [3, 4])
    np.testing.assert_array_equal(run(body, x, np.int32(-3)), [0, 1])
    body = ("  x = f32[5] parameter(0)\n  u = f32[2] constant({9, 8})\n  i = s32[] parameter(1)\n"
            "  ROOT r = f32[5] dynamic-update-slice(x, u, i)")
    np.testing.assert_array_equal(run(body, x, np.int32(7)), [0, 1, 2, 9, 8])


def test_pad_with_negative_and_interior_padding():
    body = "  x = f32[3] parameter(0)\n  z = f32[] constant(0)\n  ROOT r = f32[6] pad(x, z), padding=-1_2_1"
    np.testing.assert_array_equal(run(body, np.float32([1, 2, 3])), [0, 2, 0, 3, 0, 0])


def test_bitcast_between_layouts_is_a_transpose_of_the_physical_order():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    # f32[2,3]{0,1} is stored column-major: read as row-major f32[3,2] it is x.T.
    body = "  x = f32[2,3]{0,1} parameter(0)\n  ROOT r = f32[3,2]{1,0} bitcast(x)"
    np.testing.assert_array_equal(run(body, x), x.T)
    body = "  x = f32[2,3]{1,0} parameter(0)\n  ROOT r = f32[3,2]{1,0} bitcast(x)"
    np.testing.assert_array_equal(run(body, x), x.reshape(3, 2))


def test_a_bitcast_between_row_major_layouts_is_one_reshape():
    # XLA's fusions bitcast (197, 768) <-> (1, 197, 768) around every elementwise chain: one view op
    # each, no transpose by the identity after it.
    body = "  x = f32[2,3]{1,0} parameter(0)\n  ROOT r = f32[1,2,3]{2,1,0} bitcast(x)"
    model = kuiper.load_hlo(f"HloModule test\nENTRY main {{\n{body}\n}}\n", backend="numpy")
    assert [step.node.type for step in model.steps] == ["Reshape"]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(model(x, to_numpy=True), x.reshape(1, 2, 3))


def test_sort_puts_nan_last_under_total_order():
    comparator = ("less {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                  "  ROOT lt = pred[] compare(a, b), direction=LT, type=TOTALORDER\n}\n")
    body = "  x = f32[6] parameter(0)\n  ROOT r = f32[6] sort(x), dimensions={0}, is_stable=true, to_apply=less"
    got = run(body, np.float32([3, np.nan, -np.inf, 1, 0.0, -0.0]), computations=comparator)
    np.testing.assert_array_equal(got, [-np.inf, -0.0, 0.0, 1, 3, np.nan])
    assert np.signbit(got[1]) and not np.signbit(got[2])


def test_reduce_with_a_general_reducer_and_an_index_out_of_range_conditional():
    # max written as select(compare): not one binary op, so it is folded through a sub-Model.
    reducer = ("f {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
               "  gt = pred[] compare(a, b), direction=GT\n  ROOT s = f32[] select(gt, a, b)\n}\n")
    body = ("  x = f32[2,5] parameter(0)\n  low = f32[] constant(-inf)\n"
            "  ROOT r = f32[2] reduce(x, low), dimensions={1}, to_apply=f")
    x = np.float32([[1, 7, 3, -2, 5], [-4, -1, -9, -3, -8]])
    np.testing.assert_array_equal(run(body, x, computations=reducer), [7, -1])
    branches = ("b0 {\n  p = f32[] parameter(0)\n  ROOT r = f32[] negate(p)\n}\n"
                "b1 {\n  p = f32[] parameter(0)\n  ROOT r = f32[] add(p, p)\n}\n")
    body = ("  i = s32[] parameter(0)\n  x = f32[] parameter(1)\n"
            "  ROOT r = f32[] conditional(i, x, x), branch_computations={b0, b1}")
    assert run(body, np.int32(0), np.float32(3), computations=branches) == -3
    assert run(body, np.int32(7), np.float32(3), computations=branches) == 6
    assert run(body, np.int32(-1), np.float32(3), computations=branches) == 6
    body = ("  c = pred[] parameter(0)\n  x = f32[] parameter(1)\n"
            "  ROOT r = f32[] conditional(c, x, x), true_computation=b0, false_computation=b1")
    assert run(body, np.bool_(True), np.float32(3), computations=branches) == -3
    assert run(body, np.bool_(False), np.float32(3), computations=branches) == 6


def test_reduce_precision_to_half():
    x = np.float32([1000.3, 70000, 1e-9, 0.1, np.nan])
    got = run("  x = f32[5] parameter(0)\n  ROOT r = f32[5] reduce-precision(x), exponent_bits=5, mantissa_bits=10", x)
    with np.errstate(over="ignore"):
        expected = x[:4].astype(np.float16).astype(np.float32)  # 70000 overflows to inf, 1e-9 to 0
    np.testing.assert_array_equal(got[:4], expected)
    assert np.isnan(got[4])


def test_unsupported_instructions_are_listed_in_one_error():
    text = ("HloModule m\nENTRY e {\n  x = f32[2] parameter(0)\n"
            "  r = f32[2] custom-call(x), custom_call_target=\"other\"\n"
            "  c = f32[2] custom-call(x), custom_call_target=\"my_kernel\"\n"
            "  h = u64[2] rng-get-and-update-state(), delta=1\n"
            "  ROOT t = (f32[2], f32[2], u64[2]) tuple(r, c, h)\n}\n")
    with pytest.raises(UnsupportedOperatorError) as info:
        kuiper.load_hlo(text)
    message = str(info.value)
    assert "3 instruction(s)" in message and "r in e: custom-call" in message and "'my_kernel'" in message
    assert "h in e: rng-get-and-update-state" in message


def test_an_elided_constant_says_how_to_dump_it():
    text = "HloModule m\nENTRY e {\n  ROOT c = f32[20] constant({...})\n}\n"
    with pytest.raises(HloSyntaxError, match="print_large_constants"):
        kuiper.load_hlo(text)


def test_tuple_results_dtypes_and_pickling(tmp_path):
    path = tmp_path / "m.hlo.txt"
    path.write_text("HloModule m\nENTRY e {\n  x = f32[3] parameter(0)\n  y = s32[3] convert(x)\n"
                    "  p = pred[3] compare(x, x), direction=EQ\n  q = (pred[3], f32[3]) tuple(p, x)\n"
                    "  ROOT t = (s32[3], (pred[3], f32[3])) tuple(y, q)\n}\n")
    x = np.float32([1.5, -2.5, 3])
    for model in (kuiper.load(path), kuiper.load_hlo(str(path)), kuiper.load_hlo(path.read_text())):
        y, p, same = model(x, to_numpy=True)
        assert (y.dtype, p.dtype) == (np.int32, np.bool_)
        np.testing.assert_array_equal(y, [1, -2, 3])
        assert p.all()
        np.testing.assert_array_equal(same, x)
        again = pickle.loads(pickle.dumps(model))
        np.testing.assert_array_equal(again(x, to_numpy=True)[0], y)


def test_map_complex_parts_logistic_and_one_device_collectives():
    square_plus = ("sq {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  m = f32[] multiply(a, a)\n"
                   "  ROOT s = f32[] add(m, b)\n}\n")
    body = ("  x = f32[3] parameter(0)\n  y = f32[3] parameter(1)\n"
            "  m = f32[3] map(x, y), dimensions={0}, to_apply=sq\n"
            "  c = c64[3] complex(x, y)\n  re = f32[3] real(c)\n  im = f32[3] imag(c)\n"
            "  sig = f32[3] logistic(x)\n  ar = f32[3] all-reduce(x), replica_groups={}, to_apply=sq\n"
            "  id = u32[] replica-id()\n  i = s32[3] convert(y)\n  lz = s32[3] clz(i)\n"
            "  ROOT t = (f32[3], f32[3], f32[3], f32[3], f32[3], u32[], s32[3]) tuple(m, re, im, sig, ar, id, lz)")
    x, y = np.float32([1, -2, 0.5]), np.float32([3, 4, 1])
    m, re, im, sig, ar, replica, lz = run(body, x, y, computations=square_plus)
    np.testing.assert_allclose(m, x * x + y)
    np.testing.assert_array_equal(re, x)
    np.testing.assert_array_equal(im, y)
    np.testing.assert_allclose(sig, 1 / (1 + np.exp(-x.astype(np.float64))), rtol=1e-6)
    np.testing.assert_array_equal(ar, x)
    assert replica == 0 and replica.dtype == np.uint32
    np.testing.assert_array_equal(lz, [30, 29, 31])


def test_a_computation_that_calls_itself_is_an_error():
    text = ("HloModule m\nf {\n  p = f32[] parameter(0)\n  ROOT c = f32[] call(p), to_apply=f\n}\n"
            "ENTRY e {\n  x = f32[] parameter(0)\n  ROOT r = f32[] call(x), to_apply=f\n}\n")
    with pytest.raises(HloSyntaxError, match="computation 'f' calls itself") as info:
        kuiper.load_hlo(text)
    assert info.value.line == 4


_LESS_TOTAL = ("less {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  i = s32[] parameter(2)\n"
               "  j = s32[] parameter(3)\n  ROOT lt = pred[] compare(a, b), direction=LT, type=TOTALORDER\n}\n")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.5, np.inf, -np.inf, np.nan]), min_size=1, max_size=70))
def test_sort_is_a_stable_total_order_sort_of_any_length(values):
    x = np.float32(values)
    n = len(values)
    body = (f"  x = f32[{n}] parameter(0)\n  i = s32[{n}] iota(), iota_dimension=0\n"
            f"  ROOT s = (f32[{n}], s32[{n}]) sort(x, i), dimensions={{0}}, is_stable=true, to_apply=less")
    keys, order = run(body, x, computations=_LESS_TOTAL)

    def total_order(position):  # -inf < ... < -0 < +0 < ... < inf < NaN, then by position (stable)
        value = values[position]
        return (np.isnan(value), 0.0 if np.isnan(value) else value, not np.signbit(value), position)

    expected = sorted(range(n), key=total_order)
    np.testing.assert_array_equal(order, expected)
    np.testing.assert_array_equal(keys, x[expected])


def test_convolution_window_reversal_and_one_spatial_dim():
    body = ("  x = f32[1,1,5] parameter(0)\n  w = f32[1,1,3] constant({ { {1, 0, -1} } })\n"
            "  ROOT y = f32[1,1,3] convolution(x, w), window={size=3WINDOW}, dim_labels=bf0_oi0->bf0")
    x = np.float32([[[1, 2, 3, 4, 5]]])
    np.testing.assert_array_equal(run(body.replace("WINDOW", ""), x), [[[-2, -2, -2]]])  # x[i] - x[i+2]
    flipped = run(body.replace("WINDOW", " rhs_reversal=1"), x)
    np.testing.assert_array_equal(flipped, [[[2, 2, 2]]])  # the kernel read backwards


def test_reduce_window_that_tiles_the_operand():
    adder = "add {\n  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n  ROOT s = s32[] add(a, b)\n}\n"
    body = ("  x = s32[4,6] parameter(0)\n  init = s32[] constant(100)\n"
            "  ROOT r = s32[2,2] reduce-window(x, init), window={size=2x3 stride=2x3}, to_apply=add")
    x = np.arange(24, dtype=np.int32).reshape(4, 6)
    expected = x.reshape(2, 2, 2, 3).sum(axis=(1, 3)) + 100  # the init joins each window once
    np.testing.assert_array_equal(run(body, x, computations=adder), expected)


def test_a_max_window_that_tiles_the_operand_folds_every_window_axis_and_keeps_nan():
    # The outer window axes fold first for a max (kuiper/ops/window_reduce.py): each folded axis
    # leaves the array, so the later ones are found where they moved.
    maximum = "max {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT m = f32[] maximum(a, b)\n}\n"
    body = ("  x = f32[2,3,6,9] parameter(0)\n  init = f32[] constant(-inf)\n"
            "  ROOT r = f32[2,1,3,3] reduce-window(x, init), window={size=1x3x2x3 stride=1x3x2x3}, to_apply=max")
    x = np.random.default_rng(3).standard_normal((2, 3, 6, 9)).astype(np.float32)
    x[0, 1, 2, 4] = np.nan
    expected = x.reshape(2, 1, 3, 3, 2, 3, 3).max(axis=(2, 4, 6))  # NumPy's max keeps the NaN
    got = run(body, x, computations=maximum)
    assert np.isnan(got[0, 0, 1, 1]) and np.isnan(got).sum() == 1
    np.testing.assert_array_equal(got, expected)
