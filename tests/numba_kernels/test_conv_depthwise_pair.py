"""The pointwise-depthwise provider (kuiper/numba_kernels/conv_depthwise_pair.py): a 1x1 conv and the 3x3
depthwise conv reading it, run as one oneDNN primitive with the depthwise conv as a post-op.

Held to a float64 NumPy reference written here and to the same model run op by op (``providers=False``),
on finite inputs and on NaN and +-inf, including a depthwise conv whose sums overflow where the 1x1
conv's do not: its guard must keep the pair off the fused path, as the op's own guard would.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("numba")

import kuiper
from kuiper import onednn
from kuiper.numba_kernels import conv_depthwise_pair
from kuiper.numba_kernels.conv_sequence import OneDnnSequence

from conftest import param_text, write_model

pytestmark = pytest.mark.skipif(not onednn.available(), reason=onednn.describe())
RNG = np.random.default_rng(4402)


def _float64_conv2d(x, weight, bias, stride, pad, groups):
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    out_channels, group_in, kh, kw = weight.shape
    oh, ow = (x.shape[2] - kh) // stride + 1, (x.shape[3] - kw) // stride + 1
    out = np.zeros((x.shape[0], out_channels, oh, ow))
    per_group = out_channels // groups
    for g in range(groups):
        part = x[:, g * group_in:(g + 1) * group_in]
        for i in range(kh):
            for j in range(kw):
                window = part[:, :, i:i + (oh - 1) * stride + 1:stride, j:j + (ow - 1) * stride + 1:stride]
                taps = weight[g * per_group:(g + 1) * per_group, :, i, j].astype(np.float64)
                out[:, g * per_group:(g + 1) * per_group] += np.einsum("oc,nchw->nohw", taps, window)
    return out + bias.astype(np.float64).reshape(1, -1, 1, 1)


def _relu6(v):
    return np.where(v < 0, 0.0, np.where(v > 6, 6.0, v))  # NaN stays NaN, as in PyTorch


def _block(tmp_path, channels, size, stride, residual, dw_weight=None, name="block"):
    """MobileNetV2's inverted residual: 1x1 to 3x channels + ReLU6, depthwise 3x3 + ReLU6, 1x1 back
    (plus the block's input where ``residual``), then a ReLU so the last conv has an epilogue too."""
    wide = 3 * channels
    weights = {
        "e.weight": (RNG.standard_normal((wide, channels, 1, 1)) / math.sqrt(channels)).astype(np.float32),
        "e.bias": RNG.standard_normal(wide).astype(np.float32),
        "d.weight": (RNG.standard_normal((wide, 1, 3, 3)) / 3 if dw_weight is None else dw_weight).astype(np.float32),
        "d.bias": RNG.standard_normal(wide).astype(np.float32),
        "p.weight": (RNG.standard_normal((channels, wide, 1, 1)) / math.sqrt(wide)).astype(np.float32),
        "p.bias": RNG.standard_normal(channels).astype(np.float32),
    }
    lines = [
        f"pnnx.Input in0 0 1 x #x=(2,{channels},{size},{size})f32",
        f"nn.Conv2d e 1 1 x a bias=True kernel_size=(1,1) in_channels={channels} out_channels={wide} "
        f"@weight=({wide},{channels},1,1)f32 @bias=({wide})f32",
        "nn.ReLU6 r0 1 1 a b",
        f"nn.Conv2d d 1 1 b c bias=True kernel_size=(3,3) in_channels={wide} out_channels={wide} padding=(1,1) "
        f"stride=({stride},{stride}) groups={wide} @weight=({wide},1,3,3)f32 @bias=({wide})f32",
        "nn.ReLU6 r1 1 1 c e2",
        f"nn.Conv2d p 1 1 e2 f bias=True kernel_size=(1,1) in_channels={wide} out_channels={channels} "
        f"@weight=({channels},{wide},1,1)f32 @bias=({channels})f32",
    ]
    if residual:
        lines += ["pnnx.Expression s 2 1 f x g expr=add(@0,@1)", "nn.ReLU r2 1 1 g y"]
    else:
        lines += ["nn.ReLU r2 1 1 f y"]
    lines.append("pnnx.Output out 1 0 y")
    blobs = {key: np.asarray(value, "<f4").tobytes() for key, value in weights.items()}
    param = write_model(tmp_path, param_text("\n".join(lines)), blobs, name=name)
    return param, weights


def _reference(x, weights, stride, residual):
    wide = weights["e.weight"].shape[0]
    a = _relu6(_float64_conv2d(x, weights["e.weight"], weights["e.bias"], 1, 0, 1))
    c = _relu6(_float64_conv2d(a, weights["d.weight"], weights["d.bias"], stride, 1, wide))
    f = _float64_conv2d(c, weights["p.weight"], weights["p.bias"], 1, 0, 1)
    return np.maximum(f + x if residual else f, 0.0)


def _partitions(model):
    """The pairs, also those a run of oneDNN convs runs as its members (conv_sequence.py)."""
    ops = [op for step in model.steps
           for op in ([unit.op for unit in step.op.members] if isinstance(step.op, OneDnnSequence) else [step.op])]
    return [op for op in ops if isinstance(op, conv_depthwise_pair.PointwiseDepthwise)]


@pytest.fixture
def ran(monkeypatch):
    """The oneDNN convolutions that returned a result, in order (one that raised, for the caller to fall
    back, is not counted)."""
    called = []
    original = onednn.Convolution.__call__

    def spy(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        called.append(self)
        return out

    monkeypatch.setattr(onednn.Convolution, "__call__", spy)
    return called


CASES = {
    # name: (channels, map size, depthwise stride, residual)
    "20x20, stride 1, residual (nChw16c, jit kernels)": (16, 20, 1, True),
    "20x20, stride 2": (16, 20, 2, False),
    "odd 9x9, stride 2 (the last window floors)": (8, 9, 2, False),
    "7x7, stride 1, residual (oneDNN's own layouts)": (32, 7, 1, True),
}


@pytest.mark.parametrize("name", CASES)
def test_the_fused_pair_computes_what_the_two_convs_compute(tmp_path, ran, name):
    channels, size, stride, residual = CASES[name]
    param, weights = _block(tmp_path, channels, size, stride, residual)
    fused, unfused = kuiper.load(param), kuiper.load(param, providers=False)
    assert len(_partitions(fused)) == 1 and not _partitions(unfused)
    x = RNG.standard_normal((2, channels, size, size)).astype(np.float32)
    want = _reference(x, weights, stride, residual)
    got = fused(x)
    assert _partitions(fused)[0].native in ran  # the fused primitive ran
    scale = max(1.0, float(np.abs(want).max()))
    assert np.max(np.abs(got - want)) <= 2e-5 * scale
    assert np.max(np.abs(got - unfused(x))) <= 2e-5 * scale


def _feeds(shape):
    x = RNG.standard_normal(shape).astype(np.float32)
    feeds = []
    for value in (np.nan, np.inf, -np.inf):
        one = x.copy()
        one.flat[x.size // 3] = value
        plane = x.copy()
        plane[0, 0] = value
        feeds += [one, plane]
    return feeds + [x * np.float32(1e37)]


@pytest.mark.parametrize("name", CASES)
def test_nan_and_infinities_come_out_where_the_convs_op_by_op_put_them(tmp_path, name):
    channels, size, stride, residual = CASES[name]
    param, _ = _block(tmp_path, channels, size, stride, residual)
    fused, unfused = kuiper.load(param), kuiper.load(param, providers=False)
    with np.errstate(all="ignore"):
        for x in _feeds((2, channels, size, size)):
            got, want = fused(x), unfused(x)
            for kind in (np.isnan, np.isposinf, np.isneginf):
                assert np.array_equal(kind(got), kind(want))
            finite = np.isfinite(want)
            assert np.allclose(got[finite], want[finite], rtol=1e-4, atol=1e-4)


def test_a_depthwise_conv_whose_sums_overflow_keeps_the_pair_apart(tmp_path, ran):
    """The 1x1 conv's outputs are finite (ReLU6 keeps them in [0, 6]); the depthwise taps of +-1e38 overflow
    float32 to +inf - inf = NaN, which ReLU6 must keep and oneDNN's clip would drop: the pair's guard sends
    the call op by op, where the depthwise conv's own guard takes the IEEE 754 path."""
    channels, size = 8, 12
    taps = np.where(np.arange(9).reshape(3, 3) % 2 == 0, 1e38, -1e38)
    dw_weight = np.broadcast_to(taps, (3 * channels, 1, 3, 3)).copy()
    param, _ = _block(tmp_path, channels, size, 1, False, dw_weight=dw_weight)
    fused, unfused = kuiper.load(param), kuiper.load(param, providers=False)
    x = np.abs(RNG.standard_normal((2, channels, size, size))).astype(np.float32) + 1.0
    with np.errstate(all="ignore"):
        got, want = fused(x), unfused(x)
    assert _partitions(fused)[0].native not in ran and ran  # the convs ran, one by one
    assert np.isnan(want).any()  # the case is not vacuous: IEEE 754 makes NaN here
    assert np.array_equal(np.isnan(got), np.isnan(want))


PAIRING = [
    # (depthwise kernel, padding, stride, whether the 1x1 conv's output has a second reader, pairs claimed)
    (3, 1, 1, False, 1),
    (3, 1, 2, False, 1),
    (3, 1, 3, False, 0),  # oneDNN's depthwise post-op takes strides 1 and 2
    (5, 2, 1, False, 0),  # and 3x3 kernels
    (3, 0, 1, False, 0),  # padded by 1
    (3, 1, 1, True, 0),  # the 1x1 conv's output is read again: it must be written out whole
]


@pytest.mark.parametrize("kernel, pad, stride, second_reader, claimed", PAIRING)
def test_only_a_1x1_conv_read_by_nothing_but_a_3x3_depthwise_conv_of_stride_1_or_2_pairs(
        tmp_path, ran, kernel, pad, stride, second_reader, claimed):
    lines = ["pnnx.Input in0 0 1 x #x=(1,16,20,20)f32",
             "nn.Conv2d e 1 1 x a bias=False kernel_size=(1,1) in_channels=16 out_channels=32 @weight=(32,16,1,1)f32",
             f"nn.Conv2d d 1 1 a b bias=False kernel_size=({kernel},{kernel}) in_channels=32 out_channels=32 "
             f"padding=({pad},{pad}) stride=({stride},{stride}) groups=32 @weight=(32,1,{kernel},{kernel})f32"]
    if second_reader:
        lines += ["nn.AdaptiveAvgPool2d g 1 1 a c output_size=(1,1)", "pnnx.Output out 2 0 b c"]
    else:
        lines.append("pnnx.Output out 1 0 b")
    weights = {"e.weight": RNG.standard_normal((32, 16, 1, 1)).astype("<f4").tobytes(),
               "d.weight": RNG.standard_normal((32, 1, kernel, kernel)).astype("<f4").tobytes()}
    param = write_model(tmp_path, param_text("\n".join(lines)), weights)
    model = kuiper.load(param)
    assert len(_partitions(model)) == claimed
    # and runs as the convs do (here without biases: the fused conv's are zeros)
    x = RNG.standard_normal((1, 16, 20, 20)).astype(np.float32)
    got, want = model(x), kuiper.load(param, providers=False)(x)
    assert all(pair.native in ran for pair in _partitions(model))
    for a, b in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        assert np.max(np.abs(a - b)) <= 1e-4 * max(1.0, float(np.abs(b).max()))
