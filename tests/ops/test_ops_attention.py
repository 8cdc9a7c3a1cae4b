"""Attention ops on hand-made one-op models against float64 references written from the
PyTorch docs (a loop over heads; masks applied by their documented meaning).

The fixtures attention_* check the same ops against PyTorch itself, through pnnx.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import kuiper

from test_ops_activation import one_op


def rng(seed=0):
    return np.random.default_rng(seed)


def softmax64(scores):
    scores = scores - scores.max(axis=-1, keepdims=True)
    e = np.exp(scores)
    return e / e.sum(axis=-1, keepdims=True)


def sdpa_reference(q, k, v, mask=None, causal=False, scale=None):
    """softmax(q k^T * scale + mask) v, float64; bool mask True = may attend; an all-blocked row gives 0."""
    q, k, v = (np.asarray(t, np.float64) for t in (q, k, v))
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ np.swapaxes(k, -1, -2) * scale
    allowed = np.ones(scores.shape[-2:], bool)
    if causal:
        allowed = np.tril(allowed)
    scores = np.where(allowed, scores, -np.inf)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf) if mask.dtype == bool else scores + mask
    blocked = np.isneginf(scores).all(axis=-1, keepdims=True)
    weights = softmax64(np.where(blocked, 0.0, scores))
    return np.where(blocked, 0.0, weights @ v)


# -- F.scaled_dot_product_attention ----------------------------------------------------------------


def sdpa(tmp_path, q, k, v, mask=None, **params):
    arrays, keys = [q, k, v], ["query", "key", "value"]
    if mask is not None:
        arrays.append(mask)
        keys.append("attn_mask")
    params = {"dropout_p": 0.0, "is_causal": False, **params}
    (got,), _ = one_op(tmp_path, "F.scaled_dot_product_attention", arrays, params, keys=keys)
    return got


@pytest.mark.parametrize("lead", [(), (2,), (2, 3), (1, 2, 2)], ids=["rank2", "rank3", "rank4", "rank5"])
def test_sdpa_over_any_leading_dims(tmp_path, lead):
    r = rng()
    q, k, v = (r.standard_normal(lead + s).astype(np.float32) for s in ((4, 8), (6, 8), (6, 5)))
    got = sdpa(tmp_path, q, k, v)
    assert got.dtype == np.float32 and got.shape == lead + (4, 5)
    np.testing.assert_allclose(got, sdpa_reference(q, k, v), atol=1e-5)


def test_sdpa_float_mask_bool_mask_scale_and_causal(tmp_path):
    r = rng(1)
    q, k, v = (r.standard_normal((2, 3, 5, 4)).astype(np.float32) for _ in range(3))
    float_mask = r.standard_normal((5, 5)).astype(np.float32)
    bool_mask = r.random((2, 1, 5, 5)) > 0.3
    bool_mask[..., 0] = True  # no row fully blocked here (see the next test)
    np.testing.assert_allclose(sdpa(tmp_path, q, k, v, float_mask, scale=0.3),
                               sdpa_reference(q, k, v, float_mask, scale=0.3), atol=1e-5)
    np.testing.assert_allclose(sdpa(tmp_path, q, k, v, bool_mask), sdpa_reference(q, k, v, bool_mask), atol=1e-5)
    np.testing.assert_allclose(sdpa(tmp_path, q, k, v, is_causal=True), sdpa_reference(q, k, v, causal=True),
                               atol=1e-5)


def test_sdpa_row_that_may_attend_to_nothing_is_zero_as_in_pytorch(tmp_path):
    r = rng(2)
    q, k, v = (r.standard_normal((1, 3, 4)).astype(np.float32) for _ in range(3))
    mask = np.ones((3, 3), bool)
    mask[1] = False
    got = sdpa(tmp_path, q, k, v, mask)
    assert np.all(got[0, 1] == 0) and np.isfinite(got).all()
    np.testing.assert_allclose(got, sdpa_reference(q, k, v, mask), atol=1e-5)


def test_sdpa_grouped_query_attention(tmp_path):
    r = rng(3)
    q = r.standard_normal((2, 4, 5, 8)).astype(np.float32)
    k, v = (r.standard_normal((2, 2, 6, 8)).astype(np.float32) for _ in range(2))
    got = sdpa(tmp_path, q, k, v, enable_gqa=True)
    want = sdpa_reference(q, np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1))
    np.testing.assert_allclose(got, want, atol=1e-5)
    with pytest.raises(kuiper.KuiperError, match="multiple of the key/value heads"):
        sdpa(tmp_path, q[:, :3], k, v, enable_gqa=True)


def test_sdpa_rejects_causal_with_a_mask_and_mismatched_shapes(tmp_path):
    q = np.zeros((2, 3, 4), np.float32)
    with pytest.raises(kuiper.KuiperError, match="is_causal"):
        sdpa(tmp_path, q, q, q, np.zeros((3, 3), np.float32), is_causal=True)
    with pytest.raises(kuiper.KuiperError, match="do not fit"):
        sdpa(tmp_path, q, np.zeros((2, 3, 5), np.float32), q)


# -- nn.MultiheadAttention ------------------------------------------------------------------------------


def mha_reference(query, key, value, w, heads, batch_first, attn_mask=None, padding_mask=None,
                  add_zero_attn=False, average=True):
    """PyTorch's documented MultiheadAttention in float64, one head and one batch element at a time."""
    f64 = lambda a: np.asarray(a, np.float64)
    query, key, value = f64(query), f64(key), f64(value)
    unbatched = query.ndim == 2
    if unbatched:
        query, key, value = query[:, None], key[:, None], value[:, None]
        padding_mask = None if padding_mask is None else padding_mask[None]
    elif batch_first:
        query, key, value = (np.swapaxes(t, 0, 1) for t in (query, key, value))
    e = w["out_proj.weight"].shape[0]
    d = e // heads
    if "in_proj_weight" in w:
        wq, wk, wv = np.split(f64(w["in_proj_weight"]), 3)
    else:
        wq, wk, wv = (f64(w[n]) for n in ("q_proj_weight", "k_proj_weight", "v_proj_weight"))
    bq, bk, bv = np.split(f64(w["in_proj_bias"]), 3) if "in_proj_bias" in w else (0.0, 0.0, 0.0)
    q, k, v = query @ wq.T + bq, key @ wk.T + bk, value @ wv.T + bv  # (T, N, E)
    n = q.shape[1]
    extra = []
    if "bias_k" in w:
        extra.append((np.broadcast_to(f64(w["bias_k"])[0], (1, n, e)), np.broadcast_to(f64(w["bias_v"])[0], (1, n, e))))
    if add_zero_attn:
        extra.append((np.zeros((1, n, e)), np.zeros((1, n, e))))
    for bk_, bv_ in extra:
        k, v = np.concatenate([k, bk_]), np.concatenate([v, bv_])
        if attn_mask is not None:
            attn_mask = np.concatenate([attn_mask, np.zeros(attn_mask.shape[:-1] + (1,), attn_mask.dtype)], -1)
        if padding_mask is not None:
            padding_mask = np.concatenate([padding_mask, np.zeros((n, 1), padding_mask.dtype)], -1)
    length, source = q.shape[0], k.shape[0]
    out = np.zeros((length, n, e))
    weights = np.zeros((n, heads, length, source))
    for b, h in itertools.product(range(n), range(heads)):
        cols = slice(h * d, (h + 1) * d)
        scores = q[:, b, cols] @ k[:, b, cols].T / np.sqrt(d)
        for mask in (attn_mask if attn_mask is None or attn_mask.ndim == 2 else attn_mask[b * heads + h],
                     None if padding_mask is None else padding_mask[b][None, :]):
            if mask is not None:
                scores = np.where(mask, -np.inf, scores) if mask.dtype == bool else scores + mask
        weights[b, h] = softmax64(scores)
        out[:, b, cols] = weights[b, h] @ v[:, b, cols]
    out = out @ f64(w["out_proj.weight"]).T + (f64(w["out_proj.bias"]) if "out_proj.bias" in w else 0.0)
    weights = weights.mean(axis=1) if average else weights
    if unbatched:
        return out[:, 0], weights[0]
    return (np.swapaxes(out, 0, 1) if batch_first else out), weights


