"""The conv-chain provider (kuiper/numba_kernels/conv_chain.py) against float64 references."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import kuiper
from kuiper.graph.providers import PARTITION_TYPE
from kuiper.numba_kernels import available, chains, conv_chain
from tests.conftest import param_text, write_model

pytestmark = pytest.mark.skipif(not available(), reason="numba is not installed")

_NAMES = itertools.count()

ACTIVATIONS = {
    "nn.ReLU": lambda v: np.maximum(v, 0),
    "nn.ReLU6": lambda v: np.clip(v, 0, 6),
    "nn.SiLU": lambda v: v / (1 + np.exp(-v)),
    "nn.Hardswish": lambda v: v * np.clip(v / 6 + 0.5, 0, 1),
    None: lambda v: v,
}


def _conv64(x, weight, bias, padding, stride=1):
    """Cross-correlation in float64: x (N, C, H, W), weight (O, C, kh, kw), padding (ph, pw), one stride."""
    ph, pw = padding
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    kh, kw = weight.shape[2:]
    windows = np.lib.stride_tricks.sliding_window_view(padded, (kh, kw), axis=(2, 3))  # N, C, H', W', kh, kw
    with np.errstate(invalid="ignore"):
        out = np.einsum("nchwij,ocij->nohw", windows[:, :, ::stride, ::stride], weight.astype(np.float64))
    return out + (0 if bias is None else bias.astype(np.float64)[None, :, None, None])


def _chain(tmp_path, channels, kernels, paddings, activation, bias=True, shape=(1, 3, 8, 8), strides=None):
    """Conv2d layers channels[0] -> channels[1] -> ..., each followed by ``activation``."""
    rng = np.random.default_rng(len(channels) + sum(kernels))
    declared = ",".join("?" if d is None else str(d) for d in shape)
    lines, blobs, layers = [f"pnnx.Input in0 0 1 v0 #v0=({declared})f32"], {}, []
    value = "v0"
    strides = strides or [1] * len(kernels)
    for index, (c_in, c_out, k, p, st) in enumerate(zip(channels, channels[1:], kernels, paddings, strides)):
        weight = rng.uniform(-0.5, 0.5, (c_out, c_in, k, k)).astype(np.float32)
        b = rng.uniform(-0.5, 0.5, c_out).astype(np.float32) if bias else None
        attrs = f"@weight=({c_out},{c_in},{k},{k})f32" + (f" @bias=({c_out})f32" if bias else "")
        lines.append(f"nn.Conv2d c{index} 1 1 {value} y{index} bias={bias} dilation=(1,1) groups=1 in_channels={c_in} "
                     f"kernel_size=({k},{k}) out_channels={c_out} padding=({p},{p}) padding_mode=zeros "
                     f"stride=({st},{st}) "
                     f"{attrs}")
        blobs[f"c{index}.weight"] = weight.tobytes()
        if bias:
            blobs[f"c{index}.bias"] = b.tobytes()
        value = f"y{index}"
        if activation is not None:
            lines.append(f"{activation} a{index} 1 1 {value} z{index}")
            value = f"z{index}"
        layers.append((weight, b, (p, p), st))
    lines.append(f"pnnx.Output out0 1 0 {value}")
    path = write_model(tmp_path, param_text("\n".join(lines)), blobs, name=f"convs{next(_NAMES)}")

    def reference(x):
        value = x
        for weight, b, padding, stride in layers:
            value = ACTIVATIONS[activation](_conv64(value, weight, b, padding, stride))
        return value

    return path, reference


def _partitions(model):
    """The conv-chain partitions (a run of larger oneDNN convs is another provider's: conv_sequence.py)."""
    return [step for step in model.steps if step.node.type == PARTITION_TYPE
            and step.node.params["provider"] == "conv-chain"]


@pytest.mark.parametrize("activation", list(ACTIVATIONS), ids=str)
def test_a_chain_of_convolutions_is_one_partition_and_matches_float64(tmp_path, activation, kernel_variant):
    path, reference = _chain(tmp_path, [3, 8, 5, 4], [3, 1, 5], [1, 0, 1], activation, shape=(1, 3, None, None))
    model = kuiper.load(path)
    (partition,) = _partitions(model)
    assert isinstance(partition.op, conv_chain.ConvChain)
    assert partition.node.params["members"] == ["c0", "c1", "c2"]
    for shape in [(1, 3, 8, 8), (3, 3, 7, 10)]:  # batches and image sizes other than the exported one
        x = np.random.default_rng(1).uniform(-2, 2, shape).astype(np.float32)
        want = reference(x)
        np.testing.assert_allclose(model(x), want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_without_bias_and_with_valid_convolutions_that_shrink_the_image(tmp_path):
    path, reference = _chain(tmp_path, [2, 4, 4], [3, 3], [0, 0], "nn.ReLU", bias=False, shape=(1, 2, 8, 8))
    model = kuiper.load(path)
    assert len(_partitions(model)) == 1
    x = np.random.default_rng(2).uniform(-1, 1, (2, 2, 8, 8)).astype(np.float32)
    got = model(x)
    assert got.shape == (2, 4, 4, 4)
    np.testing.assert_allclose(got, reference(x), rtol=1e-5, atol=1e-6)


def test_nan_reaches_the_outputs_it_influences_and_no_others(tmp_path):
    path, reference = _chain(tmp_path, [1, 2, 2], [3, 3], [1, 1], "nn.ReLU", shape=(1, 1, 9, 9))
    model = kuiper.load(path)
    x = np.random.default_rng(3).uniform(-1, 1, (2, 1, 9, 9)).astype(np.float32)
    x[0, 0, 0, 0] = np.nan  # reaches a 5 x 5 corner through two 3 x 3 layers
    got, want = model(x), reference(x)
    assert np.isnan(got[0, :, :3, :3]).all() and not np.isnan(got[0, :, 3:, :]).any() and not np.isnan(got[1]).any()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_images_too_large_for_the_chain_take_the_layers_own_path(tmp_path, monkeypatch):
    path, reference = _chain(tmp_path, [3, 4, 4], [3, 3], [1, 1], "nn.ReLU")
    model = kuiper.load(path)
    x = np.random.default_rng(4).uniform(-1, 1, (1, 3, 8, 8)).astype(np.float32)
    compiled = model(x)
    monkeypatch.setattr(chains, "LAYER_CALL_WORK", 0)
    (partition,) = _partitions(model)
    partition.op._tables.clear()
    calls = []
    monkeypatch.setattr(conv_chain.ConvChain, "run_members",
                        lambda self, *a: calls.append(1) or conv_chain.Partition.run_members(self, *a))
    by_ops = model(x)
    assert calls
    np.testing.assert_allclose(by_ops, compiled, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(by_ops, reference(x), rtol=1e-5, atol=1e-6)


def test_a_residual_block_ends_with_its_sum(tmp_path):
    """conv -> relu -> conv -> + x -> relu: a ResNet basic block without its norms, one partition."""
    rng = np.random.default_rng(5)
    w0, w1 = (rng.uniform(-0.5, 0.5, (4, 4, 3, 3)).astype(np.float32) for _ in range(2))
    b0, b1 = (rng.uniform(-0.5, 0.5, 4).astype(np.float32) for _ in range(2))
    conv = ("bias=True dilation=(1,1) groups=1 in_channels=4 kernel_size=(3,3) out_channels=4 padding=(1,1) "
            "padding_mode=zeros stride=(1,1) @weight=(4,4,3,3)f32 @bias=(4)f32")
    text = param_text(f"""
        pnnx.Input in0 0 1 x #x=(1,4,6,6)f32
        nn.Conv2d c0 1 1 x y0 {conv}
        nn.ReLU a0 1 1 y0 z0
        nn.Conv2d c1 1 1 z0 y1 {conv}
        pnnx.Expression s 2 1 y1 x s expr=add(@0,@1)
        nn.ReLU a1 1 1 s out
        pnnx.Output out0 1 0 out
    """)
    blobs = {"c0.weight": w0.tobytes(), "c0.bias": b0.tobytes(), "c1.weight": w1.tobytes(), "c1.bias": b1.tobytes()}
    model = kuiper.load(write_model(tmp_path, text, blobs, name="block"))
    (partition,) = _partitions(model)
    assert partition.node.inputs == ["x"] and partition.op.residual_at == 0
    x = rng.uniform(-1, 1, (2, 4, 6, 6)).astype(np.float32)
    hidden = np.maximum(_conv64(x, w0, b0, (1, 1)), 0)
    want = np.maximum(_conv64(hidden, w1, b1, (1, 1)) + x, 0)
    np.testing.assert_allclose(model(x), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape", [(2, 3, 9, 8), (1, 3, 12, 13)], ids=str)
def test_strided_convolutions_downsample_in_the_chain(tmp_path, shape, kernel_variant):
    """The conv autoencoder's encoder: 3x3 stride-2 convolutions (odd and even sizes), then a stride-1 one."""
    path, reference = _chain(tmp_path, [3, 6, 8, 4], [3, 3, 3], [1, 1, 1], "nn.ReLU", shape=(1, 3, None, None),
                             strides=[2, 2, 1])
    model = kuiper.load(path)
    (partition,) = _partitions(model)
    x = np.random.default_rng(12).uniform(-1, 1, shape).astype(np.float32)
    want = reference(x)
    got = model(x)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("stride, groups", [((2, 1), 1), ((1, 1), 2)], ids=["uneven stride", "grouped"])
def test_grouped_or_unevenly_strided_convolutions_are_not_claimed(tmp_path, stride, groups):
    conv = (f"bias=False dilation=(1,1) in_channels=4 kernel_size=(3,3) out_channels=4 padding=(1,1) "
            f"padding_mode=zeros groups={groups} stride=({stride[0]},{stride[1]}) @weight=(4,{4 // groups},3,3)f32")
    text = param_text(f"""
        pnnx.Input in0 0 1 x #x=(1,4,8,8)f32
        nn.Conv2d c0 1 1 x y0 {conv}
        nn.Conv2d c1 1 1 y0 y1 {conv}
        pnnx.Output out0 1 0 y1
    """)
    weight = np.ones((4, 4 // groups, 3, 3), np.float32).tobytes()
    model = kuiper.load(write_model(tmp_path, text, {"c0.weight": weight, "c1.weight": weight}, name="excluded"))
    assert not _partitions(model)


def test_convolutions_too_large_at_the_declared_image_size_are_not_claimed(tmp_path):
    """A claim whose calls would all run op by op would only hide its convolutions from the passes
    after it (native layouts between oneDNN convolutions)."""
    path, _ = _chain(tmp_path, [16, 16, 16], [3, 3], [1, 1], "nn.ReLU", shape=(1, 16, 64, 64))
    assert not _partitions(kuiper.load(path))
    path, _ = _chain(tmp_path, [16, 16, 16], [3, 3], [1, 1], "nn.ReLU", shape=(1, 16, 4, 4))
    assert len(_partitions(kuiper.load(path))) == 1


def test_calls_from_many_threads_at_once_each_get_their_own_result(tmp_path):
    """Each call takes its own scratch buffers (scratch.py): threads never write into each other's."""
    from concurrent.futures import ThreadPoolExecutor

    path, reference = _chain(tmp_path, [3, 8, 8, 4], [3, 3, 3], [1, 1, 1], "nn.ReLU")
    model = kuiper.load(path)
    assert len(_partitions(model)) == 1
    inputs = [np.random.default_rng(seed).uniform(-1, 1, (1, 3, 8, 8)).astype(np.float32) for seed in range(16)]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda x: [model(x) for _ in range(20)], inputs))
    for x, outputs in zip(inputs, results):
        want = reference(x)
        for got in outputs:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_steady_call_allocates_its_output_and_nothing_else(tmp_path):
    """The padded images between layers come from buffers kept between calls (scratch.py), as a replayed
    call needs: a warm call allocates the chain's output and a few KB of Python objects, no layer's."""
    import tracemalloc

    path, reference = _chain(tmp_path, [3, 8, 8, 8, 8], [3, 3, 3, 3], [1, 1, 1, 1], "nn.ReLU")
    model = kuiper.load(path)
    assert len(_partitions(model)) == 1
    x = np.random.default_rng(12).uniform(-1, 1, (1, 3, 8, 8)).astype(np.float32)
    model(x)
    model(x)  # warm: the buffers exist
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        kept = model(x)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    np.testing.assert_allclose(kept, reference(x), rtol=2e-5, atol=2e-5)
    # One intermediate and its padded image would be 5.2 KB more (all three 15.6 KB); what a warm call
    # allocates besides its output today (3.4 KB: its padded input, Python objects) is allowed.
    assert peak - before < kept.nbytes + 4096, peak - before
