"""The fusion pass's conv epilogues: which convs take their reader's math, and that results do not change.

A conv whose only reader is elementwise becomes one node with that math as its epilogue
(kuiper/graph/fusion.py), run by the compiled conv kernels on each output plane.  The
numbers must be those of the separate ops: against a float64 NumPy reference, against
``fuse=False``, and with the compiled kernels switched off (``KUIPER_NUMBA=0``).
"""

from __future__ import annotations

import numpy as np
import pytest

import kuiper
from kuiper import plugins

from conftest import MODELS, param_text, reference_batches, write_model

pytest.importorskip("numba")
from kuiper.numba_kernels import runtime  # noqa: E402  (needs numba)

RNG = np.random.default_rng(0)
W1 = (RNG.standard_normal((8, 4, 3, 3)) / 6).astype(np.float32)
B1 = RNG.standard_normal(8).astype(np.float32)
W2 = (RNG.standard_normal((8, 8, 1, 1)) / 3).astype(np.float32)
SLOPE = np.float32([0.25])

# conv1 -> SiLU -> conv2 (1x1) -> add(conv2, SiLU's output) -> ReLU: conv1 takes the SiLU, conv2 the add + ReLU.
BLOCK = """
pnnx.Input in0 0 1 x #x=(1,4,20,20)f32
nn.Conv2d c1 1 1 x a bias=True kernel_size=(3,3) in_channels=4 out_channels=8 padding=(1,1) @weight=(8,4,3,3)f32 @bias=(8)f32
nn.SiLU s 1 1 a b
nn.Conv2d c2 1 1 b c bias=False kernel_size=(1,1) in_channels=8 out_channels=8 @weight=(8,8,1,1)f32
pnnx.Expression add 2 1 c b d expr=add(@0,@1)
nn.ReLU r 1 1 d e
pnnx.Output out 1 0 e
"""
WEIGHTS = {"c1.weight": W1.tobytes(), "c1.bias": B1.tobytes(), "c2.weight": W2.tobytes()}


def _load(tmp_path, body, weights=WEIGHTS, **options):
    return kuiper.load(write_model(tmp_path, param_text(body), weights), **options)


def _float64_conv(x, weight, bias=None, pad=0):
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    kh, kw = weight.shape[2:]
    height, width = x.shape[2] - kh + 1, x.shape[3] - kw + 1
    out = np.zeros((x.shape[0], weight.shape[0], height, width))
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("oc,nchw->nohw", weight[:, :, i, j].astype(np.float64), x[:, :, i:i + height, j:j + width])
    return out if bias is None else out + bias.astype(np.float64)[None, :, None, None]


@pytest.fixture
def numba_off(monkeypatch):
    """Build models with the compiled kernels switched off, as KUIPER_NUMBA=0 does."""
    def switch_off():
        monkeypatch.setenv(runtime.DISABLE_ENV, "0")
        runtime.availability.cache_clear()
        plugins.reset_registries()

    yield switch_off
    monkeypatch.delenv(runtime.DISABLE_ENV, raising=False)
    runtime.availability.cache_clear()
    plugins.reset_registries()


def test_each_conv_takes_the_elementwise_math_after_it(tmp_path):
    model = _load(tmp_path, BLOCK, providers=False)  # the steps as the passes leave them, no partitions
    assert [(step.node.name, step.node.type) for step in model.steps] == [("c1", "Conv2d"), ("c2", "Conv2d")]
    assert model.steps[0].node.params["epilogue_members"] == ["s"]
    assert sorted(model.steps[1].node.params["epilogue_members"]) == ["add", "r"]
    assert model.steps[1].node.inputs == ["b", "b"]  # its own input, then the residual
    x = RNG.standard_normal((1, 4, 20, 20)).astype(np.float32)
    silu = _float64_conv(x, W1, B1, pad=1)
    silu = silu / (1 + np.exp(-silu))
    expected = np.maximum(_float64_conv(silu, W2) + silu, 0)
    assert np.max(np.abs(model(x) - expected)) <= 1e-5


