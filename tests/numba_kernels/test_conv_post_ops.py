"""Conv epilogues as oneDNN post-ops (kuiper/numba_kernels/conv_post_ops.py, conv_native.py), and the layouts between convs.

The mapping is checked on the IR alone (no oneDNN needed): each recognised form gives the
steps that compute it, and look-alikes that compute something else give None.  Models
then run with oneDNN against a float64 reference, with blocked tensors between convs.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

import kuiper
from kuiper import onednn
from kuiper.ir import composites, make
from kuiper.numba_kernels.conv_post_ops import post_ops_for
from kuiper.onednn import conv as onednn_conv
from kuiper.ops.elementwise import ElementwiseMath

from conftest import write_model

RELU = ("eltwise_relu", 0.0, 0.0)
SWISH = ("eltwise_swish", 1.0, 0.0)


def _add(a, b):
    return make.arith("add", a, b)


MAPPED = {
    # name: (math, position of the conv's result, expected post-op steps)
    "relu": (ElementwiseMath(composites.relu, 1), 0, (RELU,)),
    "relu6": (ElementwiseMath(lambda x: composites.clamp(x, 0.0, 6.0), 1), 0, (("eltwise_clip", 0.0, 6.0),)),
    "hardtanh": (ElementwiseMath(lambda x: composites.clamp(x, -1.0, 1.0), 1), 0, (("eltwise_clip", -1.0, 1.0),)),
    "silu": (ElementwiseMath(composites.silu, 1), 0, (SWISH,)),
    "x * sigmoid(x)": (ElementwiseMath(lambda x: make.arith("mul", x, composites.sigmoid(x)), 1), 0, (SWISH,)),
    "sigmoid": (ElementwiseMath(composites.sigmoid, 1), 0, (("eltwise_logistic", 0.0, 0.0),)),
    "hardswish": (ElementwiseMath(composites.hardswish, 1), 0, (("eltwise_hardswish", 1 / 6, 0.5),)),
    "gelu": (ElementwiseMath(composites.gelu, 1), 0, (("eltwise_gelu_erf", 0.0, 0.0),)),
    "c + r": (ElementwiseMath(_add, 2), 0, (("sum",),)),
    "r + c": (ElementwiseMath(_add, 2), 1, (("sum",),)),
    "relu(r + c)": (ElementwiseMath(lambda r, c: composites.relu(_add(r, c)), 2), 1, (("sum",), RELU)),
    "r + silu(c)": (ElementwiseMath(lambda c, r: _add(r, composites.silu(c)), 2), 0, (SWISH, ("sum",))),
    "relu(relu(c) + r)": (ElementwiseMath(lambda c, r: composites.relu(_add(composites.relu(c), r)), 2), 0,
                          (RELU, ("sum",), RELU)),
    "silu(r + sigmoid(c))": (ElementwiseMath(lambda r, c: composites.silu(_add(r, composites.sigmoid(c))), 2), 1,
                             (("eltwise_logistic", 0.0, 0.0), ("sum",), SWISH)),
}

NOT_MAPPED = {
    "c * c": (ElementwiseMath(lambda c: make.arith("mul", c, c), 1), 0),
    "c * r": (ElementwiseMath(lambda c, r: make.arith("mul", c, r), 2), 0),
    # silu's shape over c + r, but with c outside the sum too: not f(c + r) for any f
    "(c + r) / (exp(-c) + 1)": (ElementwiseMath(lambda c, r: make.arith(
        "div", _add(c, r), _add(make.call("exp", make.neg(c)), 1.0)), 2), 0),
    "relu(c) + relu(r)": (ElementwiseMath(lambda c, r: _add(composites.relu(c), composites.relu(r)), 2), 0),
    "relu(relu(c) + r) + c": (ElementwiseMath(lambda c, r: _add(composites.relu(_add(composites.relu(c), r)), c), 2), 0),
    "relu(c + r) + r": (ElementwiseMath(lambda c, r: _add(composites.relu(_add(c, r)), r), 2), 0),
    "leaky relu": (ElementwiseMath(lambda c: composites.leaky_relu(c, 0.1), 1), 0),
    "three inputs": (ElementwiseMath(lambda c, a, b: _add(_add(c, a), b), 3), 0),
}


@pytest.mark.parametrize("name", MAPPED)
def test_recognised_epilogues_become_post_ops(name):
    math, operand, steps = MAPPED[name]
    assert post_ops_for(math, operand) == steps


@pytest.mark.parametrize("name", NOT_MAPPED)
def test_other_math_is_not_taken_for_a_post_op(name):
    math, operand = NOT_MAPPED[name]
    assert post_ops_for(math, operand) is None


def test_no_epilogue_needs_no_post_ops():
    assert post_ops_for(None, 0) == ()


# conv1 (3x3) -> relu -> conv2 (1x1) -> add(conv2, conv1's relu) -> relu -> conv3 (3x3) -> output
CHAIN = """7767517
9 8
pnnx.Input in0 0 1 x
nn.Conv2d c1 1 1 x a bias=True kernel_size=(3,3) in_channels=8 out_channels=16 padding=(1,1) @weight=(16,8,3,3)f32 @bias=(16)f32
nn.ReLU r1 1 1 a b
nn.Conv2d c2 1 1 b c bias=False kernel_size=(1,1) in_channels=16 out_channels=16 @weight=(16,16,1,1)f32
pnnx.Expression add 2 1 c b d expr=add(@0,@1)
nn.ReLU r2 1 1 d e
nn.Conv2d c3 1 1 e f bias=False kernel_size=(3,3) in_channels=16 out_channels=8 padding=(1,1) stride=(2,2) @weight=(8,16,3,3)f32
nn.MaxPool2d p 1 1 f g kernel_size=(2,2) stride=(2,2)
pnnx.Output out 1 0 g
"""
RNG = np.random.default_rng(1)
W1 = (RNG.standard_normal((16, 8, 3, 3)) / 8).astype(np.float32)
B1 = RNG.standard_normal(16).astype(np.float32)
W2 = (RNG.standard_normal((16, 16, 1, 1)) / 4).astype(np.float32)
W3 = (RNG.standard_normal((8, 16, 3, 3)) / 12).astype(np.float32)


def _float64_conv(x, weight, pad=0, stride=1):
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    kh, kw = weight.shape[2:]
    height, width = (x.shape[2] - kh) // stride + 1, (x.shape[3] - kw) // stride + 1
    out = np.zeros((x.shape[0], weight.shape[0], height, width))
    for i in range(kh):
        for j in range(kw):
            window = x[:, :, i:i + stride * (height - 1) + 1:stride, j:j + stride * (width - 1) + 1:stride]
            out += np.einsum("oc,nchw->nohw", weight[:, :, i, j].astype(np.float64), window)
    return out


def _chain_reference(x):
    b = np.maximum(_float64_conv(x.astype(np.float64), W1, pad=1) + B1[None, :, None, None], 0)
    e = np.maximum(_float64_conv(b, W2) + b, 0)
    f = _float64_conv(e, W3, pad=1, stride=2)
    n, c, h, w = f.shape
    return f[:, :, :h // 2 * 2, :w // 2 * 2].reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))


@pytest.fixture
def chain(tmp_path):
    weights = {"c1.weight": W1.tobytes(), "c1.bias": B1.tobytes(), "c2.weight": W2.tobytes(), "c3.weight": W3.tobytes()}
    return write_model(tmp_path, CHAIN, weights)


@pytest.mark.skipif(not onednn.available(), reason=onednn.describe())
@pytest.mark.parametrize("threads", [1, 2])
def test_convs_pass_blocked_tensors_to_oneDNN_readers_and_the_model_gives_plain_arrays(chain, threads):
    model = kuiper.load(chain, threads=threads, providers=False)  # op by op; conv_sequence.py runs them as one
    convs = {step.node.name: step.op for step in model.steps if step.node.type == "Conv2d"}
    assert [step.node.name for step in model.steps] == ["c1", "c2", "c3", "p"]  # relus and the add fused
    assert sorted(convs["c2"].node.params["epilogue_members"]) == ["add", "r2"]
    # c1's output feeds c2 twice (input and residual): blocked; c2's feeds c3: blocked; c3's feeds
    # the max pool, which pools on oneDNN (pool_native.py): blocked; the pool's is the model's: plain.
    assert [convs[name].output_layout for name in ("c1", "c2", "c3")] == ["onednn", "onednn", "onednn"]
    assert model.steps[-1].op.output_layout is None
    seen = {}

    class Observer:
        def before_step(self, node, inputs):
            seen[node.name] = inputs

        def after_step(self, node, inputs, outputs):
            pass

    x = RNG.standard_normal((2, 8, 14, 12)).astype(np.float32)
    got = model(x, observer=Observer())
    assert isinstance(got, np.ndarray)
    assert np.max(np.abs(got - _chain_reference(x))) <= 2e-5
    assert isinstance(seen["c3"][0], onednn.Blocked) and isinstance(seen["p"][0], onednn.Blocked)
    # What an observer meets converts itself to plain data.
    c2_input = np.asarray(seen["c2"][0])
    assert c2_input.shape == (2, 16, 14, 12)
    np.testing.assert_allclose(c2_input, np.maximum(_float64_conv(x.astype(np.float64), W1, pad=1)
                                                    + B1[None, :, None, None], 0), atol=2e-5)


@pytest.mark.skipif(not onednn.available(), reason=onednn.describe())
def test_a_shape_onednn_refuses_takes_the_compiled_paths_even_from_a_blocked_input(chain, monkeypatch):
    model = kuiper.load(chain, providers=False)
    c3 = next(step.op for step in model.steps if step.node.name == "c3")

    def refuse(shape, threads, plain_io):
        raise onednn.OneDnnError("oneDNN convolution: unimplemented")

    monkeypatch.setattr(c3.native, "_make_plan", refuse)
    x = RNG.standard_normal((1, 8, 10, 10)).astype(np.float32)
    assert np.max(np.abs(model(x) - _chain_reference(x))) <= 2e-5
    assert list(c3.native.plans.refused) == [(1, 16, 10, 10)]  # asked once, remembered


def test_without_onednn_the_model_runs_on_the_compiled_paths(chain, monkeypatch):
    monkeypatch.setattr(onednn, "library", lambda: None)
    model = kuiper.load(chain)
    assert all(step.op.output_layout is None for step in model.steps)
    x = RNG.standard_normal((1, 8, 9, 11)).astype(np.float32)
    assert np.max(np.abs(model(x) - _chain_reference(x))) <= 2e-5


@pytest.mark.skipif(not onednn.available(), reason=onednn.describe())
def test_an_epilogue_without_post_ops_runs_after_the_onednn_conv(tmp_path):
    """A leaky ReLU has no post-op here: the conv runs on oneDNN and the epilogue after it, over its
    plain output (which is not handed on in oneDNN's layout)."""
    text = """7767517
4 3
pnnx.Input in0 0 1 x
nn.Conv2d c1 1 1 x a bias=True kernel_size=(3,3) in_channels=8 out_channels=16 padding=(1,1) @weight=(16,8,3,3)f32 @bias=(16)f32
nn.LeakyReLU act 1 1 a b negative_slope=0.1
pnnx.Output out 1 0 b
"""
    model = kuiper.load(write_model(tmp_path, text, {"c1.weight": W1.tobytes(), "c1.bias": B1.tobytes()}))
    conv = model.steps[0].op
    if onednn.available():
        assert conv.native is not None and conv.epilogue_after and conv.native.post_ops == ()
        assert conv.native_layout() is None and "after the oneDNN conv" in conv.kernel_note
    else:
        assert conv.native is None and "on each output plane" in conv.kernel_note
    x = RNG.standard_normal((1, 8, 9, 7)).astype(np.float32)
    y = _float64_conv(x.astype(np.float64), W1, pad=1) + B1[None, :, None, None]
    assert np.max(np.abs(model(x) - np.where(y > 0, y, 0.1 * y))) <= 2e-5


# A TCN block's second conv: relu(relu(conv(x)) + x), the ReLU, the residual sum and the ReLU again.
TCN_BLOCK = """7767517
6 5
pnnx.Input in0 0 1 x
nn.Conv1d c 1 1 x a bias=True kernel_size=(3) in_channels=16 out_channels=16 padding=(1) @weight=(16,16,3)f32 @bias=(16)f32
nn.ReLU r1 1 1 a b
pnnx.Expression add 2 1 b x d expr=add(@0,@1)
nn.ReLU r2 1 1 d e
pnnx.Output out 1 0 e
"""


@pytest.mark.skipif(not onednn.available(), reason=onednn.describe())
@pytest.mark.parametrize("plain_below", [None, 0], ids=["small convs plain", "all blocked"])
def test_an_activation_before_and_after_the_residual_sum_runs_on_onednn(tmp_path, plain_below, monkeypatch):
    if plain_below is not None:
        monkeypatch.setattr(onednn_conv, "PLAIN_CONV_WORK", plain_below)
    weight = (RNG.standard_normal((16, 16, 3)) / 6).astype(np.float32)
    bias = RNG.standard_normal(16).astype(np.float32)
    model = kuiper.load(write_model(tmp_path, TCN_BLOCK, {"c.weight": weight.tobytes(), "c.bias": bias.tobytes()}))
    conv = model.steps[0].op
    assert [step.node.name for step in model.steps] == ["c"]
    assert conv.native is not None and conv.native.post_ops == (RELU, ("sum",), RELU)
    x = RNG.standard_normal((2, 16, 30)).astype(np.float32)
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1)))
    y = sum(np.einsum("oc,ncj->noj", weight[:, :, t].astype(np.float64), padded[:, :, t:t + 30]) for t in range(3))
    expected = np.maximum(np.maximum(y + bias[None, :, None], 0) + x, 0)
    assert np.max(np.abs(model(x) - expected)) <= 2e-5


