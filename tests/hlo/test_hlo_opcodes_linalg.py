"""HLO cholesky, triangular-solve, fft, batch norm, and bounded dynamic dims, against float64 NumPy
(and hand-computed values) following XLA's operation semantics."""

from __future__ import annotations

import numpy as np
import pytest

import kuiper
from kuiper.errors import KuiperError


def run(parameters: list[str], body: str, *inputs):
    declared = "\n".join(f"  p{i} = {shape} parameter({i})" for i, shape in enumerate(parameters))
    text = f"HloModule test\nENTRY main {{\n{declared}\n  {body}\n}}\n"
    result = kuiper.load_hlo(text, backend="numpy")(*inputs, to_numpy=True)
    return [np.asarray(r) for r in result] if isinstance(result, tuple) else np.asarray(result)


def positive_definite(rng, batch: int, size: int) -> np.ndarray:
    m = rng.standard_normal((batch, size, size))
    return m @ m.transpose(0, 2, 1) + size * np.eye(size)


@pytest.mark.parametrize("lower", [True, False])
def test_cholesky_reads_one_triangle_and_factors_it(lower):
    rng = np.random.default_rng(1)
    a = positive_definite(rng, 2, 4)
    factor = np.linalg.cholesky(a)
    expected = factor if lower else factor.transpose(0, 2, 1)
    garbage = a.copy()  # the triangle not read holds anything
    other = np.triu_indices(4, 1) if lower else np.tril_indices(4, -1)
    garbage[:, other[0], other[1]] = 1e6
    got = run(["f32[2,4,4]"], f"ROOT r = f32[2,4,4] cholesky(p0), lower={str(lower).lower()}",
              garbage.astype(np.float32))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_half_precision_cholesky_and_triangular_solve_match_float64():
    rng = np.random.default_rng(3)
    a = positive_definite(rng, 2, 4).astype(np.float16)
    factor = run(["f16[2,4,4]"], "ROOT r = f16[2,4,4] cholesky(p0), lower=true", a)
    assert factor.dtype == np.float16
    expected = np.linalg.cholesky(a.astype(np.float64))
    np.testing.assert_allclose(factor.astype(np.float64), expected, rtol=2e-3, atol=2e-3)  # f16: 11 bits
    b = rng.standard_normal((2, 4, 3)).astype(np.float16)
    solved = run(["f16[2,4,4]", "f16[2,4,3]"], "ROOT x = f16[2,4,3] triangular-solve(p0, p1), left_side=true, "
                 "lower=true, transpose_a=NO_TRANSPOSE", factor, b)
    assert solved.dtype == np.float16
    reference = np.linalg.solve(np.tril(factor.astype(np.float64)), b.astype(np.float64))
    np.testing.assert_allclose(solved.astype(np.float64), reference, rtol=4e-3, atol=4e-3)


def test_cholesky_of_a_matrix_that_is_not_positive_definite_gives_nans():
    got = run(["f32[2,2]"], "ROOT r = f32[2,2] cholesky(p0), lower=true", np.float32([[1, 2], [2, 1]]))
    assert np.isnan(got).all()


