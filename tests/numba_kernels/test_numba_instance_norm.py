"""The compiled instance norm (kuiper/numba_kernels/norm.py) against the reference op run in float64."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from kuiper.backends import get_backend
from kuiper.numba_kernels.norm import CompiledInstanceNorm
from kuiper.ops.norm_batch import InstanceNorm

from conftest import pnnx_node

pytestmark = pytest.mark.usefixtures("kernel_variant")  # serial and parallel builds (conftest.py)


@pytest.mark.parametrize("op_type, shape", [("nn.InstanceNorm1d", (2, 3, 50)), ("nn.InstanceNorm2d", (2, 5, 9, 7)),
                                            ("nn.InstanceNorm3d", (1, 4, 3, 5, 6)), ("F.instance_norm", (3, 6, 16, 16))])
def test_compiled_instance_norm_matches_float64_reference(op_type, shape):
    node = pnnx_node(op_type, "n", ["x"], ["y"], {"eps": 1e-5, "affine": False})
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 3 + 5).astype(np.float32)  # an offset: the mean matters
    x[0, 0] = 2.0  # a constant plane: variance 0
    op = CompiledInstanceNorm(node, get_backend("numpy"))
    assert op.compiled
    got = op.forward(x)
    want = InstanceNorm(node, get_backend("numpy")).forward(x.astype(np.float64))
    assert got.dtype == np.float32 and got.shape == x.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-5)
    assert np.all(got[0, 0] == 0.0)


def test_affine_instance_norm_takes_the_reference():
    weight = np.float32([0.5, 2.0, -1.0])
    node = pnnx_node("nn.InstanceNorm2d", "n", ["x"], ["y"], {"eps": 1e-5, "affine": True},
                     attrs={"weight": weight, "bias": np.float32([0.0, 1.0, 2.0])})
    op = CompiledInstanceNorm(node, get_backend("numpy"))
    assert not op.compiled and "reference" in op.kernel_note
    x = np.random.default_rng(1).standard_normal((2, 3, 4, 5)).astype(np.float32)
    np.testing.assert_array_equal(op.forward(x), InstanceNorm(node, get_backend("numpy")).forward(x))
