"""Two convolutions of one input, added, merged into one (kuiper/graph/sibling_convs.py).

Each merged model is checked against float64 convolutions of the two branches written out here,
and against the same model built with ``fuse=False`` (both convs and the add, as the file says);
each refusal against the op list it must leave alone.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import param_text, write_model

import kuiper

RNG = np.random.default_rng(23)


def float64_conv2d(x, weight, bias, padding, stride=1, dilation=1, groups=1):
    """out[n, o, i, j] = bias[o] + sum over c, s, t of weight[o, c, s, t] * padded[n, g(o) c, i * stride + s *
    dilation, j * stride + t * dilation], g(o) the group of output channel o."""
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    out_channels, per_group, kh, kw = weight.shape
    rows = (padded.shape[2] - dilation * (kh - 1) - 1) // stride + 1
    cols = (padded.shape[3] - dilation * (kw - 1) - 1) // stride + 1
    out = np.zeros((x.shape[0], out_channels, rows, cols))
    outs_per_group = out_channels // groups
    for o in range(out_channels):
        first = (o // outs_per_group) * per_group
        for s in range(kh):
            for t in range(kw):
                taps = padded[:, first:first + per_group, s * dilation: s * dilation + stride * (rows - 1) + 1: stride,
                              t * dilation: t * dilation + stride * (cols - 1) + 1: stride]
                out[:, o] += np.einsum("c,ncij->nij", weight[o, :, s, t].astype(np.float64), taps)
    return out + bias.astype(np.float64)[None, :, None, None]


def branch_model(tmp_path, big="kernel_size=(3,3) padding=(1,1)", small="kernel_size=(1,1) padding=(0,0)",
                 stride=2, groups=1, small_dilation=1, second_reader=False):
    """x (1, 4, 9, 9) -> Conv2d a (big) and Conv2d b (small), 4 -> 6 channels, added, then a ReLU; with
    ``second_reader`` b's output is also a model output."""
    big_kernel, small_kernel = (int(part.split("=(")[1].split(",")[0]) for part in (big.split()[0], small.split()[0]))
    per_group = 4 // groups
    weights = {name: (RNG.standard_normal((6, per_group, k, k)) / 3).astype(np.float32)
               for name, k in (("a", big_kernel), ("b", small_kernel))}
    biases = {name: RNG.standard_normal(6).astype(np.float32) for name in ("a", "b")}
    common = f"bias=True groups={groups} in_channels=4 out_channels=6 padding_mode=zeros stride=({stride},{stride})"
    body = f"""
        pnnx.Input in0 0 1 x #x=(1,4,9,9)f32
        nn.Conv2d a 1 1 x ya {common} dilation=(1,1) {big} @bias=(6)f32 @weight=(6,{per_group},{big_kernel},{big_kernel})f32
        nn.Conv2d b 1 1 x yb {common} dilation=({small_dilation},{small_dilation}) {small} @bias=(6)f32 @weight=(6,{per_group},{small_kernel},{small_kernel})f32
        pnnx.Expression add 2 1 ya yb s expr=add(@0,@1)
        nn.ReLU relu 1 1 s y
        pnnx.Output out0 1 0 y
    """
    if second_reader:
        body += "pnnx.Output out1 1 0 yb\n"
    blobs = {f"{name}.{kind}": array.tobytes() for name in ("a", "b")
             for kind, array in (("weight", weights[name]), ("bias", biases[name]))}
    return write_model(tmp_path, param_text(body), blobs), weights, biases


def conv_steps(model):
    return [step.node.type for step in model.steps]


@pytest.mark.parametrize("groups", [1, 2])
def test_a_centred_1x1_branch_goes_into_the_3x3_kernel(tmp_path, groups):
    param, weights, biases = branch_model(tmp_path, groups=groups)
    model = kuiper.load(param, providers=False)
    assert conv_steps(model) == ["Conv2d"]  # one conv; the add gone, the ReLU its epilogue
    plain = kuiper.load(param, fuse=False)
    assert conv_steps(plain) == ["Conv2d", "Conv2d", "pnnx.Expression", "ReLU"]
    x = RNG.standard_normal((1, 4, 9, 9)).astype(np.float32)
    expected = np.maximum(float64_conv2d(x, weights["a"], biases["a"], 1, stride=2, groups=groups)
                          + float64_conv2d(x, weights["b"], biases["b"], 0, stride=2, groups=groups), 0)
    for built in (model, kuiper.load(param), plain):  # with providers too
        got = built(x)
        assert got.shape == expected.shape == (1, 6, 5, 5)
        assert np.max(np.abs(got - expected)) <= 2e-5
    batch = RNG.standard_normal((3, 4, 9, 9)).astype(np.float32)  # another batch
    expected = np.maximum(float64_conv2d(batch, weights["a"], biases["a"], 1, stride=2, groups=groups)
                          + float64_conv2d(batch, weights["b"], biases["b"], 0, stride=2, groups=groups), 0)
    assert np.max(np.abs(model(batch) - expected)) <= 2e-5


def test_a_3x3_branch_inside_a_7x7_one(tmp_path):
    """FastViT's large-kernel patch embedding: a 7 x 7 with padding 3 beside a 3 x 3 with padding 1."""
    param, weights, biases = branch_model(tmp_path, big="kernel_size=(7,7) padding=(3,3)",
                                          small="kernel_size=(3,3) padding=(1,1)", stride=1)
    model = kuiper.load(param, providers=False)
    assert conv_steps(model) == ["Conv2d"]
    x = RNG.standard_normal((1, 4, 9, 9)).astype(np.float32)
    expected = np.maximum(float64_conv2d(x, weights["a"], biases["a"], 3)
                          + float64_conv2d(x, weights["b"], biases["b"], 1), 0)
    assert np.max(np.abs(model(x) - expected)) <= 2e-5


@pytest.mark.parametrize("case", [
    {"small": "kernel_size=(3,3) padding=(2,2)", "small_dilation": 2, "stride": 1},  # another dilation
    {"small": "kernel_size=(1,1) padding=(0,0)", "second_reader": True},  # the branch is also a model output
])
def test_branches_that_do_not_qualify_stay_apart(tmp_path, case):
    param, weights, biases = branch_model(tmp_path, **case)
    model = kuiper.load(param, providers=False)
    assert conv_steps(model).count("Conv2d") == 2
    x = RNG.standard_normal((1, 4, 9, 9)).astype(np.float32)
    stride = case.get("stride", 2)
    small = float64_conv2d(x, weights["b"], biases["b"], int(case["small"].split("padding=(")[1][0]), stride=stride,
                           dilation=case.get("small_dilation", 1))
    expected = np.maximum(float64_conv2d(x, weights["a"], biases["a"], 1, stride=stride) + small, 0)
    got = model(x)
    got = got[0] if isinstance(got, tuple) else got
    assert np.max(np.abs(got - expected)) <= 2e-5