def test_fused_unfused_and_numba_off_give_the_same_numbers(tmp_path, numba_off, conv_engine):
    x = RNG.standard_normal((1, 4, 20, 20)).astype(np.float32)
    fused = _load(tmp_path, BLOCK)(x)
    unfused = _load(tmp_path, BLOCK, fuse=False)(x)
    if conv_engine == "compiled":  # the kernels run the elementwise op's own program: equal bits
        np.testing.assert_array_equal(fused, unfused)
    else:  # oneDNN's post-ops are its own float32 math: a few float32 ulps apart (outputs reach ~3)
        np.testing.assert_allclose(fused, unfused, atol=1e-6, rtol=2e-6)
    numba_off()
    off = _load(tmp_path, BLOCK)
    assert len(off.steps) == 4  # c1, s, c2, add + r: no kernel takes an epilogue
    np.testing.assert_allclose(off(x), fused, atol=1e-6, rtol=2e-6)  # float32 rounding, outputs up to ~3


def test_a_conv_output_read_twice_or_returned_keeps_its_own_node(tmp_path):
    read_twice = BLOCK.replace("pnnx.Output out 1 0 e",
                               "nn.MaxPool2d m 1 1 c f kernel_size=(2,2) stride=(2,2)\npnnx.Output out 2 0 e f")
    model = _load(tmp_path, read_twice)
    c2 = next(step for step in model.steps if step.node.name == "c2")
    assert "epilogue" not in c2.node.params and c2.node.outputs == ["c"]  # read by the add and by m
    returned = BLOCK.replace("pnnx.Output out 1 0 e", "pnnx.Output out 2 0 e a")
    model = _load(tmp_path, returned)
    c1 = next(step for step in model.steps if step.node.name == "c1")
    assert "epilogue" not in c1.node.params and c1.node.outputs == ["a"]


def test_the_summary_counts_the_weights_of_an_epilogue(tmp_path):
    body = """
    pnnx.Input in0 0 1 x #x=(1,4,8,8)f32
    nn.Conv2d c1 1 1 x a bias=True kernel_size=(3,3) in_channels=4 out_channels=8 padding=(1,1) @weight=(8,4,3,3)f32 @bias=(8)f32
    nn.PReLU p 1 1 a b num_parameters=1 @weight=(1)f32
    pnnx.Output out 1 0 b
    """
    weights = {"c1.weight": W1.tobytes(), "c1.bias": B1.tobytes(), "p.weight": SLOPE.tobytes()}
    model = _load(tmp_path, body, weights)
    assert len(model.steps) == 1 and model.steps[0].node.params["epilogue_members"] == ["p"]
    assert model.summary().total_parameters == model.parameter_count == W1.size + B1.size + 1
    x = RNG.standard_normal((1, 4, 8, 8)).astype(np.float32)
    conv = _float64_conv(x, W1, B1, pad=1)
    assert np.max(np.abs(model(x) - np.where(conv > 0, conv, 0.25 * conv))) <= 1e-5


@pytest.mark.parametrize("name", ["yolov5_style", "mobilenet_v2", "resnet18_w8"])
def test_fixture_models_with_epilogues_match_unfused_numba_off_and_torch(name, numba_off):
    param = MODELS / name / "model.pnnx.param"
    batch = reference_batches(name)["b3"]
    x, expected = batch["inputs"][0], batch["outputs"][0]
    fused = kuiper.load(param)
    assert any("epilogue" in step.node.params for step in kuiper.load(param, providers=False).steps)
    got = fused(x)
    tolerance = 1e-4 * max(1.0, float(np.max(np.abs(expected))))
    assert np.max(np.abs(got - expected)) <= tolerance  # PyTorch's saved outputs
    np.testing.assert_allclose(got, kuiper.load(param, fuse=False)(x), atol=tolerance, rtol=0)
    numba_off()
    off = kuiper.load(param)
    assert not any("epilogue" in step.node.params for step in off.steps)
    np.testing.assert_allclose(got, off(x), atol=tolerance, rtol=0)