def test_a_depthwise_conv_with_such_an_epilogue_keeps_its_compiled_path(tmp_path):
    """The compiled depthwise conv runs the leaky ReLU on each output plane, in cache: it keeps the
    conv rather than oneDNN plus a pass after it."""
    weight = (RNG.standard_normal((8, 1, 3, 3)) / 3).astype(np.float32)
    text = """7767517
4 3
pnnx.Input in0 0 1 x
nn.Conv2d dw 1 1 x a bias=False kernel_size=(3,3) in_channels=8 out_channels=8 groups=8 padding=(1,1) @weight=(8,1,3,3)f32
nn.LeakyReLU act 1 1 a b negative_slope=0.1
pnnx.Output out 1 0 b
"""
    model = kuiper.load(write_model(tmp_path, text, {"dw.weight": weight.tobytes()}))
    conv = model.steps[0].op
    assert conv.native is None and conv.compiled == "depthwise" and "on each output plane" in conv.kernel_note
    x = RNG.standard_normal((1, 8, 9, 7)).astype(np.float32)
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    y = sum(weight[None, :, 0, i, j, None, None] * padded[:, :, i:i + 9, j:j + 7] for i in range(3) for j in range(3))
    assert np.max(np.abs(model(x) - np.where(y > 0, y, 0.1 * y))) <= 2e-5


