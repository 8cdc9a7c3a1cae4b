"""Cases in the spirit of modules from XLA's tests that kuiper got wrong or failed on when run against XLA.

(tools/hlo_corpus_against_xla.py runs the whole corpus; these are kuiper's own small cases, with
hand-computed or float64 references.)
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import kuiper
from kuiper.errors import KuiperError, OperatorParamError


def run(text: str, *inputs):
    result = kuiper.load_hlo(text, backend="numpy")(*inputs, to_numpy=True)
    return [np.asarray(r) for r in result] if isinstance(result, tuple) else np.asarray(result)


def test_topk_of_bf16_orders_by_value_and_gives_positions():
    text = """HloModule topk
ENTRY e {
  x = bf16[2,5] parameter(0)
  ROOT t = (bf16[2,2], s32[2,2]) topk(x), k=2, largest=true
}"""
    x = np.array([[0.5, -1.0, 2.0, 0.25, -3.0], [-0.5, -0.25, -2.0, -0.125, -4.0]], ml_dtypes.bfloat16)
    values, positions = run(text, x)
    assert values.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(values.astype(np.float32), [[2.0, 0.5], [-0.125, -0.25]])
    np.testing.assert_array_equal(positions, [[2, 0], [3, 1]])


def test_smallest_topk_of_bf16_puts_negative_values_first():
    text = """HloModule topk
ENTRY e {
  x = bf16[6] parameter(0)
  ROOT t = (bf16[3], s32[3]) topk(x), k=3, largest=false
}"""
    x = np.array([0.0, -0.0078125, 1.5, -7.0, 3.0, -0.5], ml_dtypes.bfloat16)
    values, positions = run(text, x)
    np.testing.assert_array_equal(values.astype(np.float32), [-7.0, -0.5, -0.0078125])
    np.testing.assert_array_equal(positions, [3, 5, 1])


def test_atan2_of_complex_operands_is_minus_i_log_of_the_normalised_point():
    """XLA defines complex atan2(y, x) as -i log((x + iy) / sqrt(x^2 + y^2)); for real y, x it is the angle."""
    text = """HloModule atan2
ENTRY e {
  y = c64[3] parameter(0)
  x = c64[3] parameter(1)
  ROOT r = c64[3] atan2(y, x)
}"""
    y = np.array([1.0, 1.0 + 0.5j, -0.25j], np.complex64)
    x = np.array([1.0, -0.5 + 0.25j, 0.75 + 1j], np.complex64)
    got = run(text, y, x)
    assert got.dtype == np.complex64
    y64, x64 = y.astype(np.complex128), x.astype(np.complex128)
    expected = -1j * np.log((x64 + 1j * y64) / np.sqrt(x64 * x64 + y64 * y64))
    assert abs(expected[0] - np.pi / 4) < 1e-12  # real operands: the angle of (1, 1)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_dot_of_s8_operands_with_an_s32_result_multiplies_in_s32():
    """XLA converts the operands to the result type: 100 * 100 * 3 = 30000 does not fit s8 (nor s16 sums)."""
    text = """HloModule dot