def mha_weights(e, kdim=None, vdim=None, bias=True, bias_kv=False, seed=0):
    r = rng(seed)
    w = {}
    if kdim is None:
        w["in_proj_weight"] = r.standard_normal((3 * e, e)) * 0.3
    else:
        w["q_proj_weight"] = r.standard_normal((e, e)) * 0.3
        w["k_proj_weight"] = r.standard_normal((e, kdim)) * 0.3
        w["v_proj_weight"] = r.standard_normal((e, vdim)) * 0.3
    w["out_proj.weight"] = r.standard_normal((e, e)) * 0.3
    if bias:
        w["in_proj_bias"] = r.standard_normal(3 * e)
        w["out_proj.bias"] = r.standard_normal(e)
    if bias_kv:
        w["bias_k"] = r.standard_normal((1, 1, e))
        w["bias_v"] = r.standard_normal((1, 1, e))
    return {k: v.astype(np.float32) for k, v in w.items()}


def mha(tmp_path, arrays, keys, weights, heads, n_out=2, **params):
    e = weights["out_proj.weight"].shape[0]
    kdim = weights["k_proj_weight"].shape[1] if "k_proj_weight" in weights else e
    vdim = weights["v_proj_weight"].shape[1] if "v_proj_weight" in weights else e
    params = {"add_bias_kv": "bias_k" in weights, "add_zero_attn": False, "batch_first": False,
              "bias": "in_proj_bias" in weights, "embed_dim": e, "kdim": kdim, "num_heads": heads, "vdim": vdim,
              **params}
    outs, _ = one_op(tmp_path, "nn.MultiheadAttention", arrays, params, keys=keys, weights=weights, n_out=n_out)
    return outs


