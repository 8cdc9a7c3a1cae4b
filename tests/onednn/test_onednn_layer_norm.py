"""kuiper.onednn.LayerNormalization and nn.LayerNorm on it, against float64 NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import kuiper
from kuiper import onednn

from conftest import write_model

pytestmark = pytest.mark.skipif(not onednn.available(), reason=onednn.describe())

RNG = np.random.default_rng(5)
TOLERANCE = 1e-5  # normalized values are of unit scale


def float64_layer_norm(x, weight, bias, eps, dims=1):
    x = x.astype(np.float64)
    axes = tuple(range(-dims, 0))
    mean = x.mean(axis=axes, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(variance + eps) * weight + bias


def test_each_row_is_normalized_then_scaled_and_shifted():
    x = (RNG.standard_normal((37, 24)) * 3 + 5).astype(np.float32)
    scale, shift = RNG.standard_normal(24).astype(np.float32), RNG.standard_normal(24).astype(np.float32)
    norm = onednn.LayerNormalization(onednn.library(), scale, shift, 1e-5)
    for threads in (1, 2):
        out, finite = norm(x, threads)
        assert out.dtype == np.float32 and finite
        np.testing.assert_allclose(out, float64_layer_norm(x, scale, shift, 1e-5), rtol=0, atol=TOLERANCE)


def test_rows_whose_float32_squares_overflow_are_told_apart():
    """oneDNN's statistics are float32: |x| ~ 1e18 over 768 features overflows, and the row comes out as the
    shift alone; the variances it hands out say so, and nn.LayerNorm then takes its float64 loop."""
    x = RNG.standard_normal((4, 768)).astype(np.float32)
    x[2] *= np.float32(1e18)
    shift = RNG.standard_normal(768).astype(np.float32)
    norm = onednn.LayerNormalization(onednn.library(), np.ones(768, np.float32), shift, 1e-5)
    out, finite = norm(x)
    assert not finite
    np.testing.assert_array_equal(out[2], shift)  # the fault the variances tell apart
    assert norm(x[[0, 1, 3]])[1]


def test_eps_matters_for_a_constant_row():
    x = np.full((2, 8), 4.0, np.float32)
    x[1] += np.arange(8, dtype=np.float32) * 1e-3
    norm = onednn.LayerNormalization(onednn.library(), np.ones(8, np.float32), np.zeros(8, np.float32), 1e-2)
    np.testing.assert_allclose(norm(x)[0], float64_layer_norm(x, 1, 0, 1e-2), rtol=0, atol=TOLERANCE)


LAYER_NORM = """7767517
3 2
pnnx.Input in0 0 1 x
nn.LayerNorm ln 1 1 x y elementwise_affine=True eps=1e-06 normalized_shape=(4,48) @weight=(4,48)f32 @bias=(4,48)f32
pnnx.Output out 1 0 y
"""


@pytest.mark.parametrize("shape, on_onednn", [((2, 4, 48), False), ((3, 100, 4, 48), True)])
def test_the_op_runs_large_tensors_on_onednn_over_several_normalized_dims(tmp_path, monkeypatch, shape, on_onednn):
    pytest.importorskip("numba")  # the kernel classes are the compiled-kernel plugin's
    from kuiper.numba_kernels.layer_norm_native import NATIVE_ELEMENTS

    calls = []
    run = onednn.LayerNormalization.__call__
    monkeypatch.setattr(onednn.LayerNormalization, "__call__", lambda self, *a: calls.append(1) or run(self, *a))
    weight, bias = RNG.standard_normal((4, 48)).astype(np.float32), RNG.standard_normal((4, 48)).astype(np.float32)
    model = kuiper.load(write_model(tmp_path, LAYER_NORM, {"ln.weight": weight.tobytes(), "ln.bias": bias.tobytes()}),
                        threads=2)
    x = RNG.standard_normal(shape).astype(np.float32)
    np.testing.assert_allclose(model(x), float64_layer_norm(x, weight, bias, 1e-6, dims=2), rtol=0, atol=TOLERANCE)
    assert bool(calls) == on_onednn == (x.size >= NATIVE_ELEMENTS)


@pytest.mark.parametrize("shape", [(2, 4, 48), (3, 100, 4, 48)])
def test_later_calls_compute_what_the_first_call_computed(tmp_path, monkeypatch, shape):
    """After the first call, small inputs run the compiled loop's specialized form and large ones keep
    oneDNN with its check of the variances: the same bits as forward for any values, NaN and rows whose
    float32 squares overflow included."""
    pytest.importorskip("numba")
    from kuiper.numba_kernels.layer_norm_native import NATIVE_ELEMENTS

    weight, bias = RNG.standard_normal((4, 48)).astype(np.float32), RNG.standard_normal((4, 48)).astype(np.float32)
    model = kuiper.load(write_model(tmp_path, LAYER_NORM, {"ln.weight": weight.tobytes(), "ln.bias": bias.tobytes()}),
                        threads=2)
    op = model.steps[0].op
    x = RNG.standard_normal(shape).astype(np.float32)
    model(x)
    assert model.plan.specialized_count() == (1 if x.size < NATIVE_ELEMENTS else 0)
    odd = x.copy()
    odd[0, 1] = np.nan
    odd[-1, -1] *= np.float32(1e18)
    for value in (x, odd, x[:1].copy()):
        np.testing.assert_array_equal(model(value), op.forward(value))
    np.testing.assert_allclose(model(x), float64_layer_norm(x, weight, bias, 1e-6, dims=2), rtol=0, atol=TOLERANCE)
