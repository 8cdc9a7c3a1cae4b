"""A conv whose only reader moves its channels last writes its output channels-last
(kuiper/graph/channels_last.py, kuiper/onednn/blocked.py's ToPlain).

ConvNeXt's block (depthwise conv -> permute(0, 2, 3, 1) -> LayerNorm -> Linear) and YOLOv5's detect head
(conv -> reshape to (N, 3, 85, H, W) -> permute(0, 1, 3, 4, 2) -> sigmoid, which moves up into the conv),
small.  The conv's output is then a view of an (N, H, W, C) array and the permute's a view of the same
memory (no copy); the numbers are those of the same model built without the pass bit for bit (the same
arithmetic, written elsewhere) and a float64 reference's; a NaN input takes the conv's other path either
way.  PVT-v2's Mix-FFN, whose conv input lies channels-last too, runs a kernel for that layout: close to
the row-major build's, not equal.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

import kuiper
from kuiper import onednn
from kuiper.graph.providers import PARTITION_TYPE
from kuiper.ops.base import CHANNELS_LAST

from conftest import param_text, write_model

pytestmark = pytest.mark.skipif(not onednn.available(), reason=onednn.describe())
BUILD = sys.modules["kuiper.graph.build"]  # the module (kuiper.graph's attribute of that name is the function)

RNG = np.random.default_rng(44)
DW = (RNG.standard_normal((24, 1, 3, 3)) / 3).astype(np.float32)
DW_BIAS = RNG.standard_normal(24).astype(np.float32)
LN_WEIGHT = (1 + RNG.standard_normal(24) / 4).astype(np.float32)
LN_BIAS = (RNG.standard_normal(24) / 4).astype(np.float32)
FC = (RNG.standard_normal((8, 24)) / 5).astype(np.float32)
FC_BIAS = RNG.standard_normal(8).astype(np.float32)
BLOCK_WEIGHTS = {"dw.weight": DW.tobytes(), "dw.bias": DW_BIAS.tobytes(), "ln.weight": LN_WEIGHT.tobytes(),
                 "ln.bias": LN_BIAS.tobytes(), "fc.weight": FC.tobytes(), "fc.bias": FC_BIAS.tobytes()}
BLOCK = """
pnnx.Input in0 0 1 x #x=(1,24,12,13)f32
nn.Conv2d dw 1 1 x a bias=True groups=24 kernel_size=(3,3) padding=(1,1) in_channels=24 out_channels=24 @weight=(24,1,3,3)f32 @bias=(24)f32 #a=(1,24,12,13)f32
Tensor.permute p 1 1 a b dims=(0,2,3,1) #b=(1,12,13,24)f32
nn.LayerNorm ln 1 1 b c elementwise_affine=True eps=1e-6 normalized_shape=(24) @weight=(24)f32 @bias=(24)f32 #c=(1,12,13,24)f32
nn.Linear fc 1 1 c d bias=True in_features=24 out_features=8 @weight=(8,24)f32 @bias=(8)f32 #d=(1,12,13,8)f32
pnnx.Output out 1 0 d
"""
X = RNG.standard_normal((1, 24, 12, 13)).astype(np.float32)

HEAD_WEIGHT = (RNG.standard_normal((6, 4, 1, 1)) / 2).astype(np.float32)
HEAD_BIAS = RNG.standard_normal(6).astype(np.float32)
HEAD = """
pnnx.Input in0 0 1 x #x=(1,4,10,11)f32
nn.Conv2d c 1 1 x a bias=True kernel_size=(1,1) in_channels=4 out_channels=6 @weight=(6,4,1,1)f32 @bias=(6)f32 #a=(1,6,10,11)f32
Tensor.reshape v 1 1 a b shape=(1,2,3,10,11) #b=(1,2,3,10,11)f32
Tensor.permute p 1 1 b d dims=(0,1,3,4,2) #d=(1,2,10,11,3)f32
F.sigmoid s 1 1 d f #f=(1,2,10,11,3)f32
pnnx.Output out 1 0 f
"""
HEAD_X = RNG.standard_normal((1, 4, 10, 11)).astype(np.float32)


def _load(tmp_path, body, weights, channels_last=True, name="m"):
    """The model, built with the pass or (``channels_last=False``) with it made to do nothing."""
    path = write_model(tmp_path, param_text(body), weights, name=name)
    if channels_last:
        return kuiper.load(path, threads=1)
    kept = BUILD.write_channels_last
    BUILD.write_channels_last = lambda *args: None
    try:
        return kuiper.load(path, threads=1)
    finally:
        BUILD.write_channels_last = kept


def _seen(model, *inputs):
    """(output, {op name: (its first input, its first output)}) of one call."""
    seen = {}

    class Observer:
        def before_step(self, node, inputs):
            pass

        def after_step(self, node, inputs, outputs):
            seen[node.name] = (inputs[0] if inputs else None, outputs[0])

    return model(*inputs, observer=Observer()), seen


def _layout(model, name):
    return next(step.op.output_layout for step in model.steps if step.node.name == name)


def _block64(x):
    x64 = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    height, width = x.shape[2:]
    conv = sum(DW[None, :, 0, i, j, None, None].astype(np.float64) * x64[:, :, i:i + height, j:j + width]
               for i in range(3) for j in range(3)) + DW_BIAS.astype(np.float64)[None, :, None, None]
    rows = conv.transpose(0, 2, 3, 1)
    normed = (rows - rows.mean(-1, keepdims=True)) / np.sqrt(rows.var(-1, keepdims=True) + 1e-6)
    return (normed * LN_WEIGHT + LN_BIAS) @ FC.T.astype(np.float64) + FC_BIAS


def test_a_depthwise_conv_before_a_permute_to_channels_last_writes_nhwc_and_the_permute_copies_nothing(tmp_path):
    model = _load(tmp_path, BLOCK, BLOCK_WEIGHTS)
    assert _layout(model, "dw") == CHANNELS_LAST
    plain = _load(tmp_path, BLOCK, BLOCK_WEIGHTS, channels_last=False, name="plain")
    assert _layout(plain, "dw") is None
    for call in range(3):  # the first call, then the specialized steps (the conv's one-call sequence)
        got, seen = _seen(model, X)
        conv_out, permuted = seen["dw"][1], seen["p"][1]
        assert conv_out.shape == (1, 24, 12, 13) and not conv_out.flags.c_contiguous
        assert conv_out.strides == (4 * 12 * 13 * 24, 4, 4 * 13 * 24, 4 * 24)  # (N, C, H, W) over (N, H, W, C)
        assert permuted.flags.c_contiguous and np.shares_memory(permuted, conv_out)
        want, plain_seen = _seen(plain, X)
        assert plain_seen["dw"][1].flags.c_contiguous
        assert np.array_equal(conv_out, plain_seen["dw"][1]), f"call {call}: the conv's values changed"
        assert np.array_equal(got, want), f"call {call}: the model's output changed"
    np.testing.assert_allclose(got, _block64(X), rtol=1e-5, atol=2e-5)


def test_a_nan_input_takes_the_convs_other_path_with_the_same_result(tmp_path):
    model = _load(tmp_path, BLOCK, BLOCK_WEIGHTS)
    plain = _load(tmp_path, BLOCK, BLOCK_WEIGHTS, channels_last=False, name="plain")
    x = X.copy()
    x[0, 3, 4, 5] = np.nan
    x[0, 7, 0, 0] = np.inf
    for _ in range(2):
        model(X), plain(X)  # specialized steps first: their guards send the NaN to forward
    got, want = model(x), plain(x)
    assert np.isnan(got).any()
    assert np.array_equal(got, want, equal_nan=True)


def test_yolos_head_reshape_and_permute_read_the_conv_output_in_rows(tmp_path):
    weights = {"c.weight": HEAD_WEIGHT.tobytes(), "c.bias": HEAD_BIAS.tobytes()}
    model = _load(tmp_path, HEAD, weights)
    assert _layout(model, "c") == CHANNELS_LAST
    plain = _load(tmp_path, HEAD, weights, channels_last=False, name="plain")
    for _ in range(3):
        got, seen = _seen(model, HEAD_X)
        permuted = seen["p"][1]
        assert permuted.shape == (1, 2, 10, 11, 3) and permuted.strides[-1] == 4  # each row of 3 contiguous
        assert np.shares_memory(permuted, seen["c"][1])
        assert np.array_equal(got, plain(HEAD_X))
    conv = np.einsum("oc,nchw->nohw", HEAD_WEIGHT[:, :, 0, 0].astype(np.float64), HEAD_X.astype(np.float64))
    conv += HEAD_BIAS[None, :, None, None]
    rows = conv.reshape(1, 2, 3, 10, 11).transpose(0, 1, 3, 4, 2)
    np.testing.assert_allclose(got, 1 / (1 + np.exp(-rows)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("change", [
    ("dims=(0,2,3,1) #b=(1,12,13,24)f32", "dims=(0,1,3,2) #b=(1,24,13,12)f32"),  # the channels stay put
    ("pnnx.Output out 1 0 d", "pnnx.Output out 2 0 d a"),  # the conv's output is a model output
    ("pnnx.Output out 1 0 d", "F.relu r 1 1 a e #e=(1,24,12,13)f32\npnnx.Output out 2 0 d e"),  # a second reader
])
def test_the_conv_writes_row_major_where_nothing_would_read_rows(tmp_path, change):
    body = BLOCK.replace(*change)
    if "(0,1,3,2)" in body:  # LayerNorm and Linear over the last axis, now of 12
        body = body.replace("normalized_shape=(24) @weight=(24)f32 @bias=(24)f32", "normalized_shape=(12) "
                            "@weight=(12)f32 @bias=(12)f32").replace("in_features=24", "in_features=12")
        body = body.replace("@weight=(8,24)f32", "@weight=(8,12)f32")
        weights = {**BLOCK_WEIGHTS, "ln.weight": LN_WEIGHT[:12].tobytes(), "ln.bias": LN_BIAS[:12].tobytes(),
                   "fc.weight": np.ascontiguousarray(FC[:, :12]).tobytes()}
    else:
        weights = BLOCK_WEIGHTS
    model = _load(tmp_path, body, weights)
    assert _layout(model, "dw") is None
    _, seen = _seen(model, X)
    assert seen["dw"][1].flags.c_contiguous


MIX_FFN = """
pnnx.Input in0 0 1 x #x=(1,156,24)f32
torch.transpose t1 1 1 x a dim0=1 dim1=2 #a=(1,24,156)f32
Tensor.reshape r 1 1 a b shape=(1,24,12,13) #b=(1,24,12,13)f32
nn.Conv2d dw 1 1 b c bias=True groups=24 kernel_size=(3,3) padding=(1,1) in_channels=24 out_channels=24 @weight=(24,1,3,3)f32 @bias=(24)f32 #c=(1,24,12,13)f32
torch.flatten f 1 1 c d start_dim=2 end_dim=-1 #d=(1,24,156)f32
torch.transpose t2 1 1 d e dim0=1 dim1=2 #e=(1,156,24)f32
nn.Linear fc 1 1 e g bias=True in_features=24 out_features=8 @weight=(8,24)f32 @bias=(8)f32 #g=(1,156,8)f32
pnnx.Output out 1 0 g
"""


def test_pvts_mix_ffn_conv_reads_and_writes_rows_of_channels(tmp_path):
    """PVT-v2's depthwise conv between two row-major Linear layers: the input lies channels-last, and so does
    the output; a kernel for that layout sums in another order than the blocked one (close, not equal)."""
    weights = {key: value for key, value in BLOCK_WEIGHTS.items() if key.startswith(("dw.", "fc."))}
    model = _load(tmp_path, MIX_FFN, weights)
    assert _layout(model, "dw") == CHANNELS_LAST
    plain = _load(tmp_path, MIX_FFN, weights, channels_last=False, name="plain")
    rows = RNG.standard_normal((1, 156, 24)).astype(np.float32)
    for _ in range(3):
        got, seen = _seen(model, rows)
        assert seen["dw"][1].transpose(0, 2, 3, 1).flags.c_contiguous
        assert seen["t2"][1].flags.c_contiguous and np.shares_memory(seen["t2"][1], seen["dw"][1])
        np.testing.assert_allclose(got, plain(rows), rtol=1e-5, atol=1e-5)
    image = rows.transpose(0, 2, 1).reshape(1, 24, 12, 13)
    x64 = np.pad(image.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    dw = sum(DW[None, :, 0, i, j, None, None].astype(np.float64) * x64[:, :, i:i + 12, j:j + 13]
             for i in range(3) for j in range(3)) + DW_BIAS.astype(np.float64)[None, :, None, None]
    want = dw.reshape(1, 24, 156).transpose(0, 2, 1) @ FC.T.astype(np.float64) + FC_BIAS
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-5)


STEM = """
pnnx.Input in0 0 1 x #x=(1,3,32,32)f32
nn.Conv2d c1 1 1 x a bias=True kernel_size=(3,3) stride=(2,2) padding=(1,1) in_channels=3 out_channels=16 @weight=(16,3,3,3)f32 @bias=(16)f32 #a=(1,16,16,16)f32
nn.ReLU r 1 1 a b #b=(1,16,16,16)f32
nn.Conv2d c2 1 1 b c bias=True kernel_size=(3,3) stride=(2,2) padding=(1,1) in_channels=16 out_channels=32 @weight=(32,16,3,3)f32 @bias=(32)f32 #c=(1,32,8,8)f32
torch.flatten f 1 1 c d start_dim=2 end_dim=-1 #d=(1,32,64)f32
torch.transpose t 1 1 d e dim0=1 dim1=2 #e=(1,64,32)f32
pnnx.Output out 1 0 e
"""


def test_a_run_of_convs_as_one_sequence_writes_its_last_output_channels_last(tmp_path):
    """LeViT's stem: convs that the onednn-sequence provider runs as one partition, then flatten and transpose
    to tokens: the partition's output (its last member's) is written channels-last, the tokens are a view."""
    w1 = (RNG.standard_normal((16, 3, 3, 3)) / 4).astype(np.float32)
    w2 = (RNG.standard_normal((32, 16, 3, 3)) / 8).astype(np.float32)
    weights = {"c1.weight": w1.tobytes(), "c1.bias": DW_BIAS[:16].tobytes(), "c2.weight": w2.tobytes(),
               "c2.bias": np.concatenate([DW_BIAS, DW_BIAS[:8]]).tobytes()}
    model = _load(tmp_path, STEM, weights)
    (partition,) = [step for step in model.steps if step.node.type == PARTITION_TYPE]
    assert partition.op.output_layout == CHANNELS_LAST
    plain = _load(tmp_path, STEM, weights, channels_last=False, name="plain")
    x = RNG.standard_normal((1, 3, 32, 32)).astype(np.float32)
    for call in range(4):  # op by op, then one sequence from the second call
        got, seen = _seen(model, x)
        assert got.flags.c_contiguous and np.shares_memory(got, seen[partition.node.name][1]), f"call {call}"
        assert np.array_equal(got, plain(x)), f"call {call}"
