"""A gated linear unit (Linear -> torch.chunk(2, dim=-1) -> f(a) * b, as SwiGLU and GeGLU MLPs write it):
when the fusion pass merges it into the Linear, and that the oneDNN products with post-ops, the
compiled math after the product and NumPy's reference all compute what float64 NumPy does."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kuiper
from kuiper import onednn
from kuiper.errors import ShapeError
from kuiper.model_ir import RemadeWeight
from kuiper.onednn.primitives import PRODUCT_WORK

from conftest import memory_freed_ref, param_text, write_model

pytest.importorskip("numba")
pytestmark = pytest.mark.skipif(not onednn.available(), reason=onednn.describe())

RNG = np.random.default_rng(11)
IN, OUT = 96, 192  # 2 x 40 rows of these: 1.5 M multiply-adds, enough for oneDNN (PRODUCT_WORK)
HALF = OUT // 2
WEIGHT = (RNG.standard_normal((OUT, IN)) / math.sqrt(IN)).astype(np.float32)
BIAS = RNG.standard_normal(OUT).astype(np.float32)
WEIGHTS = {"fc.weight": WEIGHT.tobytes(), "fc.bias": BIAS.tobytes()}
TOLERANCE = 1e-5
LINEAR = f"nn.Linear fc 1 1 x y bias=True in_features={IN} out_features={OUT} @weight=({OUT},{IN})f32 @bias=({OUT})f32"


def _halves(x):
    y = x.astype(np.float64) @ WEIGHT.T.astype(np.float64) + BIAS
    return y[..., :HALF], y[..., HALF:]


def _silu(v):
    return v / (1 + np.exp(-v))


def _gelu(v):
    return 0.5 * v * (1 + np.vectorize(math.erf)(v / math.sqrt(2)))


def _sigmoid(v):
    return 1 / (1 + np.exp(-v))


def _model(tmp_path, gate_lines: str, outputs: str = "out", chunk: str = "chunks=2 dim=-1", **options):
    body = f"""
