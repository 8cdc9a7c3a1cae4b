"""kuiper.onednn.Softmax, and the NumPy backend's softmax_in_place on it, against float64 NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import kuiper
from kuiper import onednn

from conftest import write_model

pytestmark = pytest.mark.skipif(not onednn.available(), reason=onednn.describe())

RNG = np.random.default_rng(11)


def float64_softmax(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("shape", [(784, 196), (96, 49), (3, 1000), (1, 20)])
def test_each_row_becomes_its_softmax_in_place_at_one_and_two_threads(shape):
    x = (RNG.standard_normal(shape) * 4).astype(np.float32)
    x[0, 0] = 80.0  # exp of the unshifted value would overflow float32
    softmax = onednn.Softmax(onednn.library())
    for threads in (1, 2):
        rows = x.copy()
        assert softmax.plan(rows.shape, threads)(rows) is rows
        np.testing.assert_allclose(rows, float64_softmax(x), rtol=5e-6, atol=1e-9)


def test_the_primitive_takes_large_float32_tensors_to_onednn_and_small_ones_to_the_row_loop(monkeypatch):
    pytest.importorskip("numba")  # the primitive is the compiled-kernel plugin's
    from kuiper.numba_kernels import softmax_native

    calls = []
    make_plan = onednn.Softmax.plan
    monkeypatch.setattr(onednn.Softmax, "plan", lambda self, *a: calls.append(a[0]) or make_plan(self, *a))
    large = (RNG.standard_normal((2, 4, 64, 64)) * 3).astype(np.float32)
    small = (RNG.standard_normal((4, 20, 20)) * 3).astype(np.float32)
    assert large.size >= softmax_native.NATIVE_ELEMENTS > small.size
    for x in (large, small):
        got = x.copy()
        assert softmax_native.softmax_in_place(None, got, -1) is got
        np.testing.assert_allclose(got, float64_softmax(x), rtol=5e-6, atol=1e-9)
    assert calls == [(2 * 4 * 64, 64)]


@pytest.mark.parametrize("special, on_onednn", [
    ({3: (7, np.nan), 5: (0, np.inf)}, False),  # a NaN or +inf anywhere: the row loop makes those rows NaN
    ({}, True),  # only -inf: oneDNN, which gives a row of -inf NaN throughout as PyTorch does
])
def test_rows_holding_nan_or_infinities_come_out_as_pytorch_gives_them(monkeypatch, special, on_onednn):
    pytest.importorskip("numba")
    from kuiper.numba_kernels import softmax_native

    calls = []
    make_plan = onednn.Softmax.plan
    monkeypatch.setattr(onednn.Softmax, "plan", lambda self, *a: calls.append(a[0]) or make_plan(self, *a))
    x = (RNG.standard_normal((300, 40)) * 3).astype(np.float32)
    for row, (column, value) in special.items():
        x[row, column] = value  # NaN: the row is NaN; inf - inf: the row is NaN
    x[8, :] = -np.inf  # nothing left: 0 / 0
    x[9, 2:] = -np.inf  # masked out: those weights are 0
    got = x.copy()
    softmax_native.softmax_in_place(None, got, -1)
    assert bool(calls) == on_onednn
    nan_rows = (*special, 8)
    for row in nan_rows:
        assert np.isnan(got[row]).all()
    assert np.array_equal(got[9, 2:], np.zeros(38, np.float32))
    finite = [row for row in range(300) if row not in nan_rows]
    np.testing.assert_allclose(got[finite], float64_softmax(x[finite]), rtol=5e-6, atol=1e-9)


SOFTMAX_OF_PERMUTED = """7767517
4 3
pnnx.Input in0 0 1 x #x=(1,64,4,64)f32
torch.permute permute 1 1 x p dims=(0,2,1,3)
F.softmax softmax 1 1 p y dim=-1
pnnx.Output out 1 0 y
"""


def test_the_softmax_op_on_a_permuted_input_matches_float64(tmp_path):
    model = kuiper.load(write_model(tmp_path, SOFTMAX_OF_PERMUTED), threads=2)
    x = (RNG.standard_normal((1, 64, 4, 64)) * 3).astype(np.float32)
    np.testing.assert_allclose(model(x), float64_softmax(x.transpose(0, 2, 1, 3)), rtol=5e-6, atol=1e-9)
