"""The canonical ops behind HLO's linear algebra, FFT, batch norm, dynamic dims and random opcodes, run
alone (no frontend), against hand-computed values and float64 NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from kuiper.errors import KuiperError
from tests.single_op import run_op


def test_cholesky_and_triangular_solve_by_hand():
    a = np.float64([[4, 2], [2, 3]])
    np.testing.assert_allclose(run_op("Cholesky", [a], {"lower": True}), [[2, 0], [1, np.sqrt(2)]])
    np.testing.assert_allclose(run_op("Cholesky", [a], {"lower": False}), [[2, 1], [0, np.sqrt(2)]])
    lower = np.float64([[2, 0], [1, 1]])
    b = np.float64([[2, 4], [3, 5]])
    params = {"left_side": True, "lower": True, "transpose_a": "none"}
    np.testing.assert_allclose(run_op("TriangularSolve", [lower, b], params), [[1, 2], [2, 3]])
    with pytest.raises(KuiperError, match="singular"):
        run_op("TriangularSolve", [np.zeros((2, 2)), b], params)


def test_fourier_transform_matches_numpy_in_float64():
    z = np.random.default_rng(0).standard_normal((3, 4)) + 1j
    np.testing.assert_allclose(run_op("FourierTransform", [z], {"kind": "fft", "lengths": [3, 4]}), np.fft.fft2(z))
    np.testing.assert_allclose(run_op("FourierTransform", [z.real], {"kind": "rfft", "lengths": [4]}),
                               np.fft.rfft(z.real))


def test_batch_norm_ops_by_hand():
    x = np.float64([[1, 10], [3, 30]])  # features on dim 1: means 2 and 20, variances 1 and 100
    scale, offset = np.float64([1, 2]), np.float64([0, 1])
    y, mean, variance = run_op("BatchNormTraining", [x, scale, offset], {"feature": 1, "epsilon": 0.0}, outputs=3)
    np.testing.assert_allclose(mean, [2, 20])
    np.testing.assert_allclose(variance, [1, 100])
    np.testing.assert_allclose(y, [[-1, -1], [1, 3]])
    np.testing.assert_allclose(run_op("BatchNormInference", [x, scale, offset, mean, variance],
                                      {"feature": 1, "epsilon": 0.0}), y)
    grad_x, grad_scale, grad_offset = run_op("BatchNormGrad", [x, scale, mean, variance, np.ones((2, 2))],
                                             {"feature": 1, "epsilon": 0.0}, outputs=3)
    np.testing.assert_allclose(grad_x, 0, atol=1e-12)  # sum(y) does not change when x shifts or scales
    np.testing.assert_allclose(grad_scale, [0, 0], atol=1e-12)
    np.testing.assert_allclose(grad_offset, [2, 2])


def test_dimension_size_ops():
    x = np.arange(6).reshape(2, 3)
    assert run_op("DimensionSize", [x], {"dim": 1, "dtype": "int32"}) == 3
    np.testing.assert_array_equal(run_op("SetDimensionSize", [x, np.int32(1)], {"dim": 0}), [[0, 1, 2]])
    np.testing.assert_array_equal(run_op("ReshapeToSizes", [x, np.int32(6)], {"bounds": [8]}), np.arange(6))


def test_random_bits_and_numbers():
    state, bits = run_op("RandomBits", [np.uint64([0, 0])], {"algorithm": "philox", "shape": [4],
                                                            "dtype": "uint32"}, outputs=2)
    # A u64[2] state (key 0, counter 0) encrypts the counter (0, 0, 0, 0) under the key (0, 0): the
    # first Random123 known answer for Philox4x32-10.
    np.testing.assert_array_equal(bits, [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8])
    np.testing.assert_array_equal(state, [0, 1])
    values = run_op("RandomNumbers", [np.float32(5), np.float32(6)],
                    {"distribution": "uniform", "shape": [100], "dtype": "float32"})
    assert values.shape == (100,) and values.min() >= 5 and values.max() < 6


def test_ragged_dot_by_hand():
    lhs = np.float64([[1, 0], [0, 1], [1, 1]])
    rhs = np.float64([[[1, 2], [3, 4]], [[10, 0], [0, 10]]])
    got = run_op("RaggedDot", [lhs, rhs, np.int32([1, 1])], {})
    np.testing.assert_array_equal(got, [[1, 2], [0, 10], [0, 0]])  # the third row is in no group


def test_stochastic_convert_by_hand():
    got = run_op("StochasticConvert", [np.float64([0.5, 0.5]), np.uint8([127, 128])], {"dtype": "int32"})
    np.testing.assert_array_equal(got, [1, 0])  # 0.5 * 256 = 128: up when the bits are below 128
