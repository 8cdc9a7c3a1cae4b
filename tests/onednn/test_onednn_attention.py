"""kuiper.onednn.Attention (two matmuls and a softmax) against float64 NumPy, and the attention ops that use it."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kuiper
from kuiper import onednn
from kuiper.onednn.attention import fits
from kuiper.onednn.primitives import MAX_PLANS, PRODUCT_WORK

from conftest import write_model

pytestmark = pytest.mark.skipif(not onednn.available(), reason=onednn.describe())

RNG = np.random.default_rng(11)
TOLERANCE = 2e-6  # softmax weights sum to 1, so outputs are averages of unit-scale values


def float64_attention(q, k, v, scale, masks=()):
    scores = q.astype(np.float64) @ np.swapaxes(k.astype(np.float64), -1, -2) * scale
    for mask in masks:
        scores = scores + mask
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ v.astype(np.float64), weights


def heads_of_one_projection(batch=2, length=13, heads=3, dim=8):
    """q, k, v as a ViT makes them: strided views of one (batch, length, 3, heads, dim) projection."""
    qkv = RNG.standard_normal((batch, length, 3, heads, dim)).astype(np.float32).transpose(2, 0, 3, 1, 4)
    return qkv[0], qkv[1], qkv[2]


def test_strided_heads_are_read_where_they_lie():
    q, k, v = heads_of_one_projection()
    assert not q.flags.c_contiguous and fits(q, k, v)
    out, weights = onednn.Attention(onednn.library())(q, k, v, 0.3, threads=2)
    expected, _ = float64_attention(q, k, v, 0.3)
    assert weights is None and out.shape == expected.shape and out.dtype == np.float32
    np.testing.assert_allclose(out, expected, rtol=0, atol=TOLERANCE)


def test_heads_whose_strides_get_only_the_gemm_kernel_are_copied_dense_for_brgemm():
    """DeiT's heads ((1, 3, 197, 64) views of one projection): oneDNN has only its GEMM kernel for products of
    those strides and its brgemm kernel for dense operands, so the plan copies q, k^T and v dense first; the
    result is the bits the same attention gives on dense operands, and the operands are read, never written."""
    from kuiper.onednn.primitives import reference_or_gemm

    q, k, v = heads_of_one_projection(batch=1, length=197, heads=3, dim=64)
    kept = [np.array(a, copy=True) for a in (q, k, v)]
    attention = onednn.Attention(onednn.library())
    out, _ = attention(q, k, v, 0.125, threads=1)
    np.testing.assert_allclose(out, float64_attention(q, k, v, 0.125)[0], rtol=0, atol=TOLERANCE)
    (plan,) = attention.plans.values()
    assert plan.dense and not any(reference_or_gemm(p.implementation()) for p in (plan.scores, plan.mix))
    for given, before in zip((q, k, v), kept):
        np.testing.assert_array_equal(given, before)
    dense_out, _ = attention(*kept, 0.125, threads=1)  # row-major operands: a plan of their own, no copies
    assert not [p for p in attention.plans.values() if p is not plan][0].dense
    np.testing.assert_array_equal(dense_out, out)


def test_masks_add_to_the_scores_and_the_weights_come_back_when_asked():
    q, k, v = (RNG.standard_normal((2, 4, 5 if i == 0 else 7, 6)).astype(np.float32) for i in range(3))
    causal_like = np.where(RNG.random((5, 7)) < 0.3, -np.inf, 0.0).astype(np.float32)
    causal_like[:, 0] = 0  # every query may attend to something
    bias = RNG.standard_normal((2, 1, 1, 7)).astype(np.float32)
    out, weights = onednn.Attention(onednn.library())(q, k, v, 1 / math.sqrt(6), (causal_like, bias),
                                                      keep_weights=True)
    expected, expected_weights = float64_attention(q, k, v, 1 / math.sqrt(6), (causal_like, bias))
    np.testing.assert_allclose(out, expected, rtol=0, atol=TOLERANCE)
    np.testing.assert_allclose(weights, expected_weights, rtol=0, atol=TOLERANCE)
    assert np.all(weights[..., causal_like == -np.inf] == 0)


@pytest.mark.parametrize("why, operands", [
    ("float64", lambda q, k, v: (q.astype(np.float64), k, v)),
    ("broadcast batch", lambda q, k, v: (q, k[:1], v[:1])),
    ("zero stride", lambda q, k, v: (q, np.broadcast_to(k[:, :, :1], k.shape), v)),
    ("key and query widths differ", lambda q, k, v: (q, k[..., :4], v)),
])
def test_operands_it_does_not_take_are_refused_by_fits_and_the_call(why, operands):
    q, k, v = operands(*heads_of_one_projection())
    assert not fits(q, k, v)
    with pytest.raises(onednn.OneDnnError, match="not float32 arrays"):
        onednn.Attention(onednn.library())(q, k, v, 1.0)


def test_plans_are_kept_per_shape_and_bounded():
    attention = onednn.Attention(onednn.library())
    for length in range(1, MAX_PLANS + 3):
        q, k, v = heads_of_one_projection(batch=1, length=length)
        out, _ = attention(q, k, v, 0.5, threads=1)
        np.testing.assert_allclose(out, float64_attention(q, k, v, 0.5)[0], rtol=0, atol=TOLERANCE)
    assert len(attention.plans) == MAX_PLANS


SDPA_MODEL = """7767517
5 4
pnnx.Input q 0 1 q
pnnx.Input k 0 1 k
pnnx.Input v 0 1 v
F.scaled_dot_product_attention sdpa 3 1 q k v out dropout_p=0.0 is_causal={causal} scale=None
pnnx.Output output 1 0 out
"""


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("length, on_onednn", [(9, False), (100, True)])
def test_the_sdpa_op_runs_on_onednn_when_the_products_are_large_enough(tmp_path, monkeypatch, causal, length,
                                                                        on_onednn):
    pytest.importorskip("numba")  # the kernel classes are the compiled-kernel plugin's
    calls = []
    run = onednn.Attention.__call__
    monkeypatch.setattr(onednn.Attention, "__call__", lambda self, *a, **kw: calls.append(1) or run(self, *a, **kw))
    model = kuiper.load(write_model(tmp_path, SDPA_MODEL.format(causal=causal)), threads=2)
    assert model.steps[0].op.native is not None and model.blas_threads == 1
    q, k, v = heads_of_one_projection(length=length, heads=4, dim=32)
    mask = np.triu(np.full((length, length), -np.inf), 1) if causal else np.zeros((length, length))
    expected, _ = float64_attention(q, k, v, 1 / math.sqrt(32), (mask,))
    np.testing.assert_allclose(model(q, k, v), expected, rtol=0, atol=TOLERANCE)
    assert bool(calls) == on_onednn == (2 * 4 * length * length * 64 >= PRODUCT_WORK)
    # float64 operands take the reference and stay float64
    out64 = model(*(a.astype(np.float64) for a in (q, k, v)))
    assert out64.dtype == np.float64
    np.testing.assert_allclose(out64, expected, rtol=0, atol=1e-12)


def test_scores_over_the_memory_budget_are_refused_before_they_are_made(tmp_path, monkeypatch):
    pytest.importorskip("numba")
    model = kuiper.load(write_model(tmp_path, SDPA_MODEL.format(causal=False)))
    q, k, v = heads_of_one_projection(length=100, heads=4, dim=32)  # scores: 2 x 4 x 100 x 100 float32, 320 KB
    monkeypatch.setenv("KUIPER_MEMORY_BUDGET", "200000")
    with pytest.raises(kuiper.SizeLimitError, match="sdpa"):
        model(q, k, v)


E, HEADS = 128, 4
MHA_MODEL = f"""7767517
3 2
pnnx.Input x 0 1 x
nn.MultiheadAttention mha 1 1 x y add_bias_kv=False add_zero_attn=False batch_first={{batch_first}} bias=True embed_dim={E} kdim={E} num_heads={HEADS} vdim={E} @in_proj_bias=({3 * E})f32 @in_proj_weight=({3 * E},{E})f32 @out_proj.bias=({E})f32 @out_proj.weight=({E},{E})f32
pnnx.Output out 1 0 y
"""


def float64_self_attention(x, in_weight, in_bias, out_weight, out_bias):
    """nn.MultiheadAttention over batch-first x (N, L, E), written out in float64."""
    x = x.astype(np.float64)
    q, k, v = np.split(x @ in_weight.T.astype(np.float64) + in_bias, 3, axis=-1)
    heads = [np.swapaxes(np.reshape(t, t.shape[:2] + (HEADS, E // HEADS)), 1, 2) for t in (q, k, v)]
    out, _ = float64_attention(*heads, 1 / math.sqrt(E // HEADS))
    merged = np.reshape(np.swapaxes(out, 1, 2), x.shape)
    return merged @ out_weight.T.astype(np.float64) + out_bias


@pytest.mark.parametrize("batch_first", [True, False])
def test_multihead_attention_projects_and_attends_on_onednn(tmp_path, monkeypatch, batch_first):
    pytest.importorskip("numba")
    calls = []
    run = onednn.MatMul.__call__
    monkeypatch.setattr(onednn.MatMul, "__call__", lambda self, *a, **kw: calls.append(1) or run(self, *a, **kw))
    weights = {"mha.in_proj_weight": (RNG.standard_normal((3 * E, E)) / math.sqrt(E)).astype(np.float32),
               "mha.in_proj_bias": RNG.standard_normal(3 * E).astype(np.float32),
               "mha.out_proj.weight": (RNG.standard_normal((E, E)) / math.sqrt(E)).astype(np.float32),
               "mha.out_proj.bias": RNG.standard_normal(E).astype(np.float32)}
    path = write_model(tmp_path, MHA_MODEL.format(batch_first=batch_first),
                       {name: value.tobytes() for name, value in weights.items()})
    model = kuiper.load(path, threads=2)
    x = RNG.standard_normal((2, 64, E)).astype(np.float32)  # (N, L, E)
    expected = float64_self_attention(x, *weights.values())
    got = model(x if batch_first else np.swapaxes(x, 0, 1).copy())
    np.testing.assert_allclose(got if batch_first else np.swapaxes(got, 0, 1), expected, rtol=0, atol=2e-5)
    assert len(calls) == 2  # the (E, 3E) input projection and the output projection
