"""The canonical Determinant against determinants worked out by hand and det(L U) = det(L) det(U)."""

from __future__ import annotations

import numpy as np
import pytest

from kuiper.errors import KuiperError
from single_op import run_op


def test_determinants_by_hand_over_a_batch():
    a = np.array([[[2.0, 0.0], [0.0, 3.0]],      # diagonal: 6
                  [[1.0, 2.0], [3.0, 4.0]],      # 1*4 - 2*3 = -2
                  [[1.0, 2.0], [2.0, 4.0]]],     # singular: 0
                 np.float32)
    np.testing.assert_allclose(run_op("Determinant", [a], {}), [6.0, -2.0, 0.0], atol=1e-6)


def test_a_triangular_product_has_the_product_of_diagonals_and_half_precision_rounds_once():
    rng = np.random.default_rng(0)
    lower = np.tril(rng.uniform(0.5, 1.5, (4, 4)))
    upper = np.triu(rng.uniform(0.5, 1.5, (4, 4)))
    want = np.prod(np.diag(lower)) * np.prod(np.diag(upper))  # det(L U) = det(L) det(U)
    got = run_op("Determinant", [(lower @ upper).astype(np.float64)], {})
    assert got.shape == () and abs(float(got) - want) < 1e-12
    half = run_op("Determinant", [(lower @ upper).astype(np.float16)], {})
    assert half.dtype == np.float16 and abs(float(half) - want) < 2e-2 * abs(want)


def test_a_matrix_that_is_not_square_is_refused():
    with pytest.raises(KuiperError, match="square matrices"):
        run_op("Determinant", [np.zeros((2, 3), np.float32)], {})
