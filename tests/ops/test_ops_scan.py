"""torch.topk beyond its PyTorch fixture: k past the dim, and the order of equal values.

The fixtures (tools/fixture_models/ops_rest.py, checked by tests/end_to_end/test_models.py) compare each
op with PyTorch; these tests pin the cases a fixture cannot reach (bad params,
ties) against hand-written values.
"""

import numpy as np
import pytest
from conftest import op_model

from kuiper.errors import KuiperError


def test_topk_with_k_beyond_the_dim_is_a_clear_error(tmp_path):
    model = op_model(tmp_path, "torch.topk t 1 2 x v i dim=1 k=5 largest=True sorted=True $input=x", outputs=("v", "i"))
    with pytest.raises(KuiperError, match="k=5 is larger"):
        model(np.zeros((2, 3), np.float32))


def test_topk_keeps_equal_values_in_order_of_appearance(tmp_path):
    model = op_model(tmp_path, "torch.topk t 1 2 x v i dim=-1 k=3 largest=True sorted=True $input=x", outputs=("v", "i"))
    _, indices = model(np.array([[1.0, 2.0, 2.0, 0.0, 2.0]], np.float32))
    np.testing.assert_array_equal(indices, [[1, 2, 4]])
    assert indices.dtype == np.int64
