"""The dense-chain provider (kuiper/numba_kernels/dense_chain.py) against float64 references."""

from __future__ import annotations

import numpy as np
import pytest

import kuiper
from kuiper.graph.providers import PARTITION_TYPE
from kuiper.numba_kernels import available, chains, dense_chain
from tests.conftest import param_text, write_model

pytestmark = pytest.mark.skipif(not available(), reason="numba is not installed")


def _sigmoid(v):
    return 1 / (1 + np.exp(-v))


def _gelu(v):
    from math import erf

    return 0.5 * v * (1 + np.vectorize(erf)(v / np.sqrt(2)))


# PNNX module -> its float64 math.
ACTIVATIONS = {
    "nn.ReLU": lambda v: np.maximum(v, 0),
    "nn.ReLU6": lambda v: np.clip(v, 0, 6),
    "nn.Sigmoid": _sigmoid,
    "nn.SiLU": lambda v: v * _sigmoid(v),
    "nn.Hardswish": lambda v: v * np.clip(v / 6 + 0.5, 0, 1),
    "nn.GELU": _gelu,
    None: lambda v: v,
}


def _chain(tmp_path, widths, activation, bias=True, also_return=None, seed=0, shape=None):
    """Linear layers widths[0] -> widths[1] -> ..., each followed by ``activation``; returns
    (model path, [(weight, bias)] per layer).  ``also_return``: a layer whose output is also a model output."""
    rng = np.random.default_rng(seed)
    declared = ",".join(map(str, shape or (1, widths[0])))
    lines, blobs, layers = [f"pnnx.Input in0 0 1 v0 #v0=({declared})f32"], {}, []
    value = "v0"
    for index, (n_in, n_out) in enumerate(zip(widths, widths[1:])):
        weight = rng.uniform(-1, 1, (n_out, n_in)).astype(np.float32)
        b = rng.uniform(-1, 1, n_out).astype(np.float32) if bias else None
        attrs = f"@weight=({n_out},{n_in})f32" + (f" @bias=({n_out})f32" if bias else "")
        lines.append(f"nn.Linear l{index} 1 1 {value} y{index} bias={bias} in_features={n_in} "
                     f"out_features={n_out} {attrs}")
        blobs[f"l{index}.weight"] = weight.tobytes()
        if bias:
            blobs[f"l{index}.bias"] = b.tobytes()
        value = f"y{index}"
        if activation is not None:
            lines.append(f"{activation} a{index} 1 1 {value} z{index}")
            value = f"z{index}"
        layers.append((weight, b))
        if index == also_return:
            lines.append(f"pnnx.Output extra 1 0 {value}")
    lines.append(f"pnnx.Output out0 1 0 {value}")
    return write_model(tmp_path, param_text("\n".join(lines)), blobs, name=f"chain{seed}"), layers


def _reference(x, layers, activation):
    values, value = [], x.astype(np.float64)
    for weight, bias in layers:
        with np.errstate(invalid="ignore"):  # inf * 0 in the NaN test: NaN, as the kernel must give
            value = value @ weight.T.astype(np.float64) + (0 if bias is None else bias.astype(np.float64))
        value = ACTIVATIONS[activation](value)
        values.append(value)
    return values


def _partitions(model):
    return [step for step in model.steps if step.node.type == PARTITION_TYPE]


@pytest.mark.parametrize("activation", list(ACTIVATIONS), ids=str)
@pytest.mark.parametrize("shape", [(1, 5), (4, 5), (2, 3, 5)], ids=str)
def test_a_chain_runs_as_one_partition_and_matches_float64(tmp_path, activation, shape, kernel_variant):
    path, layers = _chain(tmp_path, [5, 7, 16, 3], activation, shape=shape)
    model = kuiper.load(path)
    (partition,) = _partitions(model)
    assert partition.node.params["members"] == ["l0", "l1", "l2"]
    assert isinstance(partition.op, dense_chain.DenseChain)
    x = np.random.default_rng(1).uniform(-3, 3, shape).astype(np.float32)
    np.testing.assert_allclose(model(x), _reference(x, layers, activation)[-1], rtol=2e-5, atol=2e-6)