@pytest.mark.parametrize("left_side", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transpose", ["NO_TRANSPOSE", "TRANSPOSE"])
@pytest.mark.parametrize("unit", [False, True])
def test_triangular_solve_matches_float64_substitution(left_side, lower, transpose, unit):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 3)) + 4 * np.eye(3)
    b = rng.standard_normal((3, 2) if left_side else (2, 3))
    triangle = np.tril(a) if lower else np.triu(a)
    if unit:
        np.fill_diagonal(triangle, 1)
    op_a = triangle.T if transpose == "TRANSPOSE" else triangle
    expected = np.linalg.solve(op_a, b) if left_side else np.linalg.solve(op_a.T, b.T).T
    b_shape = "f32[3,2]" if left_side else "f32[2,3]"
    body = (f"ROOT r = {b_shape} triangular-solve(p0, p1), left_side={str(left_side).lower()}, "
            f"lower={str(lower).lower()}, unit_diagonal={str(unit).lower()}, transpose_a={transpose}")
    got = run(["f32[3,3]", b_shape], body, a.astype(np.float32), b.astype(np.float32))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_fft_kinds_and_lengths():
    rng = np.random.default_rng(3)
    z = (rng.standard_normal((2, 8)) + 1j * rng.standard_normal((2, 8))).astype(np.complex64)
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    np.testing.assert_allclose(run(["c64[2,8]"], "ROOT r = c64[2,8] fft(p0), fft_type=FFT, fft_length={8}", z),
                               np.fft.fft(z.astype(np.complex128)), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(run(["c64[2,8]"], "ROOT r = c64[2,8] fft(p0), fft_type=IFFT, fft_length={8}", z),
                               np.fft.ifft(z.astype(np.complex128)), rtol=1e-5, atol=1e-6)
    got = run(["f32[2,3,8]"], "ROOT r = c64[2,3,5] fft(p0), fft_type=RFFT, fft_length={3,8}", x)
    assert got.dtype == np.complex64
    np.testing.assert_allclose(got, np.fft.rfft2(x.astype(np.float64)), rtol=1e-5, atol=1e-5)
    half = np.fft.rfft(x.astype(np.float64)).astype(np.complex64)
    got = run(["c64[2,3,5]"], "ROOT r = f32[2,3,8] fft(p0), fft_type=IRFFT, fft_length={8}", half)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, x, rtol=1e-5, atol=1e-5)


