"""torch.lgamma beyond its PyTorch fixture: math.lgamma's values, and inf at the poles.

The fixtures (tools/fixture_models/ops_rest.py, checked by tests/end_to_end/test_models.py) compare each
op with PyTorch; these tests pin the cases a fixture cannot reach (the poles)
against Python's math module.
"""

import math

import numpy as np
from conftest import op_model


def test_lgamma_matches_math_lgamma_and_is_inf_at_poles(tmp_path):
    model = op_model(tmp_path, "torch.lgamma g 1 1 x y $input=x")
    x = np.array([-3.0, -2.5, -1.0, -0.5, 0.0, 1e-3, 0.5, 1.0, 2.0, 3.7, 30.0, 1e6], np.float32)
    got = np.asarray(model(x))
    want = np.array([math.inf if v <= 0 and v == int(v) else math.lgamma(float(v)) for v in x], np.float64)
    assert np.isinf(got[[0, 2, 4]]).all()
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=2e-7, atol=1e-6)
