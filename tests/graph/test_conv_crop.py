"""A crop of a convolution's output folded into its padding (kuiper/graph/conv_crop.py).

Each folded model is checked against a float64 convolution written out here (and against the same
model built with ``fuse=False``, which runs the padded conv and the slice as the file says), and
each refusal against the op list it must leave alone.
"""

from __future__ import annotations

import numpy as np
import pytest

import kuiper

from conftest import write_model

RNG = np.random.default_rng(11)


def float64_conv1d(x, weight, bias, pads, stride=1, dilation=1):
    """out[n, o, j] = bias[o] + sum over c, t of weight[o, c, t] * padded[n, c, j * stride + t * dilation]."""
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), pads))
    span = dilation * (weight.shape[2] - 1) + 1
    count = (padded.shape[2] - span) // stride + 1
    out = np.zeros((x.shape[0], weight.shape[0], count))
    for t in range(weight.shape[2]):
        taps = padded[:, :, t * dilation: t * dilation + stride * (count - 1) + 1: stride]
        out += np.einsum("oc,ncj->noj", weight[:, :, t].astype(np.float64), taps)
    return out + bias.astype(np.float64)[None, :, None]


def causal_model(tmp_path, slice_params: str, padding=4, dilation=2, stride=1, padding_mode="zeros",
                 second_reader=False):
    """x (1, 6, 20) -> Conv1d(6 -> 8, k3, padding, dilation, stride) -> slice -> ReLU -> y; with
    ``second_reader`` the conv's output also goes to a sigmoid, a second model output z."""
    weight = (RNG.standard_normal((8, 6, 3)) / 4).astype(np.float32)
    bias = RNG.standard_normal(8).astype(np.float32)
    lines = [
        "pnnx.Input in0 0 1 x #x=(1,6,20)f32",
        f"nn.Conv1d conv 1 1 x c bias=True dilation=({dilation}) groups=1 in_channels=6 kernel_size=(3) "
        f"out_channels=8 padding=({padding}) padding_mode={padding_mode} stride=({stride}) "
        "@bias=(8)f32 @weight=(8,6,3)f32 #x=(1,6,20)f32",
        f"Tensor.slice crop 1 1 c s {slice_params} $input=c",
        "F.relu relu 1 1 s y",
        "pnnx.Output out0 1 0 y",
    ]
    if second_reader:
        lines += ["F.sigmoid other 1 1 c z", "pnnx.Output out1 1 0 z"]
    operands = 5 if second_reader else 4
    text = f"7767517\n{len(lines)} {operands}\n" + "\n".join(lines) + "\n"
    param = write_model(tmp_path, text, {"conv.weight": weight.tobytes(), "conv.bias": bias.tobytes()})
    return param, weight, bias


def step_types(model):
    return [step.node.type for step in model.steps]


def test_a_causal_crop_becomes_left_padding_and_the_relu_its_epilogue(tmp_path):
    param, weight, bias = causal_model(tmp_path, "dim=2 end=-4 start=0 step=1")
    model, plain = kuiper.load(param), kuiper.load(param, fuse=False)
    assert step_types(model) == ["Conv1d"]  # no slice left; the ReLU went into the conv
    assert model.steps[0].op.static_pads == ((4, 0),)
    assert step_types(plain) == ["Conv1d", "SliceDim", "ReLU"]
    x = RNG.standard_normal((1, 6, 20)).astype(np.float32)
    expected = np.maximum(float64_conv1d(x, weight, bias, (4, 0), dilation=2), 0)
    got = model(x)
    assert got.shape == expected.shape == (1, 8, 20)
    assert np.max(np.abs(got - expected)) <= 2e-6
    assert np.max(np.abs(plain(x) - expected)) <= 2e-6
    batch = RNG.standard_normal((3, 6, 20)).astype(np.float32)  # another batch
    assert np.max(np.abs(model(batch) - np.maximum(float64_conv1d(batch, weight, bias, (4, 0), dilation=2), 0))) <= 2e-6


@pytest.mark.parametrize("slice_params, pads", [
    ("dims=(-1) starts=(1) ends=(-1) steps=(1) selects=(2147483647)", (0, 0)),  # both ends, list spelling
    ("dim=2 start=1 end=2147483647 step=1", (0, 2)),  # the front only
])
def test_crops_at_either_end_with_a_stride(tmp_path, slice_params, pads):
    """With stride 2 each dropped output is two padded positions: padding 2 loses 2 per output dropped."""
    param, weight, bias = causal_model(tmp_path, slice_params, padding=2, dilation=1, stride=2)
    model = kuiper.load(param)
    assert step_types(model) == ["Conv1d"]
    assert model.steps[0].op.static_pads == (pads,)
    x = RNG.standard_normal((2, 6, 20)).astype(np.float32)
    expected = np.maximum(float64_conv1d(x, weight, bias, pads, stride=2), 0)
    got = model(x)
    assert got.shape == expected.shape
    assert np.max(np.abs(got - expected)) <= 2e-6
    assert np.max(np.abs(kuiper.load(param, fuse=False)(x) - expected)) <= 2e-6


@pytest.mark.parametrize("slice_params, why", [
    ("dim=2 end=-5 start=0 step=1", "drops more than the right padding made"),
    ("dim=2 end=18 start=0 step=1", "an end counted from the start"),
    ("dim=2 end=-4 start=0 step=2", "a step"),
    ("dim=1 end=-4 start=0 step=1", "the channel dim"),
    ("dim=2 end=-4 start=0 step=1", "the conv's output has another reader"),
])
def test_crops_that_are_not_padding_stay_slices(tmp_path, slice_params, why):
    param, weight, bias = causal_model(tmp_path, slice_params, second_reader=why.endswith("another reader"))
    model = kuiper.load(param)
    assert "SliceDim" in step_types(model), why
    x = RNG.standard_normal((1, 6, 20)).astype(np.float32)
    got = model(x)
    got = got[0] if isinstance(got, tuple) else got
    padded = float64_conv1d(x, weight, bias, (4, 4), dilation=2)
    expected = {"drops more than the right padding made": padded[:, :, :-5],
                "an end counted from the start": padded[:, :, :18],
                "a step": padded[:, :, :-4:2],
                "the channel dim": padded[:, :-4],
                "the conv's output has another reader": padded[:, :, :-4]}[why]
    assert np.max(np.abs(got - np.maximum(expected, 0))) <= 2e-6


def test_reflect_padding_is_not_zeros_and_stays(tmp_path):
    param, _, _ = causal_model(tmp_path, "dim=2 end=-4 start=0 step=1", padding_mode="reflect")
    assert "SliceDim" in step_types(kuiper.load(param))
