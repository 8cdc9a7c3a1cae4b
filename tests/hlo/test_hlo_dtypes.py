"""The element types NumPy lacks (bf16, the f8 and f4 types, s4/u4/s2/u2/s1/u1), through ml_dtypes.

Expected values are worked out by hand from each format (bits of mantissa and exponent, round
to nearest even) and from XLA's rules: its CPU backend computes bf16/f8 in f32 and rounds each
instruction's result; a reduction accumulates in f32; float -> int conversion saturates; integer
arithmetic wraps.
"""

from __future__ import annotations

import types

import ml_dtypes
import numpy as np
import pytest

import kuiper
from kuiper.errors import HloSyntaxError, OperatorParamError, UnsupportedOperatorError
from kuiper.hlo import parse
from kuiper.hlo.literals import _FLOAT_LIMITS
from kuiper.hlo.shapes import ELEMENT_TYPES
from kuiper.ir import dtypes


def run(text: str, *inputs):
    return np.asarray(kuiper.load_hlo(text, backend="numpy")(*inputs, to_numpy=True))


def unary(source: str, target: str, opcode: str = "convert", dims: str = "4") -> str:
    return f"HloModule m\nENTRY e {{\n  x = {source}[{dims}] parameter(0)\n  ROOT r = {target}[{dims}] {opcode}(x)\n}}\n"


def binary(element_type: str, opcode: str, dims: str = "4") -> str:
    return (f"HloModule m\nENTRY e {{\n  x = {element_type}[{dims}] parameter(0)\n  y = {element_type}[{dims}] "
            f"parameter(1)\n  ROOT r = {element_type}[{dims}] {opcode}(x, y)\n}}\n")


def matmul(element_type: str, lhs: str, rhs: str, out: str) -> str:
    return (f"HloModule m\nENTRY e {{\n  x = {element_type}[{lhs}] parameter(0)\n  y = {element_type}[{rhs}] "
            f"parameter(1)\n  ROOT r = {element_type}[{out}] dot(x, y), lhs_contracting_dims={{1}}, "
            "rhs_contracting_dims={0}\n}\n")


def test_bf16_convert_rounds_to_nearest_even():
    # bf16 keeps 7 mantissa bits: the spacing above 1 is 2^-7 = 0.0078125.
    x = np.float32([1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-7, 257.0])
    got = run(unary("f32", "bf16"), x)
    assert got.dtype == ml_dtypes.bfloat16
    # 1+2^-8 ties to 1 (even), 1+3*2^-8 ties to 1+2^-6 (even), 1+2^-7 is exact, 257 ties to 256 (spacing 2).
    np.testing.assert_array_equal(got.astype(np.float64), [1.0, 1 + 2**-6, 1 + 2**-7, 256.0])


def test_each_bf16_instruction_rounds_its_result():
    """(a + b) - a with a = 256, b = 1: 257 rounds to 256 in bf16, so the result is 0 (1 if kept in f32)."""
    text = """HloModule m
ENTRY e {
  a = bf16[2] parameter(0)
  b = bf16[2] parameter(1)
  s = bf16[2] add(a, b)
  ROOT d = bf16[2] subtract(s, a)
}"""
    got = run(text, np.array([256, 1], ml_dtypes.bfloat16), np.array([1, 1], ml_dtypes.bfloat16))
    np.testing.assert_array_equal(got.astype(np.float64), [0.0, 1.0])


def test_bf16_multiply_and_exp_round_once():
    x = np.array([1 + 2**-7, 1.0], ml_dtypes.bfloat16)
    product = run(binary("bf16", "multiply", "2"), x, x).astype(np.float64)
    # (1 + 2^-7)^2 = 1 + 2^-6 + 2^-14: nearest bf16 is 1 + 2^-6.
    np.testing.assert_array_equal(product, [1 + 2**-6, 1.0])
    # e = 2.71828...: bf16 neighbours 2.703125 and 2.71875 (spacing 2^-6); 2.71875 is nearer.
    np.testing.assert_array_equal(run(unary("bf16", "bf16", "exponential", "2"), x).astype(np.float64)[1], 2.71875)


def test_bf16_reduce_accumulates_in_f32():
    """300 ones: a bf16 running sum stalls at 256 (256 + 1 rounds back to 256); XLA's f32 accumulation gives 300."""
    text = """HloModule m
add { a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT s = bf16[] add(a, b) }
ENTRY e {
  x = bf16[300] parameter(0)
  z = bf16[] constant(0)
  ROOT r = bf16[] reduce(x, z), dimensions={0}, to_apply=add
}"""
    assert float(run(text, np.ones(300, ml_dtypes.bfloat16))) == 300.0