@pytest.mark.skipif(not onednn.available(), reason=onednn.describe())
def test_a_conv1d_runs_on_onednn_with_an_epilogue_it_has_no_post_ops_for(tmp_path):
    """nn.Conv1d has no compiled path of its own: with a leaky ReLU after it, oneDNN runs the conv and
    the epilogue runs after it (the reference would run both)."""
    weight = (RNG.standard_normal((6, 4, 3)) / 3).astype(np.float32)
    text = """7767517
4 3
pnnx.Input in0 0 1 x
nn.Conv1d c 1 1 x a bias=False kernel_size=(3) in_channels=4 out_channels=6 @weight=(6,4,3)f32
nn.LeakyReLU act 1 1 a b negative_slope=0.2
pnnx.Output out 1 0 b
"""
    model = kuiper.load(write_model(tmp_path, text, {"c.weight": weight.tobytes()}))
    conv = model.steps[0].op
    assert conv.native is not None and conv.epilogue_after and "epilogue after the oneDNN conv" in conv.kernel_note
    x = RNG.standard_normal((2, 4, 11)).astype(np.float32)
    y = sum(np.einsum("oc,ncj->noj", weight[:, :, t].astype(np.float64), x[:, :, t:t + 9].astype(np.float64))
            for t in range(3))
    assert np.max(np.abs(model(x) - np.where(y > 0, y, 0.2 * y))) <= 2e-5