def test_layers_without_bias(tmp_path):
    path, layers = _chain(tmp_path, [6, 6, 6], "nn.ReLU", bias=False)
    model = kuiper.load(path)
    assert len(_partitions(model)) == 1
    x = np.random.default_rng(2).uniform(-1, 1, (3, 6)).astype(np.float32)
    np.testing.assert_allclose(model(x), _reference(x, layers, "nn.ReLU")[-1], rtol=2e-5, atol=2e-6)


def test_a_layer_output_also_returned_ends_the_partition_there(tmp_path):
    path, layers = _chain(tmp_path, [4, 8, 8, 2], "nn.ReLU", also_return=0)
    model = kuiper.load(path)
    partitions = _partitions(model)
    assert [p.node.params["members"] for p in partitions] == [["l1", "l2"]]  # l0 alone keeps its op
    x = np.random.default_rng(3).uniform(-1, 1, (2, 4)).astype(np.float32)
    values = _reference(x, layers, "nn.ReLU")
    extra, out = model(x)
    np.testing.assert_allclose(extra, values[0], rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(out, values[-1], rtol=2e-5, atol=2e-6)


def test_nan_and_infinity_reach_the_outputs_they_influence_and_no_others(tmp_path):
    path, layers = _chain(tmp_path, [4, 8, 3], "nn.ReLU")
    model = kuiper.load(path)
    x = np.random.default_rng(4).uniform(-1, 1, (4, 4)).astype(np.float32)
    x[1, 2] = np.nan
    x[2, 0] = np.inf
    got = model(x)
    want = _reference(x, layers, "nn.ReLU")[-1]
    assert np.isnan(got[1]).all() and np.isfinite(got[[0, 3]]).all()
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)  # NaN where the reference has NaN, inf as inf