# average_attn_weights is a forward() argument pnnx never writes, so the generated known-param
# table (kuiper/formats/pnnx_param_names.py) does not list it; kuiper reads it when a file gives it.
@pytest.mark.filterwarnings("ignore::kuiper.errors.UnknownParamWarning")
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("average", [True, False])
def test_mha_self_attention_with_weights(tmp_path, batch_first, average):
    w = mha_weights(8)
    x = rng(1).standard_normal((2, 5, 8) if batch_first else (5, 2, 8)).astype(np.float32)
    out, weights = mha(tmp_path, [x], [None], w, heads=2, batch_first=batch_first, average_attn_weights=average)
    want_out, want_weights = mha_reference(x, x, x, w, 2, batch_first, average=average)
    np.testing.assert_allclose(out, want_out, atol=1e-5)
    np.testing.assert_allclose(weights, want_weights, atol=1e-6)


def test_mha_without_the_weights_output_and_unbatched(tmp_path):
    w = mha_weights(8, seed=1)
    x = rng(2).standard_normal((5, 8)).astype(np.float32)
    (out,) = mha(tmp_path, [x], [None], w, heads=4, n_out=1)
    np.testing.assert_allclose(out, mha_reference(x, x, x, w, 4, False)[0], atol=1e-5)


def test_mha_kdim_vdim_no_bias_bias_kv_zero_attn(tmp_path):
    w = mha_weights(8, kdim=6, vdim=3, bias=False, bias_kv=True, seed=2)
    r = rng(3)
    q, k, v = (r.standard_normal(s).astype(np.float32) for s in ((2, 4, 8), (2, 7, 6), (2, 7, 3)))
    out, weights = mha(tmp_path, [q, k, v], [None] * 3, w, heads=2, batch_first=True, add_zero_attn=True)
    want_out, want_weights = mha_reference(q, k, v, w, 2, True, add_zero_attn=True)
    assert weights.shape == (2, 4, 9)
    np.testing.assert_allclose(out, want_out, atol=1e-5)
    np.testing.assert_allclose(weights, want_weights, atol=1e-6)


def test_mha_query_and_one_key_value_tensor(tmp_path):
    w = mha_weights(8, seed=4)
    r = rng(4)
    q, kv = r.standard_normal((3, 2, 8)).astype(np.float32), r.standard_normal((6, 2, 8)).astype(np.float32)
    out, _ = mha(tmp_path, [q, kv], [None, None], w, heads=2)
    np.testing.assert_allclose(out, mha_reference(q, kv, kv, w, 2, False)[0], atol=1e-5)


MASKS = {
    "bool_2d": lambda r, n, h, l, s: r.random((l, s)) > 0.7,
    "float_2d": lambda r, n, h, l, s: r.standard_normal((l, s)).astype(np.float32),
    "bool_3d": lambda r, n, h, l, s: r.random((n * h, l, s)) > 0.7,
    "float_3d": lambda r, n, h, l, s: r.standard_normal((n * h, l, s)).astype(np.float32),
}