def test_batch_norm_inference_training_and_grad_along_the_feature_dim():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)  # features on dim 1
    scale, offset = np.float32([1, 2, 3]), np.float32([0.5, -1, 0])
    mean, variance = np.float32([0.1, 0.2, 0.3]), np.float32([1, 2, 0.5])
    epsilon = 0.001
    per_feature = (slice(None), None)  # a (3,) vector along dim 1 of (2, 3, 4)
    x64 = x.astype(np.float64)

    body = "ROOT r = f32[2,3,4] batch-norm-inference(p0, p1, p2, p3, p4), epsilon=0.001, feature_index=1"
    got = run(["f32[2,3,4]", "f32[3]", "f32[3]", "f32[3]", "f32[3]"], body, x, scale, offset, mean, variance)
    expected = (x64 - mean[per_feature]) / np.sqrt(variance[per_feature] + epsilon) * scale[per_feature] \
        + offset[per_feature]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)

    body = ("ROOT r = (f32[2,3,4], f32[3], f32[3]) batch-norm-training(p0, p1, p2), epsilon=0.001, "
            "feature_index=1")
    y, batch_mean, batch_variance = run(["f32[2,3,4]", "f32[3]", "f32[3]"], body, x, scale, offset)
    mu, var = x64.mean(axis=(0, 2)), x64.var(axis=(0, 2))
    np.testing.assert_allclose(batch_mean, mu, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(batch_variance, var, rtol=1e-5, atol=1e-6)
    normalized = (x64 - mu[per_feature]) / np.sqrt(var[per_feature] + epsilon)
    np.testing.assert_allclose(y, normalized * scale[per_feature] + offset[per_feature], rtol=1e-5, atol=1e-5)

    # The gradient of sum(g * y) by x, scale and offset, checked by central differences in float64.
    g = rng.standard_normal((2, 3, 4))
    body = ("ROOT r = (f32[2,3,4], f32[3], f32[3]) batch-norm-grad(p0, p1, p2, p3, p4), epsilon=0.001, "
            "feature_index=1")
    grad_x, grad_scale, grad_offset = run(["f32[2,3,4]", "f32[3]", "f32[3]", "f32[3]", "f32[2,3,4]"], body,
                                          x, scale, mu.astype(np.float32), var.astype(np.float32),
                                          g.astype(np.float32))

    def loss(x_, scale_):
        m, v = x_.mean(axis=(0, 2)), x_.var(axis=(0, 2))
        return np.sum(g * ((x_ - m[per_feature]) / np.sqrt(v[per_feature] + epsilon) * scale_[per_feature]))

    step = 1e-6
    numeric_x = np.zeros_like(x64)
    for index in np.ndindex(x64.shape):
        bumped = x64.copy()
        bumped[index] += step
        lowered = x64.copy()
        lowered[index] -= step
        numeric_x[index] = (loss(bumped, scale) - loss(lowered, scale)) / (2 * step)
    numeric_scale = np.array([(loss(x64, scale + step * e) - loss(x64, scale - step * e)) / (2 * step)
                              for e in np.eye(3)])
    np.testing.assert_allclose(grad_x, numeric_x, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(grad_scale, numeric_scale, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(grad_offset, g.sum(axis=(0, 2)), rtol=1e-5, atol=1e-5)


def test_bounded_dynamic_dims_are_read_cut_and_reshaped_at_run_time():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert run(["f32[2,3]"], "ROOT r = s32[] get-dimension-size(p0), dimensions={1}", x) == 3
    cut = run(["f32[2,3]", "s32[]"], "ROOT r = f32[2,<=3] set-dimension-size(p0, p1), dimensions={1}",
              x, np.int32(2))
    np.testing.assert_array_equal(cut, [[0, 1], [3, 4]])
    body = "ROOT r = f32[<=3,<=2] dynamic-reshape(p0, p1, p2)"  # bounds fill the operand, as XLA asks
    np.testing.assert_array_equal(run(["f32[2,3]", "s32[]", "s32[]"], body, x, np.int32(3), np.int32(2)),
                                  x.reshape(3, 2))
    with pytest.raises(KuiperError, match="cannot reshape"):
        run(["f32[2,3]", "s32[]", "s32[]"], body, x, np.int32(1), np.int32(6))  # 6 is past the bound 2


def test_ragged_dot_multiplies_each_row_group_by_its_own_matrix():
    rng = np.random.default_rng(5)
    lhs = rng.standard_normal((7, 3)).astype(np.float32)
    rhs = rng.standard_normal((2, 3, 4)).astype(np.float32)
    sizes = np.int64([2, 3])  # rows 0-1 use rhs[0], rows 2-4 rhs[1], rows 5-6 no group: zeros
    body = ("ROOT r = f32[7,4] ragged-dot(p0, p1, p2), lhs_contracting_dims={1}, rhs_contracting_dims={1}, "
            "lhs_ragged_dims={0}, rhs_group_dims={0}")
    got = run(["f32[7,3]", "f32[2,3,4]", "s64[2]"], body, lhs, rhs, sizes)
    lhs64, rhs64 = lhs.astype(np.float64), rhs.astype(np.float64)
    expected = np.concatenate([lhs64[:2] @ rhs64[0], lhs64[2:5] @ rhs64[1], np.zeros((2, 4))])
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_ragged_dot_with_a_ragged_contracting_dim_gives_one_product_per_group():
    rng = np.random.default_rng(6)
    lhs = rng.standard_normal((2, 6)).astype(np.float32)
    rhs = rng.standard_normal((6, 3)).astype(np.float32)
    sizes = np.int32([4, 2])
    body = ("ROOT r = f32[2,2,3] ragged-dot(p0, p1, p2), lhs_contracting_dims={1}, rhs_contracting_dims={0}, "
            "lhs_ragged_dims={1}")
    got = run(["f32[2,6]", "f32[6,3]", "s32[2]"], body, lhs, rhs, sizes)
    lhs64, rhs64 = lhs.astype(np.float64), rhs.astype(np.float64)
    np.testing.assert_allclose(got, np.stack([lhs64[:, :4] @ rhs64[:4], lhs64[:, 4:] @ rhs64[4:]]), rtol=1e-5,
                               atol=1e-5)


def test_other_ragged_dot_forms_are_refused_naming_the_forms_kuiper_runs():
    body = ("ROOT r = f32[2,3,3] ragged-dot(p0, p1, p2), lhs_batch_dims={0}, rhs_batch_dims={0}, "
            "lhs_contracting_dims={2}, rhs_contracting_dims={1}, lhs_ragged_dims={0}")
    with pytest.raises(KuiperError, match="kuiper runs ragged-dot in the forms"):
        run(["f32[2,3,4]", "f32[2,4,3]", "s32[1]"], body, np.zeros((2, 3, 4), np.float32),
            np.zeros((2, 4, 3), np.float32), np.int32([2]))
