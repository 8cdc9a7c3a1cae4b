"""torch.arange on hand-made one-op models against np.arange.

The fixture new_ops_norm_addcmul_arange checks the same op against PyTorch.
"""

from __future__ import annotations

import numpy as np
import pytest

import kuiper

from test_ops_activation import one_op


@pytest.mark.parametrize("params,want", [
    ({"end": 5}, np.arange(5)),
    ({"start": 1, "end": 9, "step": 2}, np.arange(1, 9, 2)),
    ({"start": 0.5, "end": 2.0, "step": 0.25}, np.arange(0.5, 2.0, 0.25, dtype=np.float32)),
    ({"start": 5, "end": 1, "step": -2, "dtype": "torch.float"}, np.array([5.0, 3.0], np.float32)),
])
def test_arange_from_params(tmp_path, params, want):
    (got,), _ = one_op(tmp_path, "torch.arange", [np.zeros(1, np.float32)][:0], params)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_arange_end_from_an_input(tmp_path):
    (got,), _ = one_op(tmp_path, "torch.arange", [np.array(4)], {"start": 1, "dtype": "torch.float"}, keys=["end"])
    np.testing.assert_array_equal(got, np.array([1, 2, 3], np.float32))
    with pytest.raises(kuiper.KuiperError, match="needs 'end'"):
        one_op(tmp_path, "torch.arange", [], {"start": 1})
