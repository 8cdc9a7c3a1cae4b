"""nn.MultiheadAttention's specialized forward (self-attention small enough for the compiled heads): after a
model's first call its step runs the projections, one tameness check and the heads directly.  It must give
bit for bit what the op's own forward gives, for inputs like the first call's and for any others: NaN and
infinities, values whose squares overflow float32, another shape."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kuiper
from kuiper import onednn

from conftest import write_model

pytest.importorskip("numba")
pytestmark = pytest.mark.skipif(not onednn.available(), reason=onednn.describe())

RNG = np.random.default_rng(23)
E, HEADS, LENGTH = 32, 4, 8
MHA_MODEL = f"""7767517
3 2
pnnx.Input x 0 1 x
nn.MultiheadAttention mha 1 1 x y add_bias_kv=False add_zero_attn=False batch_first={{batch_first}} bias=True embed_dim={E} kdim={E} num_heads={HEADS} vdim={E} @in_proj_bias=({3 * E})f32 @in_proj_weight=({3 * E},{E})f32 @out_proj.bias=({E})f32 @out_proj.weight=({E},{E})f32
pnnx.Output out 1 0 y
"""
WEIGHTS = {"mha.in_proj_weight": (RNG.standard_normal((3 * E, E)) / math.sqrt(E)).astype(np.float32),
           "mha.in_proj_bias": RNG.standard_normal(3 * E).astype(np.float32),
           "mha.out_proj.weight": (RNG.standard_normal((E, E)) / math.sqrt(E)).astype(np.float32),
           "mha.out_proj.bias": RNG.standard_normal(E).astype(np.float32)}


def _model(tmp_path, batch_first: bool):
    path = write_model(tmp_path, MHA_MODEL.format(batch_first=batch_first),
                       {name: value.tobytes() for name, value in WEIGHTS.items()})
    return kuiper.load(path, threads=1)


def float64_self_attention(x):
    """nn.MultiheadAttention over batch-first x (N, L, E), written out in float64."""
    in_weight, in_bias, out_weight, out_bias = (w.astype(np.float64) for w in WEIGHTS.values())
    q, k, v = np.split(x.astype(np.float64) @ in_weight.T + in_bias, 3, axis=-1)
    heads = [np.swapaxes(np.reshape(t, t.shape[:2] + (HEADS, E // HEADS)), 1, 2) for t in (q, k, v)]
    scores = heads[0] @ np.swapaxes(heads[1], -1, -2) / math.sqrt(E // HEADS)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    merged = np.reshape(np.swapaxes(weights @ heads[2], 1, 2), x.shape)
    return merged @ out_weight.T + out_bias


def _batch_first(x, batch_first: bool):
    return x if batch_first else np.ascontiguousarray(np.swapaxes(x, 0, 1))


@pytest.mark.parametrize("batch_first", [True, False])
def test_the_specialized_step_gives_what_forward_gives(tmp_path, batch_first):
    model = _model(tmp_path, batch_first)
    op = model.steps[0].op
    x = RNG.standard_normal((2, LENGTH, E)).astype(np.float32)
    first = model(_batch_first(x, batch_first))
    assert model.plan.specialized_count() == 1  # the step now runs the specialized forward
    got = model(_batch_first(x, batch_first))
    np.testing.assert_array_equal(got, first)
    np.testing.assert_array_equal(got, op.forward(_batch_first(x, batch_first)))
    np.testing.assert_allclose(_batch_first(got, batch_first), float64_self_attention(x), rtol=0, atol=2e-5)


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("case", ["nan", "inf", "squares overflow", "another length"])
def test_inputs_unlike_the_first_call_get_what_forward_gives(tmp_path, batch_first, case):
    model = _model(tmp_path, batch_first)
    op = model.steps[0].op
    x = RNG.standard_normal((2, LENGTH, E)).astype(np.float32)
    model(_batch_first(x, batch_first))  # specializes
    other = x.copy()
    if case == "nan":
        other[1, 3, 5] = np.nan
    elif case == "inf":
        other[0, 2, 7] = np.inf
    elif case == "squares overflow":
        other *= np.float32(1e18)  # finite, but the projection's sum of squares is past float32's range
    else:
        other = RNG.standard_normal((2, LENGTH + 3, E)).astype(np.float32)
    arranged = _batch_first(other, batch_first)
    got = model(arranged)
    want = op.forward(arranged)
    np.testing.assert_array_equal(got, want)  # NaN where forward has NaN, the same bits elsewhere
    if case == "nan":
        assert np.isnan(got).any() and not np.isnan(got).all()  # only batch 1 sees the NaN token
