"""Small constant weights laid out row-major for NumPy's BLAS (kuiper/numba_kernels/blas_weights.py):
which weights are copied, when, and that the products still compute what float64 references do."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kuiper
from kuiper import onednn
from kuiper.backends import get_backend
from kuiper.backends.numpy_backend import WEIGHT_ALIGNMENT
from kuiper.onednn.primitives import PRODUCT_WORK

from conftest import param_text, write_model

pytest.importorskip("numba")

from kuiper.numba_kernels import blas_weights  # noqa: E402  (after the skip: the plugin needs numba)

RNG = np.random.default_rng(11)
NUMPY = get_backend("numpy")


def test_a_small_transposed_weight_is_copied_row_major_and_others_are_left_as_they_are():
    weight = RNG.standard_normal((128, 64)).astype(np.float32)
    laid_out = blas_weights.row_major(NUMPY, weight.T)
    assert laid_out.flags.c_contiguous and not np.shares_memory(laid_out, weight)
    assert laid_out.ctypes.data % WEIGHT_ALIGNMENT == 0  # where BLAS wants its operands
    np.testing.assert_array_equal(laid_out, weight.T)
    assert blas_weights.row_major(NUMPY, weight) is weight  # row-major already
    rows = blas_weights.ROW_MAJOR_BYTES // 4 // 64 + 1
    large = np.zeros((rows, 64), np.float32).T  # one row over the limit
    assert blas_weights.row_major(NUMPY, large) is large


IN, OUT = 64, 128
WEIGHT = (RNG.standard_normal((OUT, IN)) / math.sqrt(IN)).astype(np.float32)
BIAS = RNG.standard_normal(OUT).astype(np.float32)
LINEAR_MODEL = f"""
pnnx.Input in0 0 1 x
nn.Linear fc 1 1 x y bias=True in_features={IN} out_features={OUT} @weight=({OUT},{IN})f32 @bias=({OUT})f32
pnnx.Output out 1 0 y
"""


def _linear_model(tmp_path):
    path = write_model(tmp_path, param_text(LINEAR_MODEL), {"fc.weight": WEIGHT.tobytes(), "fc.bias": BIAS.tobytes()})
    return kuiper.load(path, threads=2)


def _float64_linear(x):
    return np.einsum("...i,oi->...o", x.astype(np.float64), WEIGHT.astype(np.float64)) + BIAS


def test_a_linear_lays_its_weight_out_at_its_first_product_on_blas(tmp_path):
    model = _linear_model(tmp_path)
    (step,) = model.steps
    assert not step.op.weight_t.flags.c_contiguous  # a view of the (out, in) weight until BLAS needs it
    x = RNG.standard_normal((1, 20, IN)).astype(np.float32)  # 164 K multiply-adds: NumPy's BLAS
    np.testing.assert_allclose(model(x), _float64_linear(x), rtol=0, atol=1e-5)
    assert step.op.weight_t.flags.c_contiguous
    np.testing.assert_allclose(model(x[:, :7]), _float64_linear(x[:, :7]), rtol=0, atol=1e-5)


@pytest.mark.skipif(not onednn.available(), reason=onednn.describe())
def test_a_linear_whose_products_run_on_onednn_copies_nothing(tmp_path):
    model = _linear_model(tmp_path)
    (step,) = model.steps
    rows = PRODUCT_WORK // (IN * OUT) + 1
    x = RNG.standard_normal((rows, IN)).astype(np.float32)
    np.testing.assert_allclose(model(x), _float64_linear(x), rtol=0, atol=1e-5)
    assert not step.op.weight_t.flags.c_contiguous


E, HEADS = 64, 4
MHA_MODEL = f"""
pnnx.Input x 0 1 x
nn.MultiheadAttention mha 1 1 x y add_bias_kv=False add_zero_attn=False batch_first=True bias=True embed_dim={E} kdim={E} num_heads={HEADS} vdim={E} @in_proj_bias=({3 * E})f32 @in_proj_weight=({3 * E},{E})f32 @out_proj.bias=({E})f32 @out_proj.weight=({E},{E})f32
pnnx.Output out 1 0 y
"""


def _float64_multihead(x, in_weight, in_bias, out_weight, out_bias):
    """Self-attention over x (N, L, E), head by head, in float64."""
    x = x.astype(np.float64)
    q, k, v = (x @ in_weight[i * E:(i + 1) * E].T.astype(np.float64) + in_bias[i * E:(i + 1) * E] for i in range(3))
    width = E // HEADS
    heads = []
    for h in range(HEADS):
        part = slice(h * width, (h + 1) * width)
        scores = q[..., part] @ np.swapaxes(k[..., part], 1, 2) / math.sqrt(width)
        weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
        heads.append(weights / weights.sum(axis=-1, keepdims=True) @ v[..., part])
    return np.concatenate(heads, axis=-1) @ out_weight.T.astype(np.float64) + out_bias


def test_multihead_attention_lays_out_the_projections_it_runs_on_blas(tmp_path):
    weights = {"mha.in_proj_weight": (RNG.standard_normal((3 * E, E)) / math.sqrt(E)).astype(np.float32),
               "mha.in_proj_bias": RNG.standard_normal(3 * E).astype(np.float32),
               "mha.out_proj.weight": (RNG.standard_normal((E, E)) / math.sqrt(E)).astype(np.float32),
               "mha.out_proj.bias": RNG.standard_normal(E).astype(np.float32)}
    path = write_model(tmp_path, param_text(MHA_MODEL), {name: value.tobytes() for name, value in weights.items()})
    model = kuiper.load(path, threads=2)
    (step,) = model.steps
    x = RNG.standard_normal((1, 20, E)).astype(np.float32)  # 20 tokens: every product on NumPy's BLAS
    np.testing.assert_allclose(model(x), _float64_multihead(x, *weights.values()), rtol=0, atol=2e-5)
    laid_out = step.op._blas_weights
    assert set(laid_out) == {"qkv", "out"} and all(w.flags.c_contiguous for w in laid_out.values())
    np.testing.assert_array_equal(laid_out["qkv"], weights["mha.in_proj_weight"].T)