ENTRY e {
  a = s8[2,3] parameter(0)
  b = s8[3,2] parameter(1)
  ROOT d = s32[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"""
    a = np.array([[100, 100, 100], [-128, 127, -1]], np.int8)
    b = np.array([[100, 1], [100, -2], [100, 3]], np.int8)
    got = run(text, a, b)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, [[30000, 200], [-128 * 100 + 12700 - 100, -128 - 254 - 3]])


def test_dot_of_u8_constant_and_u8_operand_with_a_u32_result():
    text = """HloModule dot
ENTRY e {
  a = u8[1,2] parameter(0)
  w = u8[2,1] constant({{255},{255}})
  ROOT d = u32[1,1] dot(a, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"""
    np.testing.assert_array_equal(run(text, np.array([[255, 2]], np.uint8)), [[255 * 255 + 2 * 255]])


def test_dot_of_f16_operands_with_an_f32_result_accumulates_in_f32():
    """2048 + 1 + 1 is 2050 in f32; an f16 sum would stay at 2048 (its spacing there is 2)."""
    text = """HloModule dot
ENTRY e {
  a = f16[1,3] parameter(0)
  b = f16[3] parameter(1)
  ROOT d = f32[1] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"""
    got = run(text, np.array([[2048, 1, 1]], np.float16), np.ones(3, np.float16))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, [2050.0])


@pytest.mark.parametrize("lhs_type", ["f32", "f16"])
def test_dot_to_a_narrower_result_type_computes_in_the_wider_type_and_rounds_once(lhs_type):
    """As XLA's result caster: 2048 + 1 + 1 summed in f32 is 2050, which f16 holds; summed in f16
    it would stay 2048 (the spacing there is 2, and 2049 rounds to even)."""
    text = f"""HloModule dot
ENTRY e {{
  a = {lhs_type}[1,3] parameter(0)
  b = f32[3] parameter(1)
  ROOT d = f16[1] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}"""
    got = run(text, np.array([[2048, 1, 1]], lhs_type.replace("f", "float")), np.ones(3, np.float32))
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, [2050.0])


def test_dot_of_floats_to_an_integer_result_is_refused():
    text = """HloModule dot
ENTRY e {
  a = f32[2,2] parameter(0)
  ROOT d = s32[2,2] dot(a, a), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"""
    with pytest.raises(OperatorParamError, match="f32 and f32 with a s32 result"):
        kuiper.load_hlo(text, backend="numpy")


@pytest.mark.parametrize("labels, x_dims, k_dims, out_dims", [
    ("bf_io->bf", (3, 5), (5, 4), (3, 4)),  # features times a matrix
    ("fb_oi->fb", (5, 3), (4, 5), (4, 3)),  # the same, every operand transposed
])
def test_a_convolution_without_spatial_dims_multiplies_the_features(labels, x_dims, k_dims, out_dims):
    rng = np.random.default_rng(7)
    x, k = rng.standard_normal(x_dims).astype(np.float32), rng.standard_normal(k_dims).astype(np.float32)
    text = f"""HloModule conv
ENTRY e {{
  x = f32[{','.join(map(str, x_dims))}] parameter(0)
  k = f32[{','.join(map(str, k_dims))}] parameter(1)
  ROOT c = f32[{','.join(map(str, out_dims))}] convolution(x, k), dim_labels={labels}
}}"""
    x64, k64 = x.astype(np.float64), k.astype(np.float64)
    expected = x64 @ k64 if labels.startswith("bf") else (x64.T @ k64.T).T
    np.testing.assert_allclose(run(text, x, k), expected, rtol=1e-5, atol=1e-5)


def test_a_grouped_convolution_without_spatial_dims_with_a_constant_kernel():
    """feature_group_count=2: output features 0-1 read input features 0-1, outputs 2-3 inputs 2-3."""
    x = np.float32([[1, 2, 3, 4], [-1, 0, 2, 5]])
    text = """HloModule conv
ENTRY e {
  x = f32[2,4] parameter(0)
  k = f32[2,4] constant({{1, 2, 3, 4}, {5, 6, 7, 8}})
  ROOT c = f32[2,4] convolution(x, k), dim_labels=bf_io->bf, feature_group_count=2
}"""
    # out[b, o] = x[b, 2g] * k[0, o] + x[b, 2g + 1] * k[1, o] with g = o // 2
    expected = [[1 * 1 + 2 * 5, 1 * 2 + 2 * 6, 3 * 3 + 4 * 7, 3 * 4 + 4 * 8],
                [-1 * 1 + 0 * 5, -1 * 2 + 0 * 6, 2 * 3 + 5 * 7, 2 * 4 + 5 * 8]]
    np.testing.assert_array_equal(run(text, x), expected)


def _s8_conv_text(weight: str) -> str:
    return f"""HloModule conv
ENTRY e {{
  x = s8[1,1,4] parameter(0)
  w = {weight}
  ROOT c = s32[1,1,3] convolution(x, w), window={{size=2}}, dim_labels=bf0_oi0->bf0
}}"""


def test_convolution_of_s8_operands_with_an_s32_result_multiplies_in_s32():
    """127 * 127 + 127 * 127 = 32258 fits neither s8 nor an s8 accumulator; XLA widens first."""
    x = np.array([[[127, 127, -128, 5]]], np.int8)
    expected = [[[127 * 127 + 127 * 127, 127 * 127 - 128 * 127, -128 * 127 + 5 * 127]]]
    weight = np.full((1, 1, 2), 127, np.int8)
    np.testing.assert_array_equal(run(_s8_conv_text("s8[1,1,2] parameter(1)"), x, weight), expected)
    constant = run(_s8_conv_text("s8[1,1,2] constant({{{127,127}}})"), x)
    assert constant.dtype == np.int32
    np.testing.assert_array_equal(constant, expected)


def test_dynamic_slice_with_all_start_indices_in_one_vector_operand():
    """XLA's parser still reads the old form; the starts clamp as the scalar form's do (19 -> 18 for size 2)."""
    text = """HloModule old_form
ENTRY e {
  x = f32[4,20] parameter(0)
  starts = s32[2] parameter(1)
  ROOT s = f32[2,2] dynamic-slice(x, starts), dynamic_slice_sizes={2,2}
}"""
    x = np.arange(80, dtype=np.float32).reshape(4, 20)
    np.testing.assert_array_equal(run(text, x, np.array([1, 19], np.int32)), [[38, 39], [58, 59]])
    np.testing.assert_array_equal(run(text, x, np.array([-3, 5], np.int32)), [[5, 6], [25, 26]])


def test_dynamic_update_slice_with_all_start_indices_in_one_vector_operand():
    text = """HloModule old_form
ENTRY e {
  x = s32[3,3] parameter(0)
  u = s32[1,2] parameter(1)
  starts = s32[2] parameter(2)
  ROOT s = s32[3,3] dynamic-update-slice(x, u, starts)
}"""
    got = run(text, np.zeros((3, 3), np.int32), np.array([[7, 8]], np.int32), np.array([2, 2], np.int32))
    np.testing.assert_array_equal(got, [[0, 0, 0], [0, 0, 0], [0, 7, 8]])


def test_an_empty_constant_printed_down_to_its_first_zero_dim():
    """XLA prints f32[2,0,3] as { {}, {} }: the literal stops where the dims hold no element."""
    text = """HloModule empty
ENTRY e {
  ROOT c = f32[2,0,3] constant({ { /*i0=0*/ }, { /*i0=1*/ } })
}"""
    got = run(text)
    assert got.shape == (2, 0, 3) and got.dtype == np.float32


def test_a_literal_that_stops_short_of_a_non_empty_shape_is_still_refused():
    text = """HloModule short
ENTRY e {
  ROOT c = f32[2,1,3] constant({ { }, { } })
}"""
    with pytest.raises(KuiperError, match="holds 0 value"):
        kuiper.load_hlo(text, backend="numpy")
