"""The compiled F.grid_sample (kuiper/numba_kernels/grid_sample.py) against the reference op run in float64.

The reference gathers each corner as a whole-tensor NumPy pass; run on a float64 copy of the
input it is an independent check of the compiled loop's taps, weights and padding rules.
Grids reach outside [-1, 1] so that every padding mode matters, and hold a NaN.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from kuiper.backends import get_backend
from kuiper.model_ir import OpNode
from kuiper.numba_kernels.grid_sample import CompiledGridSample
from kuiper.ops.grid_sample import GridSample

pytestmark = pytest.mark.usefixtures("kernel_variant")  # serial and parallel builds (conftest.py)


def node(mode, padding_mode, align_corners):
    params = {"mode": mode, "padding_mode": padding_mode, "align_corners": align_corners}
    return OpNode("GridSample", "sample", ["x", "grid"], ["y"], params, input_keys=["input", "grid"])


def case(batch=2, channels=3, size=(5, 7), out=(4, 6), seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, channels, *size)).astype(np.float32)
    grid = rng.uniform(-1.4, 1.4, (batch, *out, 2)).astype(np.float32)
    grid[0, 0, 0] = (-1.0, 1.0)  # exactly on the corners and an edge
    grid[-1, 1, 2, 0] = np.nan
    return x, grid


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_compiled_grid_sample_matches_float64_reference(mode, padding_mode, align_corners):
    x, grid = case()
    n = node(mode, padding_mode, align_corners)
    expected = GridSample(n, get_backend("numpy")).forward(x.astype(np.float64), grid)
    got = CompiledGridSample(n, get_backend("numpy")).forward(x, grid)
    assert got.dtype == np.float32 and got.shape == expected.shape == (2, 3, 4, 6)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    assert np.isnan(expected).any() == (mode == "bilinear")  # a NaN position: NaN weights, or no tap at all
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6, equal_nan=True)


def test_compiled_grid_sample_is_the_float32_reference_bit_for_bit():
    """Same positions, weights and summation order as the reference: identical float32 results."""
    x, grid = case(batch=3, channels=1, size=(16, 16), out=(7, 7), seed=3)
    n = node("bilinear", "zeros", True)
    expected = GridSample(n, get_backend("numpy")).forward(x, grid)
    got = CompiledGridSample(n, get_backend("numpy")).forward(x, grid)
    np.testing.assert_array_equal(got, expected)


def test_bicubic_and_other_dtypes_take_the_reference():
    x, grid = case()
    bicubic = CompiledGridSample(node("bicubic", "zeros", False), get_backend("numpy"))
    assert "reference" in bicubic.kernel_note
    np.testing.assert_array_equal(bicubic.forward(x, grid),
                                  GridSample(node("bicubic", "zeros", False), get_backend("numpy")).forward(x, grid))
    compiled = CompiledGridSample(node("bilinear", "zeros", False), get_backend("numpy"))
    assert compiled.forward(x.astype(np.float64), grid).dtype == np.float64
