"""Norm bounds handed between oneDNN convolutions, so that the special-value guard need not read
every input (kuiper/numba_kernels/conv_native.py ``tame`` and ``norm_bound``, conv_post_ops.py
``bound_after``).

Each bound must be at least the norm it stands for (checked against float64 norms of the
tensors themselves), the guard must take the same path as when it reads every input (the same
outputs, bit for bit), and a bound too loose to show the outputs finite must send the guard back
to reading the input, so that an overflowing conv still leaves oneDNN for the IEEE 754 path.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("numba")

import kuiper
from kuiper import onednn
from kuiper.numba_kernels import conv_native
from kuiper.numba_kernels.conv_post_ops import bound_after

from conftest import param_text, write_model

RNG = np.random.default_rng(44)
needs_onednn = pytest.mark.skipif(not onednn.available(), reason=onednn.describe())


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


# post-op step: its function in float64 (erf-GELU through the normal CDF's tanh-free form)
STEPS = {
    ("eltwise_relu", 0.0, 0.0): lambda v: np.maximum(v, 0.0),
    ("eltwise_clip", 0.0, 6.0): lambda v: np.clip(v, 0.0, 6.0),
    ("eltwise_clip", -1.0, 1.0): lambda v: np.clip(v, -1.0, 1.0),
    ("eltwise_clip", 2.0, 3.0): lambda v: np.clip(v, 2.0, 3.0),  # 0 outside the range: the bound is 3 whatever v
    ("eltwise_swish", 1.0, 0.0): lambda v: v * _sigmoid(v),
    ("eltwise_logistic", 0.0, 0.0): _sigmoid,
    ("eltwise_hardswish", 1.0 / 6.0, 0.5): lambda v: v * np.clip(v / 6.0 + 0.5, 0.0, 1.0),
    ("eltwise_gelu_erf", 0.0, 0.0): lambda v: v * 0.5 * (1.0 + np.vectorize(math.erf)(v / math.sqrt(2.0))),
}


@pytest.mark.parametrize("step", list(STEPS), ids=[f"{s[0]}({s[1]:g},{s[2]:g})" for s in STEPS])
@pytest.mark.parametrize("scale", [1e-3, 1.0, 50.0])
def test_each_post_op_keeps_its_output_within_the_bound_it_gives(step, scale):
    function = STEPS[step]
    v = RNG.standard_normal(4000) * scale
    v[:3] = (-np.abs(v).max(), np.abs(v).max(), 0.0)
    out = function(v)
    magnitude = float(np.abs(v).max())
    assert float(np.abs(out).max()) <= bound_after((step,), magnitude, 0.0)
    norm, unit = float(np.linalg.norm(v)), math.sqrt(v.size)
    assert float(np.linalg.norm(out)) <= bound_after((step,), norm, 0.0, unit=unit) * (1 + 1e-12)


def test_a_sum_adds_the_residuals_bound_and_an_unknown_step_gives_none():
    v, r = RNG.standard_normal(500) * 3, RNG.standard_normal(500) * 7
    steps = (("eltwise_relu", 0.0, 0.0), ("sum",), ("eltwise_clip", -1.0, 100.0))
    out = np.clip(np.maximum(v, 0.0) + r, -1.0, 100.0)
    assert float(np.abs(out).max()) <= bound_after(steps, float(np.abs(v).max()), float(np.abs(r).max()))
    assert float(np.linalg.norm(out)) <= bound_after(steps, float(np.linalg.norm(v)), float(np.linalg.norm(r)),
                                                     unit=math.sqrt(v.size))
    assert bound_after((("eltwise_exp", 0.0, 0.0),), 1.0, 0.0) is None
    assert bound_after((("eltwise_relu", 2.0, 0.0),), 1.0, 0.0) is None  # a slope of 2 doubles negatives


def _conv_line(name, source, target, cin, cout, kernel, groups=1):
    pad = kernel // 2
    shape = (cout, cin // groups, kernel, kernel)
    line = (f"nn.Conv2d {name} 1 1 {source} {target} bias=True kernel_size=({kernel},{kernel}) in_channels={cin} "
            f"out_channels={cout} padding=({pad},{pad}) groups={groups} "
            f"@weight=({','.join(map(str, shape))})f32 @bias=({cout})f32")
    return line, shape


ACTIVATION_LINES = {"gelu": "nn.GELU g 1 1 d y", "silu": "nn.SiLU g 1 1 d y", "sigmoid": "nn.Sigmoid g 1 1 d y",
                    "hardswish": "nn.Hardswish g 1 1 d y", "relu": "nn.ReLU g 1 1 d y"}


def _block_model(tmp_path, activation, scale=1.0, name="m"):
    """MobileNetV2's pattern, then one more conv: 3x3 + ReLU6, depthwise 3x3 + ReLU6, 1x1 with the first
    conv's output added (a sum post-op on blocked operands), and a 3x3 with ``activation``."""
    lines, weights = [], {}
    for conv in (("c0", "x", "a0", 16, 48, 3, 1), ("c1", "z0", "a1", 48, 48, 3, 48), ("c2", "z1", "a2", 48, 48, 1, 1),
                 ("c3", "s", "d", 48, 32, 3, 1)):
        line, shape = _conv_line(*conv)
        lines.append(line)
        fan_in = shape[1] * shape[2] * shape[3]
        weights[f"{conv[0]}.weight"] = (RNG.standard_normal(shape) * scale / math.sqrt(fan_in)).astype(np.float32)
        weights[f"{conv[0]}.bias"] = (RNG.standard_normal(shape[0]) * scale).astype(np.float32)
    lines[1:1] = ["nn.ReLU6 r0 1 1 a0 z0"]
    lines[3:3] = ["nn.ReLU6 r1 1 1 a1 z1"]
    lines[5:5] = ["pnnx.Expression e 2 1 a2 z0 s expr=add(@0,@1)"]
    lines.append(ACTIVATION_LINES[activation])
    body = "\n".join(["pnnx.Input in0 0 1 x #x=(2,16,24,24)f32", *lines, "pnnx.Output out 1 0 y"])
    blobs = {key: np.asarray(value, "<f4").tobytes() for key, value in weights.items()}
    # Op by op: a run of oneDNN convs as one sequence (conv_sequence.py) guards them all with one threshold
    # on the input's norm, which test_conv_specialized.py checks.
    return kuiper.load(write_model(tmp_path, param_text(body), blobs, name=name), providers=False)