def test_large_calls_and_other_dtypes_take_the_layers_own_path(tmp_path, monkeypatch):
    path, layers = _chain(tmp_path, [5, 7, 3], "nn.SiLU")
    model = kuiper.load(path)
    x = np.random.default_rng(5).uniform(-1, 1, (6, 5)).astype(np.float32)
    compiled = model(x)
    monkeypatch.setattr(chains, "LAYER_CALL_WORK", 0)
    calls = []
    monkeypatch.setattr(dense_chain.DenseChain, "run_members", lambda self, *a: calls.append(1) or
                        dense_chain.Partition.run_members(self, *a))
    by_ops = model(x)
    assert calls, "above LAYER_CALL_WORK the layers run op by op"
    np.testing.assert_allclose(by_ops, compiled, rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(by_ops, _reference(x, layers, "nn.SiLU")[-1], rtol=2e-5, atol=2e-6)


def test_without_providers_the_layers_are_steps_of_their_own(tmp_path):
    path, layers = _chain(tmp_path, [5, 7, 3], "nn.ReLU")
    model = kuiper.load(path, providers=False)
    assert not _partitions(model)
    x = np.random.default_rng(6).uniform(-1, 1, (2, 5)).astype(np.float32)
    np.testing.assert_allclose(model(x), _reference(x, layers, "nn.ReLU")[-1], rtol=2e-5, atol=2e-6)


def test_an_activation_the_kernel_has_not_ends_the_chain(tmp_path):
    path, _ = _chain(tmp_path, [5, 7, 3], "nn.Tanh")
    model = kuiper.load(path)
    assert not _partitions(model)  # tanh is not a post-op the chain runs: each Linear keeps its own path


def _feed_forward(tmp_path, residual_shape, relu_after=False, residual_is_input=False):
    """x -> Linear(6, 12) -> ReLU -> Linear(12, 6) -> + r (-> ReLU): a transformer's feed-forward block."""
    rng = np.random.default_rng(7)
    w0, b0 = rng.uniform(-1, 1, (12, 6)).astype(np.float32), rng.uniform(-1, 1, 12).astype(np.float32)
    w1, b1 = rng.uniform(-1, 1, (6, 12)).astype(np.float32), rng.uniform(-1, 1, 6).astype(np.float32)
    residual = "x" if residual_is_input else "r"
    lines = ["pnnx.Input in0 0 1 x #x=(1,6)f32"]
    if not residual_is_input:
        lines.append(f"pnnx.Input in1 0 1 r #r=({','.join(map(str, residual_shape))})f32")
    lines += ["nn.Linear l0 1 1 x y0 bias=True in_features=6 out_features=12 @weight=(12,6)f32 @bias=(12)f32",
              "nn.ReLU a0 1 1 y0 z0",
              "nn.Linear l1 1 1 z0 y1 bias=True in_features=12 out_features=6 @weight=(6,12)f32 @bias=(6)f32",
              f"pnnx.Expression s 2 1 y1 {residual} s expr=add(@0,@1)"]
    lines += ["nn.ReLU a1 1 1 s out", "pnnx.Output out0 1 0 out"] if relu_after else ["pnnx.Output out0 1 0 s"]
    blobs = {"l0.weight": w0.tobytes(), "l0.bias": b0.tobytes(), "l1.weight": w1.tobytes(), "l1.bias": b1.tobytes()}
    path = write_model(tmp_path, param_text("\n".join(lines)), blobs, name=f"ffn{next(_NAMES)}")

    def reference(x, r):
        hidden = np.maximum(x.astype(np.float64) @ w0.T + b0, 0)
        total = hidden @ w1.T + b1 + r
        return np.maximum(total, 0) if relu_after else total

    return path, reference


_NAMES = iter(range(1000))


@pytest.mark.parametrize("relu_after", [False, True])
def test_a_feed_forward_block_with_its_residual_is_one_partition(tmp_path, relu_after):
    path, reference = _feed_forward(tmp_path, (1, 6), relu_after)
    model = kuiper.load(path)
    (partition,) = _partitions(model)
    assert partition.node.params["members"][0] == "l0" and partition.op.residual_at == 1
    rng = np.random.default_rng(8)
    x, r = rng.uniform(-1, 1, (5, 6)).astype(np.float32), rng.uniform(-1, 1, (5, 6)).astype(np.float32)
    np.testing.assert_allclose(model(x, r), reference(x, r), rtol=2e-5, atol=2e-6)


def test_the_residual_may_be_the_chains_own_input(tmp_path):
    path, reference = _feed_forward(tmp_path, None, residual_is_input=True)
    model = kuiper.load(path)
    (partition,) = _partitions(model)
    assert partition.node.inputs == ["x"]
    x = np.random.default_rng(9).uniform(-1, 1, (3, 6)).astype(np.float32)
    np.testing.assert_allclose(model(x), reference(x, x), rtol=2e-5, atol=2e-6)


def test_a_residual_that_broadcasts_takes_the_layers_own_path(tmp_path):
    path, reference = _feed_forward(tmp_path, (1, 6))
    model = kuiper.load(path)
    rng = np.random.default_rng(10)
    x, r = rng.uniform(-1, 1, (4, 6)).astype(np.float32), rng.uniform(-1, 1, (1, 6)).astype(np.float32)
    np.testing.assert_allclose(model(x, r), reference(x, r), rtol=2e-5, atol=2e-6)


def test_a_steady_call_allocates_its_output_and_nothing_else(tmp_path):
    """The values between layers come from buffers kept between calls (scratch.py), as a replayed call needs."""
    import tracemalloc

    path, _ = _chain(tmp_path, [32, 32, 32, 32], "nn.ReLU")
    model = kuiper.load(path)
    x = np.random.default_rng(11).uniform(-1, 1, (128, 32)).astype(np.float32)  # 128 x 32 x 32: LAYER_CALL_WORK
    model(x)
    model(x)  # warm: the buffers exist
    output_bytes = 128 * 32 * 4
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        kept = model(x)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert kept.nbytes == output_bytes
    # Two intermediate buffers would be another 32 KB; a few KB of Python objects are allowed.
    assert peak - before < output_bytes + 16 * 1024, peak - before
