"""torch.scatter_add and torch.slice_scatter beyond their PyTorch fixtures: bad indices and steps.

The fixtures (tools/fixture_models/ops_rest.py, checked by tests/end_to_end/test_models.py) compare each
op with PyTorch; these tests pin the cases a fixture cannot reach (indices
outside the dim, a non-positive step).
"""

import numpy as np
import pytest
from conftest import op_model

from kuiper.errors import KuiperError, OperatorParamError


def test_scatter_add_rejects_indices_outside_the_dim(tmp_path):
    model = op_model(tmp_path, "torch.scatter_add s 3 1 x i u y dim=1 $input=x $index=i $src=u", inputs=("x", "i", "u"))
    x = np.zeros((1, 3), np.float32)
    with pytest.raises(KuiperError, match=r"\[0, 3\)"):
        model(x, np.array([[3]], np.int64), x)


def test_slice_scatter_rejects_a_non_positive_step(tmp_path):
    with pytest.raises(OperatorParamError, match="'step' must be positive"):
        op_model(tmp_path, "torch.slice_scatter s 2 1 x u y dim=0 start=0 end=2 step=0 $input=x $src=u", inputs=("x", "u"))