@pytest.fixture
def spies(monkeypatch):
    """(the Blocked tensors the model's convs gave, the tensors whose norms the guard computed)."""
    blocked, read = [], []
    call, norm = onednn.Convolution.__call__, conv_native.norm_of

    def recording_call(self, *args, **kwargs):
        out = call(self, *args, **kwargs)
        if isinstance(out, onednn.Blocked):
            blocked.append(out)
        return out

    def recording_norm(value):
        read.append(value)
        return norm(value)

    monkeypatch.setattr(onednn.Convolution, "__call__", recording_call)
    monkeypatch.setattr(conv_native, "norm_of", recording_norm)
    return blocked, read


@needs_onednn
@pytest.mark.parametrize("activation", list(ACTIVATION_LINES))
def test_each_bound_covers_the_norm_of_the_tensor_it_goes_with_and_spares_reading_it(tmp_path, spies, activation):
    blocked, read = spies
    model = _block_model(tmp_path, activation, scale=3.0)
    conv_ops = [step.op for step in model.steps if step.node.type == "Conv2d"]
    assert len(conv_ops) == 4 and all(op.native is not None and not op.epilogue_after for op in conv_ops)
    x = RNG.standard_normal((2, 16, 24, 24)).astype(np.float32) * 10
    model(x)
    assert len(blocked) == 3  # c0, c1 and c2 hand their outputs on in oneDNN's layout
    for out in blocked:
        norm = float(np.linalg.norm(np.asarray(out).astype(np.float64)))
        assert out.norm_bound is not None and norm <= out.norm_bound
    assert len(read) == 1 and read[0] is x  # only the model's input was read


@needs_onednn
def test_the_guard_takes_the_same_path_with_and_without_bounds(tmp_path, monkeypatch):
    model = _block_model(tmp_path, "gelu", scale=2.0)
    x = RNG.standard_normal((2, 16, 24, 24)).astype(np.float32)
    with_bounds = model(x)
    monkeypatch.setattr(conv_native, "_known_norm", lambda value: None)
    assert np.array_equal(model(x), with_bounds)


