"""addcmul/addcdiv on hand-made one-op models against the PyTorch docs' formulas in float64.

The fixture new_ops_norm_addcmul_arange checks the same ops against PyTorch.
"""

from __future__ import annotations

import numpy as np

from test_ops_activation import one_op


def rand(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_addcmul_and_addcdiv(tmp_path):
    a, b, c = rand((2, 3), 6), rand((2, 3), 7), rand((1, 3), 8) + 3
    (got,), _ = one_op(tmp_path, "torch.addcmul", [a, b, c], {"value": 0.5}, keys=["input", "tensor1", "tensor2"])
    np.testing.assert_allclose(got, a + 0.5 * b * c, atol=1e-6)
    (got,), _ = one_op(tmp_path, "torch.addcdiv", [a, b, c], {"value": -2.0}, keys=["input", "tensor1", "tensor2"])
    np.testing.assert_allclose(got, a - 2.0 * b / c, atol=1e-5)
    (got,), _ = one_op(tmp_path, "aten::addcmul", [a, b, c, np.float32(0.25)])
    np.testing.assert_allclose(got, a + 0.25 * b * c, atol=1e-6)
