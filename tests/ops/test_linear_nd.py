"""nn.Linear / F.linear on N-D inputs run as one 2-D GEMM; the result must equal a float64 einsum."""

from __future__ import annotations

import numpy as np
import pytest

from kuiper.backends import get_backend
from kuiper.ops.linear import FunctionalLinear, Linear

from conftest import pnnx_node


@pytest.mark.parametrize("shape", [(7,), (3, 7), (2, 5, 7), (2, 3, 4, 7)])
@pytest.mark.parametrize("contiguous", [True, False])
def test_linear_nd_matches_float64_einsum(shape, contiguous):
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((5, 7)).astype(np.float32)
    bias = rng.standard_normal(5).astype(np.float32)
    x = rng.standard_normal(shape[::-1]).astype(np.float32).T if not contiguous else \
        rng.standard_normal(shape).astype(np.float32)
    expected = np.einsum("...k,nk->...n", x.astype(np.float64), weight.astype(np.float64)) + bias
    node = pnnx_node("nn.Linear", "fc", ["x"], ["y"], params={"bias": True}, attrs={"weight": weight, "bias": bias})
    got = Linear(node, get_backend("numpy")).forward(x)
    assert got.shape == expected.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, atol=1e-5)
    functional = pnnx_node("F.linear", "f", ["x", "w", "b"], ["y"], params={}, input_keys=["input", "weight", "bias"])
    got = FunctionalLinear(functional, get_backend("numpy")).forward(x, weight, bias)
    np.testing.assert_allclose(got, expected, atol=1e-5)
