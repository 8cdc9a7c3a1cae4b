"""Linear algebra ops on hand-written one-op models: shapes and values against explicit
sums of products, keyword-bound operands in any line order, and the errors.

The fixtures linear_rank3, linear_functional, matmul_broadcast and matrix_products
check the same ops against PyTorch.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import kuiper

from test_ops_activation import one_op


def rng_array(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def matmul_reference(a, b):
    """torch.matmul by its definition: promote 1-D, broadcast batch dims, sum of products."""
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    a2 = a64[None, :] if a64.ndim == 1 else a64
    b2 = b64[:, None] if b64.ndim == 1 else b64
    batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    a2 = np.broadcast_to(a2, batch + a2.shape[-2:])
    b2 = np.broadcast_to(b2, batch + b2.shape[-2:])
    out = np.zeros(batch + (a2.shape[-2], b2.shape[-1]))
    for index in itertools.product(*[range(n) for n in batch]):
        for i in range(a2.shape[-2]):
            for j in range(b2.shape[-1]):
                out[index + (i, j)] = sum(a2[index + (i, k)] * b2[index + (k, j)] for k in range(a2.shape[-1]))
    if a64.ndim == 1:
        out = out[..., 0, :]
    if b64.ndim == 1:
        out = out[..., 0]
    return out


# -- nn.Linear / F.linear ------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(3,), (2, 3), (2, 4, 3), (2, 1, 4, 3)], ids=["rank1", "rank2", "rank3", "rank4"])
def test_linear_applies_to_the_last_dim_of_any_rank(tmp_path, shape, backend_name):
    weight = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 0.0]], dtype=np.float32)
    bias = np.array([0.25, -2.0], dtype=np.float32)
    x = rng_array(shape)
    params = {"bias": True, "in_features": 3, "out_features": 2}
    (got,), _ = one_op(tmp_path, "nn.Linear", [x], params, weights={"bias": bias, "weight": weight},
                       backend=backend_name)
    want = matmul_reference(x, weight.T) + bias
    assert got.shape == shape[:-1] + (2,)
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_linear_names_the_expected_width_when_the_input_does_not_fit(tmp_path):
    with pytest.raises(kuiper.ShapeError, match="expected last dim 3"):
        one_op(tmp_path, "nn.Linear", [np.zeros((2, 4), np.float32)], {"bias": False},
               weights={"weight": np.zeros((2, 3), np.float32)})


@pytest.mark.parametrize("weight_first", [True, False], ids=["weight_x", "x_weight"])
def test_linear_takes_a_tied_weight_as_a_second_input(tmp_path, weight_first):
    # GPT-2 ties lm_head to the token embedding; PNNX writes ``nn.Linear lm_head 2 1 <weight> <x>``
    x, weight = rng_array((2, 3, 4)), rng_array((5, 4), 1)
    params = {"bias": False, "in_features": 4, "out_features": 5}
    arrays = [weight, x] if weight_first else [x, weight]
    (got,), _ = one_op(tmp_path, "nn.Linear", arrays, params)
    assert got.shape == (2, 3, 5)
    np.testing.assert_allclose(got, matmul_reference(x, weight.T), atol=1e-5)


def test_linear_with_a_tied_weight_of_an_ambiguous_shape_asks_for_the_key(tmp_path):
    # a (5, 4) data input beside a (5, 4) weight: either could be the weight
    params = {"bias": False, "in_features": 4, "out_features": 5}
    with pytest.raises(kuiper.ShapeError, match=r"one input of weight shape \(5, 4\).*\$weight"):
        one_op(tmp_path, "nn.Linear", [rng_array((5, 4)), rng_array((5, 4), 1)], params)
    x, weight = rng_array((5, 4)), rng_array((5, 4), 1)
    (got,), _ = one_op(tmp_path, "nn.Linear", [x, weight], params, keys=[None, "weight"])
    np.testing.assert_allclose(got, matmul_reference(x, weight.T), atol=1e-5)


def test_functional_linear_with_weight_and_bias_inputs(tmp_path):
    x, weight, bias = rng_array((2, 5, 4)), rng_array((3, 4), 1), rng_array((3,), 2)
    (got,), _ = one_op(tmp_path, "F.linear", [x, weight, bias], keys=["input", "weight", "bias"])
    np.testing.assert_allclose(got, matmul_reference(x, weight.T) + bias, atol=1e-5)
    (no_bias,), _ = one_op(tmp_path, "F.linear", [x, weight], {"bias": None}, keys=["input", "weight"])
    np.testing.assert_allclose(no_bias, matmul_reference(x, weight.T), atol=1e-5)


def test_functional_linear_with_weight_attributes(tmp_path):
    x, weight, bias = rng_array((2, 4)), rng_array((3, 4), 1), rng_array((3,), 2)
    (got,), _ = one_op(tmp_path, "F.linear", [x], keys=["input"], weights={"bias": bias, "weight": weight})
    np.testing.assert_allclose(got, matmul_reference(x, weight.T) + bias, atol=1e-5)


def test_functional_linear_without_any_weight_is_a_build_error(tmp_path):
    with pytest.raises(kuiper.OperatorParamError, match=r"\$weight"):
        one_op(tmp_path, "F.linear", [np.zeros((2, 4), np.float32)], keys=["input"])


# -- matmul and friends ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "a_shape, b_shape",
    [
        ((4,), (4,)),  # dot product: 0-d
        ((4,), (4, 3)),  # 1-D @ 2-D: the added dim is dropped
        ((2, 4), (4,)),
        ((2, 3, 4), (4,)),
        ((4,), (2, 4, 3)),
        ((2, 3, 4), (4, 5)),
        ((2, 1, 3, 4), (3, 4, 2)),  # batch dims (2, 1) and (3,) broadcast to (2, 3)
    ],
)
def test_matmul_follows_pytorch_rules_for_1d_and_broadcast_batches(tmp_path, a_shape, b_shape, backend_name):
    a, b = rng_array(a_shape, 1), rng_array(b_shape, 2)
    (got,), _ = one_op(tmp_path, "torch.matmul", [a, b], keys=["input", "other"], backend=backend_name)
    want = matmul_reference(a, b)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_keyword_operands_are_found_in_any_line_order(tmp_path):
    # The line lists other before input: $keys, not positions, decide the order.
    a, b = rng_array((2, 3), 1), rng_array((3, 4), 2)
    (got,), _ = one_op(tmp_path, "torch.matmul", [b, a], keys=["other", "input"])
    np.testing.assert_allclose(got, matmul_reference(a, b), atol=1e-5)


def test_mm_and_bmm_check_the_rank(tmp_path):
    a, b = rng_array((2, 3, 4)), rng_array((2, 4, 5))
    (got,), _ = one_op(tmp_path, "torch.bmm", [a, b], keys=["input", "mat2"])
    np.testing.assert_allclose(got, matmul_reference(a, b), atol=1e-5)
    with pytest.raises(kuiper.ShapeError, match=r"\$input must be 2-D"):
        one_op(tmp_path, "torch.mm", [a, b], keys=["input", "mat2"])


def test_mv_multiplies_a_matrix_by_a_vector(tmp_path):
    m, v = rng_array((3, 4)), rng_array((4,), 1)
    (got,), _ = one_op(tmp_path, "torch.mv", [m, v], keys=["input", "vec"])
    np.testing.assert_allclose(got, matmul_reference(m, v), atol=1e-5)


def test_addmm_scales_both_terms(tmp_path):
    bias, m1, m2 = rng_array((3, 5)), rng_array((3, 4), 1), rng_array((4, 5), 2)
    # Operands out of line order, as pnnx writes them ($input is the third operand here).
    (got,), _ = one_op(tmp_path, "torch.addmm", [m1, m2, bias], {"alpha": 2.0, "beta": 0.5},
                       keys=["mat1", "mat2", "input"])
    np.testing.assert_allclose(got, 0.5 * bias + 2.0 * matmul_reference(m1, m2), atol=1e-5)


def test_addmm_with_beta_zero_ignores_nan_in_input(tmp_path):
    bias = np.full((2, 2), np.nan, np.float32)
    m1, m2 = rng_array((2, 3)), rng_array((3, 2), 1)
    (got,), _ = one_op(tmp_path, "torch.addmm", [bias, m1, m2], {"alpha": 1, "beta": 0},
                       keys=["input", "mat1", "mat2"])
    np.testing.assert_allclose(got, matmul_reference(m1, m2), atol=1e-5)


def test_baddbmm_is_the_batched_addmm(tmp_path):
    c, a, b = rng_array((2, 3, 5)), rng_array((2, 3, 4), 1), rng_array((2, 4, 5), 2)
    (got,), _ = one_op(tmp_path, "torch.baddbmm", [c, a, b], {"alpha": 0.25, "beta": -1.5},
                       keys=["input", "batch1", "batch2"])
    np.testing.assert_allclose(got, -1.5 * c + 0.25 * matmul_reference(a, b), atol=1e-5)


# -- einsum ------------------------------------------------------------------------------------------------


def test_einsum_contracts_and_reduces_as_the_equation_says(tmp_path, backend_name):
    a, b = rng_array((2, 3, 4)), rng_array((2, 4, 5), 1)
    (got,), _ = one_op(tmp_path, "torch.einsum", [a, b], {"equation": "ijl,ilk->ijk"}, backend=backend_name)
    np.testing.assert_allclose(got, matmul_reference(a, b), atol=1e-5)
    (summed,), _ = one_op(tmp_path, "torch.einsum", [a], {"equation": "ikj->ij"}, backend=backend_name)
    np.testing.assert_allclose(summed, a.astype(np.float64).sum(axis=1), atol=1e-5)


def test_einsum_with_ellipsis_broadcasts_leading_dims(tmp_path):
    a, b = rng_array((2, 3, 4)), rng_array((4, 5), 1)
    (got,), _ = one_op(tmp_path, "torch.einsum", [a, b], {"equation": "...ij,jk->...ik"})
    np.testing.assert_allclose(got, matmul_reference(a, b), atol=1e-5)


def test_einsum_operand_count_must_match_the_equation(tmp_path):
    with pytest.raises(kuiper.OperatorParamError, match="names 2 operand"):
        one_op(tmp_path, "torch.einsum", [rng_array((2, 2))], {"equation": "ij,jk->ik"})