@needs_onednn
def test_a_bound_too_loose_to_show_the_outputs_finite_sends_the_guard_back_to_reading(tmp_path, spies, monkeypatch):
    blocked, read = spies
    model = _block_model(tmp_path, "relu")
    x = RNG.standard_normal((2, 16, 24, 24)).astype(np.float32)
    want = model(x)
    read.clear()
    monkeypatch.setattr(conv_native, "ROUNDING_ROOM", 1e300)  # every bound now says "may overflow"
    assert np.array_equal(model(x), want)
    assert len(read) == 1 + 3 + 1  # the input, c1 to c3's inputs, and the residual c2 adds


def _overflow_model(tmp_path):
    """c0: finite outputs near 1e20 (positive inputs and weights); c1: 1x1 by 1e18 per weight, whose sums
    overflow float32 to +inf; both blocked between them."""
    lines = ["pnnx.Input in0 0 1 x #x=(1,16,8,8)f32",
             "nn.Conv2d c0 1 1 x a bias=False kernel_size=(3,3) in_channels=16 out_channels=32 padding=(1,1) "
             "@weight=(32,16,3,3)f32",
             "nn.Conv2d c1 1 1 a y bias=False kernel_size=(1,1) in_channels=32 out_channels=32 @weight=(32,32,1,1)f32",
             "pnnx.Output out 1 0 y"]
    blobs = {"c0.weight": np.full((32, 16, 3, 3), 1e18, "<f4").tobytes(),
             "c1.weight": np.full((32, 32, 1, 1), 1e18, "<f4").tobytes()}
    return kuiper.load(write_model(tmp_path, param_text("\n".join(lines)), blobs, name="overflow"), providers=False)


@needs_onednn
def test_a_conv_whose_outputs_may_overflow_leaves_onednn_however_its_input_arrived(tmp_path, spies, monkeypatch):
    blocked, read = spies
    model = _overflow_model(tmp_path)
    ran = []
    call = onednn.Convolution.__call__

    def counting(self, *args, **kwargs):
        ran.append(self)
        return call(self, *args, **kwargs)

    monkeypatch.setattr(onednn.Convolution, "__call__", counting)
    first, second = (step.op for step in model.steps)
    assert first.output_layout == conv_native.NATIVE_LAYOUT
    x = np.abs(RNG.standard_normal((1, 16, 8, 8))).astype(np.float32) + 0.5
    with np.errstate(all="ignore"):
        y = model(x)
    assert ran == [first.native]  # the second conv took the reference path
    assert len(blocked) == 1 and np.isfinite(np.asarray(blocked[0])).all()
    assert np.isposinf(y).all()  # every sum of positive terms overflows, as IEEE 754 and PyTorch give it


POOLS = {
    "max 3x3 s2 p1 (a stem)": "nn.MaxPool2d p 1 1 x y kernel_size=(3,3) stride=(2,2) padding=(1,1)",
    "max 5x5 s1 p2 (SPPF)": "nn.MaxPool2d p 1 1 x y kernel_size=(5,5) stride=(1,1) padding=(2,2)",
    "max 2x2 dilated": "nn.MaxPool2d p 1 1 x y kernel_size=(2,2) stride=(1,1) dilation=(2,2)",
    "average 3x3 s1 p1": "nn.AvgPool2d p 1 1 x y kernel_size=(3,3) stride=(1,1) padding=(1,1)",
}


@needs_onednn
@pytest.mark.parametrize("name", POOLS)
def test_a_pools_bound_covers_its_outputs_norm(tmp_path, name):
    """A pooling's bound (what a run of layers as one sequence carries through it: conv_sequence.py) holds
    for inputs whose energy sits where the most windows overlap, and for random ones."""
    model = kuiper.load(write_model(tmp_path, param_text(f"pnnx.Input in0 0 1 x\n{POOLS[name]}\npnnx.Output out 1 0 y"),
                                    None, name="pool"), providers=False)
    op = model.steps[0].op
    shape = (1, 16, 11, 13)
    inputs = [RNG.standard_normal(shape).astype(np.float32), np.ones(shape, np.float32)]
    peaked = np.zeros(shape, np.float32)
    peaked[:, :, 5, 6] = 1.0  # one element in as many windows as any
    inputs.append(peaked)
    for x in inputs:
        y = model(x).astype(np.float64)
        bound = op.bound_through([shape], [float(np.linalg.norm(x.astype(np.float64)))])
        assert float(np.linalg.norm(y)) <= bound * (1 + 1e-6)
