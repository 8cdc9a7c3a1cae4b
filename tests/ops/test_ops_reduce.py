"""Reductions, comparisons and torch.where on hand-written one-op models.

Values are checked against small inputs worked out by hand or against the
definitions (sums of elements); the fixtures reduce_*, compare_where check the
same ops against PyTorch.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import kuiper

from test_ops_activation import one_op

# A (2, 3) input whose sums and extremes are easy to read:
#   rows:  [1, -2, 3] -> sum 2, max 3 at 2, min -2 at 1
#          [4, 0, -6] -> sum -2, max 4 at 0, min -6 at 2
X = np.array([[1.0, -2.0, 3.0], [4.0, 0.0, -6.0]], dtype=np.float32)


def run(tmp_path, op_type, x, n_out=1, **params):
    outputs, _ = one_op(tmp_path, op_type, [x], params, keys=["input"], n_out=n_out)
    return outputs if n_out > 1 else outputs[0]


# -- sum / mean / prod / amax / amin -------------------------------------------------------------------


@pytest.mark.parametrize(
    "op_type, dim, keepdim, want",
    [
        ("torch.sum", [1], False, [2.0, -2.0]),
        ("torch.sum", [-1], True, [[2.0], [-2.0]]),
        ("torch.sum", [0], False, [5.0, -2.0, -3.0]),
        ("torch.sum", [0, -1], False, 0.0),
        ("torch.sum", None, False, 0.0),
        ("torch.mean", [-2], False, [2.5, -1.0, -1.5]),
        ("torch.mean", [0, 1], True, [[0.0]]),
        ("torch.prod", 1, False, [-6.0, 0.0]),
        ("torch.prod", -2, True, [[4.0, 0.0, -18.0]]),
        ("torch.amax", [-1], False, [3.0, 4.0]),
        ("torch.amax", [0, 1], True, [[4.0]]),
        ("torch.amin", [0], True, [[1.0, -2.0, -6.0]]),
    ],
)
def test_reductions_over_int_list_negative_dims_and_keepdim(tmp_path, op_type, dim, keepdim, want, backend_name):
    outputs, model = one_op(tmp_path, op_type, [X], {"dim": dim, "keepdim": keepdim}, keys=["input"],
                            backend=backend_name)
    want = np.array(want, dtype=np.float32)
    assert outputs[0].shape == want.shape
    np.testing.assert_allclose(outputs[0], want, atol=1e-6)


def test_a_full_reduction_is_a_0d_array_of_the_backend(tmp_path):
    _, model = one_op(tmp_path, "torch.sum", [X], keys=["input"])
    result = model(X)  # backend arrays, not converted
    assert model.backend.is_array(result) and result.shape == () and result.dtype == np.float32
    assert float(kuiper.to_numpy(result)) == 0.0


def test_dim_errors_name_the_op(tmp_path):
    with pytest.raises(kuiper.KuiperError, match="dim 2 is out of range"):
        run(tmp_path, "torch.sum", X, dim=[2])
    with pytest.raises(kuiper.KuiperError, match="same dim twice"):
        run(tmp_path, "torch.mean", X, dim=[1, -1])
    with pytest.raises(kuiper.UnsupportedOperatorError, match="dtype"):
        run(tmp_path, "torch.sum", X, dim=[1], dtype="torch.float64")
    with pytest.raises(kuiper.UnsupportedOperatorError, match="a single dim"):
        run(tmp_path, "torch.argmax", X, dim=[0, 1])


# -- max / min / argmax / argmin ---------------------------------------------------------------------------


def test_max_with_dim_gives_values_and_int64_indices(tmp_path):
    values, indices = run(tmp_path, "torch.max", X, n_out=2, dim=1, keepdim=False)
    np.testing.assert_array_equal(values, [3.0, 4.0])
    np.testing.assert_array_equal(indices, [2, 0])
    assert indices.dtype == np.int64
    values, indices = run(tmp_path, "torch.min", X, n_out=2, dim=-1, keepdim=True)
    np.testing.assert_array_equal(values, [[-2.0], [-6.0]])
    np.testing.assert_array_equal(indices, [[1], [2]])


def test_max_with_dim_and_one_output_gives_the_values(tmp_path):
    # pnnx drops the indices output when nothing reads it.
    np.testing.assert_array_equal(run(tmp_path, "torch.max", X, dim=0, keepdim=False), [4.0, 0.0, 3.0])


def test_max_without_dim_is_a_0d_scalar(tmp_path):
    result = run(tmp_path, "torch.max", X)
    assert result.shape == () and float(result) == 4.0
    assert float(run(tmp_path, "torch.min", X)) == -6.0


def test_max_without_dim_cannot_have_two_outputs(tmp_path):
    with pytest.raises(kuiper.OperatorParamError, match="without 'dim' gives one output"):
        run(tmp_path, "torch.max", X, n_out=2)


def test_argmax_and_argmin(tmp_path):
    got = run(tmp_path, "torch.argmax", X, dim=-1, keepdim=False)
    np.testing.assert_array_equal(got, [2, 0])
    assert got.dtype == np.int64
    np.testing.assert_array_equal(run(tmp_path, "torch.argmin", X, dim=0, keepdim=True), [[0, 0, 1]])
    # dim=None: an index into the flattened tensor; keepdim then keeps every dim as 1 (PyTorch).
    flat = run(tmp_path, "torch.argmin", X, dim=None, keepdim=False)
    assert flat.shape == () and int(flat) == 5
    kept = run(tmp_path, "torch.argmax", X, dim=None, keepdim=True)
    assert kept.shape == (1, 1) and int(kept[0, 0]) == 3


def test_argmax_returns_the_first_of_equal_maxima(tmp_path):
    x = np.array([[1.0, 5.0, 5.0, 2.0]], dtype=np.float32)
    assert int(run(tmp_path, "torch.argmax", x, dim=1, keepdim=False)[0]) == 1


# -- norm / logsumexp / var / std ---------------------------------------------------------------------------

V = np.array([[3.0, -4.0, 0.0], [1.0, 2.0, -2.0]], dtype=np.float32)


@pytest.mark.parametrize(
    "p, want",
    [
        (2, [5.0, 3.0]),
        ("fro", [5.0, 3.0]),
        (1, [7.0, 5.0]),
        (float("inf"), [4.0, 2.0]),
        (float("-inf"), [0.0, 1.0]),
        (0, [2.0, 3.0]),
        (3, [(27 + 64) ** (1 / 3), (1 + 8 + 8) ** (1 / 3)]),
    ],
)
def test_norm_orders_along_a_dim(tmp_path, p, want):
    got = run(tmp_path, "torch.norm", V, dim=[-1], keepdim=False, p=p)
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_norm_over_everything_and_keepdim(tmp_path):
    assert math.isclose(float(run(tmp_path, "torch.norm", V, dim=None, keepdim=False, p=2)), math.sqrt(34),
                        abs_tol=1e-5)
    kept = run(tmp_path, "torch.norm", V, dim=[0, 1], keepdim=True, p=1)
    np.testing.assert_allclose(kept, [[12.0]], atol=1e-5)


def test_norm_rejects_the_nuclear_norm_at_build_time(tmp_path):
    with pytest.raises(kuiper.UnsupportedOperatorError, match="p='nuc'"):
        run(tmp_path, "torch.norm", V, dim=[0, 1], p="nuc")


def test_logsumexp_is_stable_for_large_and_infinite_values(tmp_path):
    x = np.array([[1000.0, 1000.0, -np.inf], [-np.inf, -np.inf, -np.inf]], dtype=np.float32)
    got = run(tmp_path, "torch.logsumexp", x, dim=[-1], keepdim=False)
    np.testing.assert_allclose(got[0], 1000.0 + math.log(2.0), atol=1e-4)
    assert got[1] == -np.inf  # log(0), not nan
    small = run(tmp_path, "torch.logsumexp", X, dim=[0, 1], keepdim=True)
    want = math.log(sum(math.exp(v) for v in X.reshape(-1).tolist()))
    assert small.shape == (1, 1)
    np.testing.assert_allclose(small, [[want]], atol=1e-5)


@pytest.mark.parametrize("op_type, x, want", [
    ("torch.amax", np.zeros((2, 0, 3), np.float32), -np.inf),
    ("torch.amin", np.zeros((2, 0, 3), np.float32), np.inf),
    ("torch.amax", np.zeros((2, 0, 3), np.int32), np.iinfo(np.int32).min),
    ("torch.amin", np.zeros((2, 0, 3), np.uint8), 255),
    ("torch.amax", np.zeros((2, 0, 3), bool), False),
    ("torch.logsumexp", np.zeros((2, 0, 3), np.float32), -np.inf),
])
def test_reducing_no_values_gives_the_reductions_identity(tmp_path, op_type, x, want):
    got = run(tmp_path, op_type, x, dim=[1], keepdim=True)  # each of the 2 x 3 outputs reduces nothing
    assert got.shape == (2, 1, 3) and got.dtype == x.dtype
    assert np.all(got == want)
    assert run(tmp_path, op_type, x, dim=[0, 1], keepdim=False).shape == (3,)


def test_var_and_std_with_and_without_bessel_correction(tmp_path):
    x = np.array([[1.0, 2.0, 3.0, 6.0]], dtype=np.float32)  # mean 3, squared deviations sum 14
    np.testing.assert_allclose(run(tmp_path, "torch.var", x, dim=[1], keepdim=False, unbiased=True), [14 / 3],
                               atol=1e-5)
    np.testing.assert_allclose(run(tmp_path, "torch.std", x, dim=[-1], keepdim=True, unbiased=False),
                               [[math.sqrt(14 / 4)]], atol=1e-5)


# -- comparisons ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "op_type, want",
    [
        ("torch.eq", [[False, False, True], [False, True, False]]),
        ("torch.ne", [[True, True, False], [True, False, True]]),
        ("torch.gt", [[False, False, False], [True, False, False]]),
        ("torch.ge", [[False, False, True], [True, True, False]]),
        ("torch.lt", [[True, True, False], [False, False, True]]),
        ("torch.le", [[True, True, True], [False, True, True]]),
    ],
)
def test_comparisons_with_a_tensor_and_with_a_number(tmp_path, op_type, want, backend_name):
    other = np.array([[2.0, 0.0, 3.0], [1.0, 0.0, 0.0]], dtype=np.float32)
    (got,), _ = one_op(tmp_path, op_type, [X, other], keys=["input", "other"], backend=backend_name)
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, want)
    # The same comparison against a number broadcasts it.
    (against_zero,), _ = one_op(tmp_path, op_type, [X], {"other": 0}, keys=["input"], backend=backend_name)
    np.testing.assert_array_equal(against_zero, {
        "torch.eq": X == 0, "torch.ne": X != 0, "torch.gt": X > 0,
        "torch.ge": X >= 0, "torch.lt": X < 0, "torch.le": X <= 0,
    }[op_type])


def test_comparison_number_is_compared_in_the_tensors_float32(tmp_path):
    # float32(0.1) > 0.1 in float64, but PyTorch compares in the tensor's dtype: equal.
    x = np.array([0.1], dtype=np.float32)
    (got,), _ = one_op(tmp_path, "torch.gt", [x], {"other": 0.1}, keys=["input"])
    assert not got[0]


def test_comparison_without_other_is_a_build_error(tmp_path):
    with pytest.raises(kuiper.OperatorParamError, match="needs 'other'"):
        one_op(tmp_path, "torch.gt", [X], keys=["input"])


# -- where ---------------------------------------------------------------------------------------------------


def test_where_picks_input_where_the_condition_holds(tmp_path, backend_name):
    condition = X > 0
    y = np.full_like(X, 9.0)
    (got,), _ = one_op(tmp_path, "torch.where", [condition, X, y], keys=["condition", "input", "other"],
                       backend=backend_name)
    np.testing.assert_array_equal(got, [[1.0, 9.0, 3.0], [4.0, 9.0, 9.0]])


def test_where_with_number_branches_follows_pytorch_dtypes(tmp_path):
    condition = X > 0
    # Both numbers: float32 (PyTorch's default dtype), not float64.
    (both,), _ = one_op(tmp_path, "torch.where", [condition], {"input": 1.0, "other": 0.0}, keys=["condition"])
    assert both.dtype == np.float32
    np.testing.assert_array_equal(both, condition.astype(np.float32))
    # An int number with a float32 tensor takes the tensor's dtype.
    (mixed,), _ = one_op(tmp_path, "torch.where", [condition, X], {"input": 2}, keys=["condition", "other"])
    assert mixed.dtype == np.float32
    np.testing.assert_array_equal(mixed, [[2.0, -2.0, 2.0], [2.0, 0.0, -6.0]])
    # A float number with an int64 tensor promotes to float32.
    ints = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int64)
    (promoted,), _ = one_op(tmp_path, "torch.where", [condition, ints], {"other": 0.5},
                            keys=["condition", "input"])
    assert promoted.dtype == np.float32
    np.testing.assert_array_equal(promoted, [[1.0, 0.5, 3.0], [4.0, 0.5, 0.5]])


def test_where_broadcasts_a_0d_branch(tmp_path):
    condition = X > 0
    scalar = np.array(7.0, dtype=np.float32)
    (got,), _ = one_op(tmp_path, "torch.where", [condition, scalar, X], keys=["condition", "input", "other"])
    np.testing.assert_array_equal(got, [[7.0, -2.0, 7.0], [7.0, 0.0, -6.0]])


def test_where_with_only_a_condition_is_unsupported(tmp_path):
    with pytest.raises(kuiper.UnsupportedOperatorError, match="torch.where"):
        one_op(tmp_path, "torch.where", [X > 0], keys=["condition"])