def test_bf16_dot_rounds_the_f32_product():
    text = matmul("bf16", "1,3", "3,1", "1,1")
    y = np.full((3, 1), 1 + 2**-7, ml_dtypes.bfloat16)
    # 3 * (1 + 2^-7) = 3 + 3 * 2^-7, halfway between 3 + 2^-6 and 3 + 2^-5 (spacing 2^-6): ties to 3 + 2^-5.
    assert float(run(text, np.ones((1, 3), ml_dtypes.bfloat16), y)[0, 0]) == 3 + 2**-5


def test_f8e4m3fn_saturates_at_448_and_has_no_infinity():
    got = run(unary("f32", "f8e4m3fn"), np.float32([448, 460, 0.3, -1000])).astype(np.float64)
    # 460 rounds down to 448 (next would be 480, not representable: NaN); 0.3 -> 0.3125 (3 mantissa bits).
    np.testing.assert_array_equal(got[:3], [448.0, 448.0, 0.3125])
    assert np.isnan(got[3])  # no infinity in the fn types: out of range is NaN


def test_f8_and_f4_constants_and_their_range():
    text = "HloModule m\nENTRY e {\n  ROOT c = f8e4m3fn[2] constant({448, -0.5})\n}\n"
    np.testing.assert_array_equal(run(text).astype(np.float64), [448.0, -0.5])
    with pytest.raises(HloSyntaxError, match="out of range"):
        parse("HloModule m\nENTRY e {\n  ROOT c = f8e4m3fn[] constant(500)\n}\n")
    with pytest.raises(HloSyntaxError, match="out of range"):  # fits f32, not bf16 (max 3.3895e38)
        parse("HloModule m\nENTRY e {\n  ROOT c = bf16[] constant(3.4e38)\n}\n")
    # f4e2m1fn holds 0, 0.5, 1, 1.5, 2, 3, 4, 6: 5 ties to 4 (even mantissa), 0.75 to 1.
    got = run(unary("f32", "f4e2m1fn", dims="3"), np.float32([5, 0.75, 6]))
    np.testing.assert_array_equal(got.astype(np.float64), [4.0, 1.0, 6.0])


def test_float_literal_limits_agree_with_ml_dtypes():
    """The range table used to check literals against ml_dtypes' own finfo (an independent source)."""
    for element_type, (largest, _) in _FLOAT_LIMITS.items():
        name = ELEMENT_TYPES[element_type]
        if dtypes.is_extended(name):
            assert largest == float(ml_dtypes.finfo(dtypes.extended_type(name)).max), element_type


def test_s4_wraps_and_converts_as_xla_does():
    x = np.array([7, -8, 3, -1], ml_dtypes.int4)
    y = np.array([1, -1, 4, 1], ml_dtypes.int4)
    np.testing.assert_array_equal(run(binary("s4", "add"), x, y).astype(np.int64), [-8, 7, 7, 0])
    np.testing.assert_array_equal(run(binary("s4", "multiply"), x, y).astype(np.int64), [7, -8, -4, -1])
    # int -> s4 keeps the low 4 bits; float -> s4 saturates and NaN gives 0.
    np.testing.assert_array_equal(run(unary("s32", "s4"), np.int32([9, -9, 16, 7])).astype(np.int64), [-7, 7, 0, 7])
    got = run(unary("f32", "s4"), np.float32([100, -100, np.nan, -3.7])).astype(np.int64)
    np.testing.assert_array_equal(got, [7, -8, 0, -3])
    np.testing.assert_array_equal(run(unary("f32", "u4"), np.float32([100, -5, 15.9, 3])).astype(np.int64),
                                  [15, 0, 15, 3])


def test_two_and_one_bit_integers_wrap():
    np.testing.assert_array_equal(
        run(binary("s2", "add", "3"), *(np.array(v, ml_dtypes.int2) for v in ([1, -2, 1], [1, -1, -1]))).astype(int),
        [-2, 1, 0])
    np.testing.assert_array_equal(
        run(binary("u2", "add", "2"), *(np.array(v, ml_dtypes.uint2) for v in ([3, 2], [1, 1]))).astype(int), [0, 3])
    text = "HloModule m\nENTRY e {\n  a = s1[] constant(-1)\n  ROOT r = s1[] add(a, a)\n}\n"
    assert int(run(text).astype(int)) == 0  # -1 + -1 = -2, which wraps to 0 in one bit


