"""nn.MultiheadAttention's specialized forward (attention without masks, small enough for the compiled heads):
after a model's first call its step runs the projections, their tameness checks and the heads directly.  It must give
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
CROSS_MODEL = MHA_MODEL.replace("3 2\n", "4 3\n").replace("pnnx.Input x 0 1 x\n", "pnnx.Input x 0 1 x\npnnx.Input m 0 1 m\n") \
    .replace("mha 1 1 x y", "mha 2 1 x m y")
MEMORY = 5  # the cross-attention's memory tokens
WEIGHTS = {"mha.in_proj_weight": (RNG.standard_normal((3 * E, E)) / math.sqrt(E)).astype(np.float32),
           "mha.in_proj_bias": RNG.standard_normal(3 * E).astype(np.float32),
           "mha.out_proj.weight": (RNG.standard_normal((E, E)) / math.sqrt(E)).astype(np.float32),
           "mha.out_proj.bias": RNG.standard_normal(E).astype(np.float32)}


def _model(tmp_path, batch_first: bool, cross: bool = False):
    path = write_model(tmp_path, (CROSS_MODEL if cross else MHA_MODEL).format(batch_first=batch_first),
                       {name: value.tobytes() for name, value in WEIGHTS.items()})
    return kuiper.load(path, threads=1)


def float64_attention(x, memory):
    """nn.MultiheadAttention of batch-first x (N, L, E) over memory (N, S, E), written out in float64."""
    in_weight, in_bias, out_weight, out_bias = (w.astype(np.float64) for w in WEIGHTS.values())
    q = (x.astype(np.float64) @ in_weight.T + in_bias)[..., :E]
    _, k, v = np.split(memory.astype(np.float64) @ in_weight.T + in_bias, 3, axis=-1)
    heads = [np.swapaxes(np.reshape(t, t.shape[:2] + (HEADS, E // HEADS)), 1, 2) for t in (q, k, v)]
    scores = heads[0] @ np.swapaxes(heads[1], -1, -2) / math.sqrt(E // HEADS)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    merged = np.reshape(np.swapaxes(weights @ heads[2], 1, 2), x.shape)
    return merged @ out_weight.T + out_bias


def _batch_first(x, batch_first: bool):
    return x if batch_first else np.ascontiguousarray(np.swapaxes(x, 0, 1))


def _inputs(batch_first: bool, cross: bool, length: int = LENGTH):
    x = RNG.standard_normal((2, length, E)).astype(np.float32)
    memory = RNG.standard_normal((2, MEMORY, E)).astype(np.float32) if cross else x
    return x, memory, ([_batch_first(x, batch_first)] + ([_batch_first(memory, batch_first)] if cross else []))


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("cross", [False, True], ids=["self", "cross"])
def test_the_specialized_step_gives_what_forward_gives(tmp_path, batch_first, cross):
    model = _model(tmp_path, batch_first, cross)
    op = model.steps[0].op
    x, memory, feeds = _inputs(batch_first, cross)
    first = model(*feeds)
    assert model.plan.specialized_count() == 1  # the step now runs the specialized forward
    got = model(*feeds)
    np.testing.assert_array_equal(got, first)
    np.testing.assert_array_equal(got, op.forward(*feeds))
    np.testing.assert_allclose(_batch_first(got, batch_first), float64_attention(x, memory), rtol=0, atol=2e-5)


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("cross", [False, True], ids=["self", "cross"])
@pytest.mark.parametrize("case", ["nan", "inf", "squares overflow", "another length"])
def test_inputs_unlike_the_first_call_get_what_forward_gives(tmp_path, batch_first, cross, case):
    model = _model(tmp_path, batch_first, cross)
    op = model.steps[0].op
    x, memory, feeds = _inputs(batch_first, cross)
    model(*feeds)  # specializes
    other = memory.copy()  # the keys and values: the query's tokens in self-attention
    if case == "nan":
        other[1, 3, 5] = np.nan
    elif case == "inf":
        other[0, 2, 7] = np.inf
    elif case == "squares overflow":
        other *= np.float32(1e18)  # finite, but the projection's sum of squares is past float32's range
    else:
        other = RNG.standard_normal((2, MEMORY + 3 if cross else LENGTH + 3, E)).astype(np.float32)
    arranged = [_batch_first(x, batch_first), _batch_first(other, batch_first)] if cross else \
        [_batch_first(other, batch_first)]
    got = model(*arranged)
    want = op.forward(*arranged)
    np.testing.assert_array_equal(got, want)  # NaN where forward has NaN, the same bits elsewhere
    if case == "nan":
        assert np.isnan(got).any() and not np.isnan(got).all()  # only batch 1 sees the NaN token