@pytest.mark.parametrize("kind", list(MASKS))
@pytest.mark.parametrize("zero_attn", [False, True])
def test_mha_attn_mask_and_key_padding_mask(tmp_path, kind, zero_attn):
    w = mha_weights(8, bias_kv=zero_attn, seed=5)
    r = rng(5)
    n, heads, length = 2, 2, 4
    x = r.standard_normal((n, length, 8)).astype(np.float32)
    attn_mask = MASKS[kind](r, n, heads, length, length)
    padding = r.random((n, length)) > 0.6
    padding[:, 0] = False  # every query keeps a key (a fully masked row is NaN in PyTorch too)
    if attn_mask.dtype == bool:
        attn_mask[..., 0] = False
    else:
        padding = np.where(padding, -np.inf, 0.0).astype(np.float32)  # float padding mask with a float attn_mask
    out, weights = mha(tmp_path, [x, attn_mask, padding], [None, "attn_mask", "key_padding_mask"], w, heads,
                       batch_first=True, add_zero_attn=zero_attn)
    want_out, want_weights = mha_reference(x, x, x, w, heads, True, attn_mask, padding, add_zero_attn=zero_attn)
    np.testing.assert_allclose(out, want_out, atol=1e-5)
    np.testing.assert_allclose(weights, want_weights, atol=1e-6)


HEAD_MASKS = {
    "none": lambda r, n, h, l, s: (None, None),
    "bool_2d": lambda r, n, h, l, s: (r.random((l, s)) > 0.7, None),
    "float_3d": lambda r, n, h, l, s: (r.standard_normal((n * h, l, s)).astype(np.float32), None),
    "padding": lambda r, n, h, l, s: (None, r.random((n, s)) > 0.6),
    "both": lambda r, n, h, l, s: (r.standard_normal((l, s)).astype(np.float32),
                                   np.where(r.random((n, s)) > 0.6, -np.inf, 0.0).astype(np.float32)),
}


@pytest.mark.parametrize("kind", list(HEAD_MASKS))
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("cross", [False, True], ids=["self", "cross"])
def test_mha_output_alone_with_every_mask(tmp_path, monkeypatch, kind, batch_first, cross):
    """Without the weights output, the compiled kernels run every head in one loop (when numba is on):
    the same output as the float64 reference, for self- and cross-attention and every mask."""
    from kuiper.numba_kernels import attention_native, available

    ran = []
    if available():  # else (no numba) the reference runs
        heads_kernel = attention_native.kernels.attend_heads
        monkeypatch.setattr(attention_native.kernels, "attend_heads", lambda *args: ran.append(True) or heads_kernel(*args))
    w = mha_weights(16, seed=11)
    r = rng(11)
    n, heads, length, source = 2, 4, 6, (5 if cross else 6)  # 6 query rows: a block of four and two more
    layout = (lambda t, b: (b, t, 16)) if batch_first else (lambda t, b: (t, b, 16))
    q = r.standard_normal(layout(length, n)).astype(np.float32)
    kv = r.standard_normal(layout(source, n)).astype(np.float32) if cross else q
    attn_mask, padding = HEAD_MASKS[kind](r, n, heads, length, source)
    if padding is not None:
        padding[:, 0] = 0 if padding.dtype != bool else False  # each query keeps a key
    arrays, keys = [q] + ([kv] if cross else []), [None] + ([None] if cross else [])
    for key, mask in (("attn_mask", attn_mask), ("key_padding_mask", padding)):
        if mask is not None:
            arrays.append(mask)
            keys.append(key)
    (out,) = mha(tmp_path, arrays, keys, w, heads, n_out=1, batch_first=batch_first)
    np.testing.assert_allclose(out, mha_reference(q, kv, kv, w, heads, batch_first, attn_mask, padding)[0],
                               rtol=1e-5, atol=1e-5)
    assert bool(ran) == available()