def test_s4_dot_and_compare():
    text = matmul("s4", "2,2", "2,2", "2,2")
    x = np.array([[7, 7], [1, -2]], ml_dtypes.int4)
    y = np.array([[1, 2], [1, 3]], ml_dtypes.int4)
    # [[14, 35], [-1, -4]] wrapped into [-8, 7]: 14 -> -2, 35 -> 3.
    np.testing.assert_array_equal(run(text, x, y).astype(np.int64), [[-2, 3], [-1, -4]])
    compare = ("HloModule m\nENTRY e {\n  x = s4[2] parameter(0)\n  y = s4[2] parameter(1)\n"
               "  ROOT r = pred[2] compare(x, y), direction=LT\n}\n")
    np.testing.assert_array_equal(run(compare, np.array([-8, 7], ml_dtypes.int4), np.array([7, -8], ml_dtypes.int4)),
                                  [True, False])


def test_bitcast_convert_is_bit_for_bit():
    np.testing.assert_array_equal(run(unary("bf16", "u16", "bitcast-convert", "2"), np.array([1, -2], ml_dtypes.bfloat16)),
                                  [0x3F80, 0xC000])
    np.testing.assert_array_equal(run(unary("f8e4m3fn", "u8", "bitcast-convert", "1"),
                                      np.array([448], ml_dtypes.float8_e4m3fn)), [0x7E])
    assert np.isnan(run(unary("u8", "f8e4m3fn", "bitcast-convert", "1"), np.uint8([0x7F])).astype(np.float64)[0])
    np.testing.assert_array_equal(run(unary("s4", "u4", "bitcast-convert", "2"), np.array([-1, -8], ml_dtypes.int4))
                                  .astype(int), [15, 8])
    text = "HloModule m\nENTRY e {\n  x = u8[2] parameter(0)\n  ROOT r = s4[2,2] bitcast-convert(x)\n}\n"
    with pytest.raises(OperatorParamError, match="packs sub-byte values"):
        kuiper.load_hlo(text)


def test_width_dependent_bit_functions_on_sub_byte_integers_are_refused():
    with pytest.raises(UnsupportedOperatorError, match="shift-right-logical 'r' on s4"):
        kuiper.load_hlo(binary("s4", "shift-right-logical"))
    with pytest.raises(UnsupportedOperatorError, match="count-leading-zeros 'r' on u4"):
        kuiper.load_hlo(unary("u4", "u4", "count-leading-zeros"))
    # A u4 logical shift is the same in 8 bits: 15 >> 1 = 7, a count of 4 or more gives 0.
    got = run(binary("u4", "shift-right-logical", "2"), np.array([15, 15], ml_dtypes.uint4),
              np.array([1, 5], ml_dtypes.uint4))
    np.testing.assert_array_equal(got.astype(int), [7, 0])


def test_one_resolver_knows_the_extended_types_and_cupy_refuses_them():
    numpy_like = types.SimpleNamespace(__name__="array_api_compat.numpy", float32=np.float32)
    assert dtypes.array_dtype(numpy_like, "bfloat16") is ml_dtypes.bfloat16
    assert dtypes.array_dtype(numpy_like, "float32") is np.float32
    assert dtypes.array_dtype(numpy_like, "no_such_type") is None
    cupy_like = types.SimpleNamespace(__name__="array_api_compat.cupy")
    with pytest.raises(UnsupportedOperatorError, match="bfloat16 is not supported on the array_api_compat.cupy"):
        dtypes.array_dtype(cupy_like, "bfloat16")
    for element_type, name in ELEMENT_TYPES.items():
        if name is not None:
            assert dtypes.array_dtype(np, name) is not None, element_type


@pytest.mark.parametrize("element_type", ["f8e4m3fn", "f8e4m3"])
def test_an_8_bit_float_result_rounds_through_f16_as_on_xlas_cpu(element_type):
    """XLA's CPU computes 8-bit floats in f16: 16 + 1 + 2^-9 = 17.002 is 17 in f16, a tie between the
    f8 neighbours 16 and 18 that rounds to even: 16 (rounding 17.002 once gives 18). A plain sum
    that f16 holds exactly is not changed: 16 + 1.5 is 17.5, which rounds to 18."""
    dtype = getattr(ml_dtypes, {"f8e4m3fn": "float8_e4m3fn", "f8e4m3": "float8_e4m3"}[element_type])
    text = f"""HloModule m
ENTRY e {{
  a = {element_type}[3] parameter(0)
  b = {element_type}[3] parameter(1)
  ROOT d = {element_type}[] dot(a, b), lhs_contracting_dims={{0}}, rhs_contracting_dims={{0}}
}}"""
    model = kuiper.load_hlo(text)
    ones = np.ones(3, dtype)
    assert float(model(np.array([16, 1, 2**-9], dtype), ones, to_numpy=True)) == 16.0
    assert float(model(np.array([16, 1.5, 0], dtype), ones, to_numpy=True)) == 18.0