pnnx.Input in0 0 1 x
{LINEAR}
torch.chunk chunk 1 2 y a b {chunk}
{gate_lines}
pnnx.Output output {len(outputs.split())} 0 {outputs}
"""
    return kuiper.load(write_model(tmp_path, param_text(body), WEIGHTS), **options)


def _close(actual, expected):
    assert actual.dtype == np.float32 and actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=0, atol=TOLERANCE * max(1.0, np.abs(expected).max()))


SWIGLU = "nn.SiLU act 1 1 a g\npnnx.Expression mul 2 1 g b out expr=mul(@0,@1)"
GEGLU_REVERSED = "nn.GELU act 1 1 a g\npnnx.Expression mul 2 1 b g out expr=mul(@0,@1)"
SIGMOID_OF_SECOND = "F.sigmoid act 1 1 b g\npnnx.Expression mul 2 1 a g out expr=mul(@0,@1)"
TANH_GATE = "F.tanh act 1 1 a g\npnnx.Expression mul 2 1 g b out expr=mul(@0,@1)"


@pytest.mark.parametrize("lines, members, expected", [
    (SWIGLU, ["chunk", "act", "mul"], lambda a, b: _silu(a) * b),
    (GEGLU_REVERSED, ["chunk", "act", "mul"], lambda a, b: b * _gelu(a)),
    (SIGMOID_OF_SECOND, ["chunk", "act", "mul"], lambda a, b: a * _sigmoid(b)),
])
@pytest.mark.parametrize("threads", [1, 2])
def test_a_gated_unit_becomes_two_products_with_post_ops(tmp_path, lines, members, expected, threads):
    model = _model(tmp_path, lines, threads=threads)
    (step,) = model.steps  # the chunk and the elementwise ops are merged into the Linear
    assert step.node.params["epilogue_halves"] and step.node.params["epilogue_members"] == members
    assert step.op.gate is not None and not step.op.epilogue_after
    x = RNG.standard_normal((2, 40, IN)).astype(np.float32)
    assert 2 * 40 * IN * OUT >= PRODUCT_WORK
    out = model(x)
    _close(out, expected(*_halves(x)))
    assert out.flags.c_contiguous


@pytest.mark.parametrize("lines, expected", [
    (TANH_GATE, lambda a, b: np.tanh(a) * b),  # oneDNN has no tanh post-op here
    ("nn.SiLU act 1 1 a g\nnn.SiLU act2 1 1 b h\npnnx.Expression mul 2 1 g h out expr=mul(@0,@1)",
     lambda a, b: _silu(a) * _silu(b)),  # both halves through an activation: one fused op, but no gate
])
def test_other_math_of_the_halves_runs_after_the_whole_product(tmp_path, lines, expected):
    model = _model(tmp_path, lines)
    (step,) = model.steps
    assert step.node.params["epilogue_halves"] and step.op.gate is None and step.op.epilogue_after
    x = RNG.standard_normal((2, 40, IN)).astype(np.float32)
    _close(model(x), expected(*_halves(x)))


@pytest.mark.parametrize("rows", [1, 3])
def test_a_product_too_small_for_onednn_takes_the_reference_with_the_same_math(tmp_path, rows):
    model = _model(tmp_path, SWIGLU)
    assert rows * IN * OUT < PRODUCT_WORK
    x = RNG.standard_normal((rows, IN)).astype(np.float32)
    a, b = _halves(x)
    _close(model(x), _silu(a) * b)


@pytest.mark.parametrize("outputs, chunk", [
    ("out a", "chunks=2 dim=-1"),  # a half is also a model output
    ("out", "chunks=2 dim=1"),  # not the last dim as the file says it
])
def test_other_graphs_keep_the_chunk_and_compute_the_same(tmp_path, outputs, chunk):
    model = _model(tmp_path, SWIGLU, outputs=outputs, chunk=chunk)
    assert "Chunk" in [step.node.type for step in model.steps]
    x = RNG.standard_normal((40, IN)).astype(np.float32)
    a, b = _halves(x)
    result = model(x)
    _close(result[0] if isinstance(result, (list, tuple)) else result, _silu(a) * b)


def test_an_odd_width_cannot_be_halved(tmp_path):
    odd = (RNG.standard_normal((OUT - 1, IN))).astype(np.float32)
    body = f"""
pnnx.Input in0 0 1 x
nn.Linear fc 1 1 x y bias=False in_features={IN} out_features={OUT - 1} @weight=({OUT - 1},{IN})f32
torch.chunk chunk 1 2 y a b chunks=2 dim=-1
{SWIGLU}
pnnx.Output output 1 0 out
"""
    model = kuiper.load(write_model(tmp_path, param_text(body), {"fc.weight": odd.tobytes()}))
    with pytest.raises(ShapeError, match="halves"):
        model(RNG.standard_normal((40, IN)).astype(np.float32))


@pytest.mark.parametrize("lines, expected", [
    (SWIGLU, lambda a, b: _silu(a) * b),  # the gate is the first half of the rows
    (SIGMOID_OF_SECOND, lambda a, b: a * _sigmoid(b)),  # the second
])
def test_the_halves_free_the_given_weight_and_one_row_reads_it_remade_in_row_order(tmp_path, lines, expected):
    """Both products hold their half in oneDNN's packed layout only; a product of one row (NumPy's BLAS)
    reads the weight remade from the two halves, in the rows' order (kuiper/graph/kept_weights.py)."""
    model = _model(tmp_path, lines)
    (step,) = model.steps
    remade = step.node.attrs["weight"]
    assert isinstance(remade, RemadeWeight)
    freed = memory_freed_ref(np.asarray(remade))
    x = RNG.standard_normal((2, 40, IN)).astype(np.float32)
    _close(model(x), expected(*_halves(x)))
    assert freed() is None, "the given weight is still held after both halves were packed"
    np.testing.assert_array_equal(np.asarray(remade), WEIGHT)
    row = RNG.standard_normal((1, 1, IN)).astype(np.float32)
    _close(model(row), expected(*_halves(row)))
