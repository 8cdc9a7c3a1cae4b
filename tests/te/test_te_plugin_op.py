"""A te kernel registered as an op type runs inside a PNNX model."""

import numpy as np
import pytest

import kuiper
import kuiper.te as te
from kuiper.errors import OperatorParamError, ShapeError

from conftest import op_model

SCALED_TANH = "Y<1, 4, 3, 3>[n, c, h, w] = alpha<4>[c] * tanh(beta<4>[c] * X<1, 4, 3, 3>[n, c, h, w]);"
WINDOW = "A<1, 8, 8>[n, i, j] = (B<1, 10, 8>[n, i, j] + B[n, i + 1, j] + B[n, i + 2, j]) / 3.0;"


class _TEPlugin:
    @kuiper.hookimpl
    def kuiper_add_ops(self):
        return [te.op_class("custom.ScaledTanh", SCALED_TANH), te.op_class("custom.Window", WINDOW)]


@pytest.fixture
def te_plugin(register_plugin):
    register_plugin(_TEPlugin(), "te_test_ops")


def test_kernel_op_with_weights_runs_in_a_model(tmp_path, te_plugin):
    rng = np.random.default_rng(0)
    alpha, beta = rng.uniform(0.5, 2, 4), rng.uniform(-1, 1, 4)
    model = op_model(tmp_path, "custom.ScaledTanh act 1 1 x y", weights={"alpha": alpha, "beta": beta})
    x = rng.standard_normal((1, 4, 3, 3)).astype(np.float32)
    expected = alpha.astype(np.float32)[:, None, None] * np.tanh(beta.astype(np.float32)[:, None, None] * x)
    np.testing.assert_allclose(model(x), expected, rtol=1e-6, atol=1e-6)


def test_kernel_op_without_weights_and_shape_errors(tmp_path, te_plugin):
    model = op_model(tmp_path, "custom.Window win 1 1 x y")
    b = np.arange(80, dtype=np.float32).reshape(1, 10, 8)
    np.testing.assert_allclose(model(b), (b[:, 0:8] + b[:, 1:9] + b[:, 2:10]) / 3.0, rtol=1e-6)
    with pytest.raises(ShapeError, match=r"input B has shape \(1, 9, 8\), its kernel needs \(1, 10, 8\)"):
        model(b[:, :9])


def test_kernel_op_checks_its_weights(tmp_path, te_plugin):
    with pytest.raises(OperatorParamError, match=r"weight @alpha has shape \(3,\), its kernel needs \(4,\)"):
        op_model(tmp_path, "custom.ScaledTanh act 1 1 x y", weights={"alpha": np.ones(3), "beta": np.ones(4)})