def test_mha_a_query_that_may_attend_to_nothing_is_nan_in_the_compiled_heads_too(tmp_path):
    """PyTorch's MultiheadAttention gives NaN for a fully masked row; so do the reference and the kernel."""
    w = mha_weights(8, seed=12)
    x = rng(12).standard_normal((1, 4, 8)).astype(np.float32)
    mask = np.zeros((4, 4), bool)
    mask[2] = True
    (out,) = mha(tmp_path, [x, mask], [None, "attn_mask"], w, 2, n_out=1, batch_first=True)
    with np.errstate(invalid="ignore"):
        want = mha_reference(x, x, x, w, 2, True, mask)[0]
    assert np.isnan(out[0, 2]).all() and not np.isnan(np.delete(out, 2, axis=1)).any()
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_mha_reads_pnnx_mask_first_order(tmp_path):
    """pnnx writes a mask computed in the graph before the query, with $attn_mask on the last position."""
    w = mha_weights(8, seed=6)
    r = rng(6)
    x = r.standard_normal((2, 4, 8)).astype(np.float32)
    mask = r.random((4, 4)) > 0.7
    mask[:, 0] = False
    # Inputs (mask, x); the keyword sits on the second operand, as pnnx writes it.
    out, _ = mha(tmp_path, [mask, x], [None, "attn_mask"], w, 2, batch_first=True)
    np.testing.assert_allclose(out, mha_reference(x, x, x, w, 2, True, mask)[0], atol=1e-5)


def test_mha_query_bound_to_input_as_pnnx_fusion_writes_it(tmp_path):
    """pnnx's fused MHA (torchvision Swin): ``$input=x $attn_mask=m`` with a 3-D float mask."""
    w = mha_weights(8, seed=7)
    r = rng(7)
    x = r.standard_normal((2, 4, 8)).astype(np.float32)
    mask = r.standard_normal((4, 4, 4)).astype(np.float32)
    out, _ = mha(tmp_path, [x, mask], ["input", "attn_mask"], w, 2, batch_first=True)
    np.testing.assert_allclose(out, mha_reference(x, x, x, w, 2, True, mask)[0], atol=1e-5)


def test_mha_errors_name_the_op_and_what_was_expected(tmp_path):
    w = mha_weights(8)
    x = np.zeros((2, 4, 8), np.float32)
    with pytest.raises(kuiper.KuiperError, match="unknown input keyword"):
        mha(tmp_path, [x, x], [None, "mask"], w, heads=2)
    with pytest.raises(kuiper.KuiperError, match="multiple of num_heads"):
        mha(tmp_path, [x], [None], w, heads=3)
    with pytest.raises(kuiper.KuiperError, match="attn_mask must be"):
        mha(tmp_path, [x, np.zeros((3, 3), bool)], [None, "attn_mask"], w, 2, batch_first=True)
    with pytest.raises(kuiper.KuiperError, match="do not fit query"):
        mha(tmp_path, [np.zeros((2, 4, 5), np.float32)], [None], w, 2)
    missing = {k: v for k, v in w.items() if k != "out_proj.weight"}
    with pytest.raises(kuiper.KuiperError, match="out_proj.weight"):
        one_op(tmp_path, "nn.MultiheadAttention", [x], {"embed_dim": 8, "num_heads": 2}, weights=missing)


# -- memory: one (L, S) score buffer, updated in place ----------------------------------------------


def peak_bytes_while(run):
    import tracemalloc

    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("with_mask", [False, True], ids=["plain", "float_mask"])
def test_sdpa_keeps_one_float32_score_buffer(tmp_path, with_mask):
    """Scale, mask and softmax work in the one (L, S) float32 score buffer: no float64, no copies of it."""
    length = 768
    r = rng(9)
    q, k, v = (r.standard_normal((1, length, 4)).astype(np.float32) for _ in range(3))
    mask = r.standard_normal((length, length)).astype(np.float32) if with_mask else None
    arrays, keys = [q, k, v] + ([mask] if with_mask else []), ["query", "key", "value"] + (["attn_mask"] * with_mask)
    _, model = one_op(tmp_path, "F.scaled_dot_product_attention", arrays, {"is_causal": False}, keys=keys)
    scores_bytes = length * length * 4
    peak = peak_bytes_while(lambda: model(*arrays))
    assert peak < 1.5 * scores_bytes, f"peak {peak / scores_bytes:.2f}x the score buffer"


def test_mha_keeps_one_float32_score_buffer(tmp_path):
    length = 640
    w = mha_weights(8, seed=10)
    x = rng(10).standard_normal((1, length, 8)).astype(np.float32)
    _, model = one_op(tmp_path, "nn.MultiheadAttention", [x], {"batch_first": True, "embed_dim": 8, "num_heads": 1},
                      weights=w)
    scores_bytes = length * length * 4
    peak = peak_bytes_while(lambda: model(x))
    assert peak < 1.5 * scores_bytes, f"peak {peak / scores_bytes:.2f}x the score buffer"
