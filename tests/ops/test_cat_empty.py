"""torch.cat skips 1-D tensors of shape (0,), as PyTorch does (an empty KV cache).

Expected values are written out with NumPy; the PyTorch behaviour they copy was checked
with torch 2.13: ``torch.cat([torch.empty(0), a], dim)`` is ``a`` for any valid dim of
``a``, ``torch.cat([empty, empty], 5)`` is ``empty``, and the skipped tensor still takes
part in dtype promotion (a float64 empty tensor makes the result float64).
"""

from __future__ import annotations

import numpy as np
import pytest

import kuiper
from kuiper.errors import KuiperError, ShapeError

from conftest import op_model

EMPTY = np.zeros((0,), np.float32)


def cat(tmp_path, backend_name, dim, *inputs):
    names = [f"x{i}" for i in range(len(inputs))]
    model = op_model(tmp_path, f"torch.cat op {len(names)} 1 {' '.join(names)} y dim={dim}",
                     inputs=names, backend=backend_name)
    return kuiper.to_numpy(model(*inputs))


@pytest.mark.parametrize("dim", [0, 2, -1, -2])
def test_an_empty_1d_tensor_is_skipped_beside_a_4d_one(tmp_path, backend_name, dim):
    keys = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    got = cat(tmp_path, backend_name, dim, EMPTY, keys)
    np.testing.assert_array_equal(got, keys)


def test_the_kv_cache_grows_by_the_new_keys_after_the_first_step(tmp_path, backend_name):
    past = np.ones((1, 2, 3, 4), np.float32)
    new = np.full((1, 2, 1, 4), 7, np.float32)
    got = cat(tmp_path, backend_name, -2, past, EMPTY, new)
    np.testing.assert_array_equal(got, np.concatenate([past, new], axis=2))


def test_only_empty_tensors_give_an_empty_tensor_whatever_the_dim(tmp_path, backend_name):
    got = cat(tmp_path, backend_name, 5, EMPTY, EMPTY)
    assert got.shape == (0,) and got.dtype == np.float32


def test_a_skipped_tensor_still_takes_part_in_dtype_promotion(tmp_path):
    values = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = cat(tmp_path, "numpy", 1, np.zeros((0,), np.float64), values)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, values.astype(np.float64))


def test_an_empty_tensor_of_another_shape_is_not_skipped(tmp_path):
    with pytest.raises(ShapeError, match=r"cannot concatenate shapes \(2, 0\), \(2, 3\) along dim 0"):
        cat(tmp_path, "numpy", 0, np.zeros((2, 0), np.float32), np.ones((2, 3), np.float32))


def test_a_dim_out_of_range_for_the_joined_tensors_is_refused(tmp_path):
    with pytest.raises(KuiperError, match="dim 5 is out of range for a tensor of rank 2"):
        cat(tmp_path, "numpy", 5, EMPTY, np.ones((2, 3), np.float32))
