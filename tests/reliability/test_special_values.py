"""NaN and +-inf on every fast path, as IEEE 754 and PyTorch give them (issue 49).

Each small model runs on three engines: the default one (oneDNN with its post-ops, the compiled
kernels, fusion), the compiled kernels without oneDNN (Winograd, im2col, Numba epilogues), and
the reference ops alone (``KUIPER_NUMBA=0``, ``fuse=False``).  Fed NaN, +inf and -inf at chosen
and random positions, and values large enough to overflow float32 sums, the fast engines must put
NaN, +inf and -inf exactly where the reference does, and agree with it elsewhere.  The reference
itself is checked against float64 NumPy written here (masked attention rows computed one by one,
ReLU as ``where(x < 0, 0, x)``, which keeps NaN), and against IEEE cases worked out by hand.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import kuiper
from kuiper import onednn, plugins

from conftest import param_text, write_model

pytest.importorskip("numba")
from kuiper.numba_kernels import runtime  # noqa: E402  (needs numba)

RNG = np.random.default_rng(49)


def _normal(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def _conv(name, source, target, cin, cout, kind="nn.Conv2d", extra=""):
    """A 3x3 (or 3-tap) conv line with padding 1 and its weights."""
    spatial = 1 if kind == "nn.Conv1d" else 2
    kernel, pads = f"({','.join(['3'] * spatial)})", f"({','.join(['1'] * spatial)})"
    shape = (cin, cout) if kind == "nn.ConvTranspose2d" else (cout, cin)
    shape += (3,) * spatial
    line = (f"{kind} {name} 1 1 {source} {target} bias=True kernel_size={kernel} in_channels={cin} "
            f"out_channels={cout} padding={pads} {extra} @weight=({','.join(map(str, shape))})f32 @bias=({cout})f32")
    return line, {f"{name}.weight": _normal(*shape, scale=0.1), f"{name}.bias": _normal(cout)}


RELU = "nn.ReLU r 1 1 a y"
ACTIVATIONS = {"relu": RELU, "relu6": "nn.ReLU6 r 1 1 a y",
               "hardtanh": "nn.Hardtanh r 1 1 a y max_val=1.0 min_val=-1.0", "silu": "nn.SiLU r 1 1 a y"}
MODELS: dict[str, tuple] = {}  # name: (input shape, lines, weights)

# 32 channels at 28x28: oneDNN's blocked kernels, or Winograd; 12 at 20x20: oneDNN's plain GEMM conv;
# 4 at 10x10: the small-conv paths.
for _c, _o, _h in ((32, 64, 28), (12, 24, 20), (4, 8, 10)):
    _line, _weights = _conv("c", "x", "a", _c, _o)
    for _act, _spelling in ACTIVATIONS.items():
        MODELS[f"conv{_c}_{_act}"] = ((1, _c, _h, _h), [_line, _spelling], _weights)
    _second, _more = _conv("d", "a", "b", _o, _o)
    MODELS[f"conv{_c}_residual_relu"] = ((1, _c, _h, _h), [_line, _second, "pnnx.Expression e 2 1 b a s expr=add(@0,@1)",
                                                             "nn.ReLU r 1 1 s y"], {**_weights, **_more})
    MODELS[f"conv{_c}_maxpool"] = ((1, _c, _h, _h), [_line, "nn.MaxPool2d p 1 1 a y kernel_size=(2,2) stride=(2,2)"],
                                   _weights)
_line, _weights = _conv("c", "x", "a", 16, 32, kind="nn.Conv1d")
MODELS["conv1d_relu"] = ((1, 16, 200), [_line, RELU], _weights)
_line, _weights = _conv("c", "x", "a", 32, 32, kind="nn.ConvTranspose2d", extra="output_padding=(0,0) stride=(1,1)")
MODELS["conv_transpose_relu"] = ((1, 32, 16, 16), [_line, RELU], _weights)
for _rows in (4, 64):  # NumPy's BLAS, then oneDNN's matmul with its post-ops
    for _act in ("relu", "relu6"):
        MODELS[f"linear{_rows}_{_act}"] = (
            (_rows, 512), ["nn.Linear l 1 1 x a bias=True in_features=512 out_features=256 @weight=(256,512)f32 "
                           "@bias=(256)f32", ACTIVATIONS[_act]], {"l.weight": _normal(256, 512, scale=0.05), "l.bias": _normal(256)})
MODELS["maxpool"] = ((2, 16, 32, 32), ["nn.MaxPool2d p 1 1 x y kernel_size=(2,2) stride=(2,2)"], {})
MODELS["chain"] = ((4, 4096), ["pnnx.Expression e 1 1 x y expr=sub(mul(add(@0,1.0),2.0),mul(@0,2.0))"], {})
MODELS["layernorm"] = ((8, 8, 768), ["nn.LayerNorm n 1 1 x y elementwise_affine=True eps=1e-05 normalized_shape=(768) "
                                     "@weight=(768)f32 @bias=(768)f32"], {"n.weight": _normal(768), "n.bias": _normal(768)})
MODELS["instancenorm"] = ((2, 32, 16, 16), ["nn.InstanceNorm2d n 1 1 x y affine=False eps=1e-05 num_features=32 "
                                            "track_running_stats=False"], {})
MODELS["softmax"] = ((64, 256), ["F.softmax s 1 1 x y dim=-1"], {})
MODELS["causal_attention"] = ((1, 4, 256, 32), ["F.scaled_dot_product_attention a 3 1 x x x y attn_mask=None "
                                                "dropout_p=0.0 is_causal=True"], {})

# A 1x1 depthwise conv by ones, then a ReLU: relu(x) exactly (a dense identity would multiply each NaN by the
# zeros of the other channels, which IEEE makes NaN), on oneDNN with a post-op.
IDENTITY = ("nn.Conv2d c 1 1 x a bias=False kernel_size=(1,1) in_channels=32 out_channels=32 groups=32 "
            "@weight=(32,1,1,1)f32")
MODELS["identity_conv_relu"] = ((1, 32, 56, 56), [IDENTITY, RELU], {"c.weight": np.ones((32, 1, 1, 1), np.float32)})
MODELS["identity_conv_relu6"] = ((1, 32, 56, 56), [IDENTITY, ACTIVATIONS["relu6"]],
                                 {"c.weight": np.ones((32, 1, 1, 1), np.float32)})

# The models tools/make_special_value_references.py has PyTorch's answers for.
PYTORCH_MODELS = tuple(MODELS)

# Runs the execution providers compile whole (kuiper/numba_kernels/conv_chain.py, dense_chain.py): held to
# the reference like every other fast path.
_first, _w1 = _conv("c", "x", "a", 4, 8)
_second, _w2 = _conv("d", "z", "b", 8, 8)
MODELS["conv_chain_relu"] = ((1, 4, 10, 10), [_first, "nn.ReLU r1 1 1 a z", _second, "nn.ReLU r2 1 1 b y"],
                             {**_w1, **_w2})
_strided, _w3 = _conv("c", "x", "a", 4, 8, extra="stride=(2,2)")
MODELS["conv_chain_stride2_relu6"] = ((1, 4, 10, 10), [_strided, "nn.ReLU6 r1 1 1 a z", _second, "nn.ReLU6 r2 1 1 b y"],
                                      {**_w3, **_w2})
_block, _w4 = _conv("d", "z", "b", 8, 4)
MODELS["conv_chain_residual_relu"] = ((1, 4, 10, 10), [_first, "nn.ReLU r1 1 1 a z", _block,
                                                        "pnnx.Expression e 2 1 b x s expr=add(@0,@1)",
                                                        "nn.ReLU r2 1 1 s y"], {**_w1, **_w4})
_DENSE = "nn.Linear {name} 1 1 {source} {target} bias=True in_features={n} out_features={m} @weight=({m},{n})f32 @bias=({m})f32"
MODELS["dense_chain_relu"] = ((4, 64), [_DENSE.format(name="l", source="x", target="a", n=64, m=64), "nn.ReLU r1 1 1 a z",
                                        _DENSE.format(name="k", source="z", target="b", n=64, m=32), "nn.ReLU6 r2 1 1 b y"],
                              {"l.weight": _normal(64, 64, scale=0.1), "l.bias": _normal(64),
                               "k.weight": _normal(32, 64, scale=0.1), "k.bias": _normal(32)})
MODELS["dense_chain_residual"] = ((4, 64), [_DENSE.format(name="l", source="x", target="a", n=64, m=128),
                                            "nn.GELU g 1 1 a z", _DENSE.format(name="k", source="z", target="b", n=128, m=64),
                                            "pnnx.Expression e 2 1 b x y expr=add(@0,@1)"],
                                  {"l.weight": _normal(128, 64, scale=0.1), "l.bias": _normal(128),
                                   "k.weight": _normal(64, 128, scale=0.1), "k.bias": _normal(64)})
PROVIDER_MODELS = ("conv_chain_relu", "conv_chain_stride2_relu6", "conv_chain_residual_relu", "dense_chain_relu",
                   "dense_chain_residual")


def _plain_conv(name, source, target, cin, cout, kernel=3, pad=1, groups=1, extra=""):
    shape = (cout, cin // groups, kernel, kernel)
    line = (f"nn.Conv2d {name} 1 1 {source} {target} bias=True kernel_size=({kernel},{kernel}) in_channels={cin} "
            f"out_channels={cout} padding=({pad},{pad}) groups={groups} {extra} "
            f"@weight=({','.join(map(str, shape))})f32 @bias=({cout})f32")
    return line, {f"{name}.weight": _normal(*shape, scale=0.1), f"{name}.bias": _normal(cout)}


# More kernel overrides and fast paths, held to the reference only: other post-ops, the compiled depthwise and
# pointwise convs, pooling between oneDNN convs (blocked layouts), norms, recurrent cells, attention heads.
for _act, _spelling in (("gelu", "nn.GELU r 1 1 a y"), ("sigmoid", "nn.Sigmoid r 1 1 a y"),
                        ("hardswish", "nn.Hardswish r 1 1 a y")):
    _line, _weights = _plain_conv("c", "x", "a", 32, 64)
    MODELS[f"conv_{_act}"] = ((1, 32, 28, 28), [_line, _spelling], _weights)
_line, _weights = _plain_conv("c", "x", "a", 32, 32, groups=32)
MODELS["depthwise_relu6"] = ((2, 32, 56, 56), [_line, ACTIVATIONS["relu6"]], _weights)
_line, _weights = _plain_conv("c", "x", "a", 32, 64, kernel=1, pad=0)
MODELS["pointwise_relu"] = ((1, 32, 28, 28), [_line, RELU], _weights)
_line, _weights = _plain_conv("c", "x", "a", 32, 64)
_second, _more = _plain_conv("d", "p", "y", 64, 64)
for _pool in ("MaxPool2d", "AvgPool2d"):
    MODELS[f"conv_{_pool.lower()}_conv"] = ((1, 32, 56, 56), [
        _line, f"nn.{_pool} p 1 1 a p kernel_size=(3,3) stride=(2,2) padding=(1,1)", _second], {**_weights, **_more})
MODELS["adaptive_maxpool"] = ((2, 16, 32, 32), ["nn.AdaptiveMaxPool2d p 1 1 x y output_size=(3,3)"], {})
MODELS["batchnorm_relu"] = ((2, 16, 20, 20), [
    "nn.BatchNorm2d b 1 1 x a affine=True eps=1e-05 num_features=16 @running_mean=(16)f32 @running_var=(16)f32 "
    "@weight=(16)f32 @bias=(16)f32", RELU],
    {"b.running_mean": _normal(16), "b.running_var": np.abs(_normal(16)) + 0.5, "b.weight": _normal(16),
     "b.bias": _normal(16)})
MODELS["groupnorm"] = ((2, 32, 16, 16), ["nn.GroupNorm g 1 1 x y affine=True eps=1e-05 num_channels=32 num_groups=4 "
                                         "@weight=(32)f32 @bias=(32)f32"], {"g.weight": _normal(32), "g.bias": _normal(32)})
MODELS["softmax_wide"] = ((64, 1024), ["F.softmax s 1 1 x y dim=-1"], {})  # oneDNN's softmax
MODELS["linear_residual_relu"] = ((64, 256), [
    "nn.Linear l 1 1 x a bias=True in_features=256 out_features=256 @weight=(256,256)f32 @bias=(256)f32",
    "pnnx.Expression e 2 1 a x s expr=add(@0,@1)", "nn.ReLU r 1 1 s y"],
    {"l.weight": _normal(256, 256, scale=0.05), "l.bias": _normal(256)})
for _cell, _gates in (("GRU", 3), ("LSTM", 4)):
    MODELS[_cell.lower()] = ((2, 20, 32), [
        f"nn.{_cell} g 1 1 x y batch_first=True bias=True hidden_size=32 input_size=32 num_layers=1 "
        f"bidirectional=False @weight_ih_l0=({32 * _gates},32)f32 @weight_hh_l0=({32 * _gates},32)f32 "
        f"@bias_ih_l0=({32 * _gates})f32 @bias_hh_l0=({32 * _gates})f32"],
        {f"g.{key}": _normal(*shape, scale=0.2) for key, shape in (
            ("weight_ih_l0", (32 * _gates, 32)), ("weight_hh_l0", (32 * _gates, 32)), ("bias_ih_l0", (32 * _gates,)),
            ("bias_hh_l0", (32 * _gates,)))})
MODELS["multihead_attention"] = ((2, 64, 64), [
    "nn.MultiheadAttention a 1 1 x y batch_first=True embed_dim=64 num_heads=4 bias=True add_bias_kv=False "
    "add_zero_attn=False @in_proj_weight=(192,64)f32 @in_proj_bias=(192)f32 @out_proj.weight=(64,64)f32 "
    "@out_proj.bias=(64)f32"],
    {"a.in_proj_weight": _normal(192, 64, scale=0.1), "a.in_proj_bias": _normal(192),
     "a.out_proj.weight": _normal(64, 64, scale=0.1), "a.out_proj.bias": _normal(64)})


def _feeds(shape) -> list[tuple[str, np.ndarray]]:
    """(label, input): one and five special values, a whole plane of them, and huge finite values."""
    rng = np.random.default_rng(7)  # the same feeds on every engine
    x = rng.standard_normal(shape).astype(np.float32)
    feeds = []
    for value in (np.nan, np.inf, -np.inf):
        one = x.copy()
        one.flat[x.size // 3] = value
        five = x.copy()
        five.flat[rng.choice(x.size, 5, replace=False)] = value
        plane = x.copy()
        plane.reshape(shape[0], shape[1], -1)[0, 0] = value
        feeds += [(f"one {value}", one), (f"five {value}", five), (f"plane {value}", plane)]
    return feeds + [("huge 1e18", x * np.float32(1e18)), ("huge 1e37", x * np.float32(1e37))]


def _load(tmp_path, name: str, fuse: bool):
    shape, lines, weights = MODELS[name]
    body = "\n".join([f"pnnx.Input in0 0 1 x #x=({','.join(map(str, shape))})f32", *lines, "pnnx.Output out 1 0 y"])
    blobs = {key: np.asarray(value, "<f4").tobytes() for key, value in weights.items()}
    path = write_model(tmp_path, param_text(body), blobs or None, name=f"{name}_{fuse}")
    return kuiper.load(path, fuse=fuse)


def test_the_provider_models_run_as_partitions(tmp_path):
    """Not a vacuous pass: each model meant for a provider is claimed by it on the default engine."""
    for name in PROVIDER_MODELS:
        model = _load(tmp_path, name, True)
        assert [step.node.type for step in model.steps].count("Partition") == 1, name


def _outputs(tmp_path, name: str, fuse: bool) -> dict[str, np.ndarray]:
    model = _load(tmp_path, name, fuse)
    with np.errstate(all="ignore"):
        return {label: np.asarray(model(x), np.float64) for label, x in _feeds(MODELS[name][0])}


@pytest.fixture
def engine_switch(monkeypatch):
    """``switch(engine)``: build models from now on with 'reference' (no compiled kernels, no
    oneDNN), 'compiled' (no oneDNN) or 'default' kernels."""
    def switch(engine):
        monkeypatch.delenv(runtime.DISABLE_ENV, raising=False)
        monkeypatch.setattr(onednn, "library", ORIGINAL_LIBRARY)
        if engine == "reference":
            monkeypatch.setenv(runtime.DISABLE_ENV, "0")
        elif engine == "compiled":
            monkeypatch.setattr(onednn, "library", lambda: None)
        runtime.availability.cache_clear()
        plugins.reset_registries()

    yield switch
    monkeypatch.undo()
    runtime.availability.cache_clear()
    plugins.reset_registries()


ORIGINAL_LIBRARY = onednn.library


def assert_same_specials(got, want, where):
    """NaN, +inf and -inf at the same positions; the finite values close."""
    for kind in (np.isnan, np.isposinf, np.isneginf):
        mismatched = int(np.count_nonzero(kind(got) != kind(want)))
        assert mismatched == 0, (f"{where}: {kind.__name__} differs at {mismatched} positions "
                                 f"({int(np.count_nonzero(kind(got)))} against {int(np.count_nonzero(kind(want)))})")
    finite = np.isfinite(want)
    scale = max(1.0, float(np.max(np.abs(want[finite]), initial=0.0)))
    error = float(np.max(np.abs(got[finite] - want[finite]), initial=0.0))
    assert error <= 1e-3 * scale, f"{where}: max abs error {error:.3g} (scale {scale:.3g})"


@pytest.mark.parametrize("name", list(MODELS))
def test_fast_paths_put_nan_and_inf_where_the_reference_does(tmp_path, engine_switch, name):
    engine_switch("reference")
    want = _outputs(tmp_path, name, fuse=False)
    for engine in ("default", "compiled"):
        if engine == "default" and not onednn.available():
            continue
        engine_switch(engine)
        for fuse in (True, False):
            for label, got in _outputs(tmp_path, name, fuse).items():
                assert_same_specials(got, want[label], f"{name}, {engine}, fuse={fuse}, {label}")


# --- the reference against float64 NumPy -------------------------------------------------------------


def _relu(a):
    return np.where(a < 0, 0.0, a)  # NaN < 0 is False: NaN stays NaN, as in PyTorch


def _clamp(a, low, high):
    return np.where(a < low, low, np.where(a > high, high, a))


def _conv64(x, weight, bias):
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    height, width = x.shape[2] - 2, x.shape[3] - 2
    out = np.zeros((x.shape[0], weight.shape[0], height, width))
    for i in range(3):
        for j in range(3):
            out = out + np.einsum("oc,nchw->nohw", weight[:, :, i, j].astype(np.float64),
                                  x[:, :, i:i + height, j:j + width])
    return out + bias.astype(np.float64)[None, :, None, None]


def _causal_attention64(x):
    """Row by row over the keys each query may see: a later token cannot reach an earlier row."""
    x = x.astype(np.float64)
    out = np.empty_like(x)
    for i in range(x.shape[-2]):
        scores = x[..., i:i + 1, :] @ np.swapaxes(x[..., :i + 1, :], -1, -2) / np.sqrt(x.shape[-1])
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        out[..., i:i + 1, :] = weights / weights.sum(-1, keepdims=True) @ x[..., :i + 1, :]
    return out


def _layer_norm64(x, weight, bias):
    x = x.astype(np.float64)
    centered = x - x.mean(-1, keepdims=True)
    return centered / np.sqrt((centered ** 2).mean(-1, keepdims=True) + 1e-5) * weight + bias


def _weights(name):
    return MODELS[name][2]


FLOAT64 = {
    "conv32_relu": lambda x: _relu(_conv64(x, _weights("conv32_relu")["c.weight"], _weights("conv32_relu")["c.bias"])),
    "conv12_relu6": lambda x: _clamp(_conv64(x, _weights("conv12_relu6")["c.weight"],
                                             _weights("conv12_relu6")["c.bias"]), 0, 6),
    "conv4_hardtanh": lambda x: _clamp(_conv64(x, _weights("conv4_hardtanh")["c.weight"],
                                               _weights("conv4_hardtanh")["c.bias"]), -1, 1),
    "linear64_relu": lambda x: _relu(x.astype(np.float64) @ _weights("linear64_relu")["l.weight"].T.astype(np.float64)
                                     + _weights("linear64_relu")["l.bias"]),
    "causal_attention": _causal_attention64,
    "layernorm": lambda x: _layer_norm64(x, _weights("layernorm")["n.weight"], _weights("layernorm")["n.bias"]),
    "instancenorm": lambda x: _layer_norm64(x.reshape(2, 32, 256), 1.0, 0.0).reshape(x.shape),
}


@pytest.mark.parametrize("name", list(FLOAT64))
def test_the_reference_follows_ieee_as_float64_numpy_does(tmp_path, engine_switch, name):
    """The reference ops against float64 NumPy, which follows IEEE 754.  Huge inputs are left out where
    float32's range itself overflows (attention's products) and kept for the norms, whose statistics
    are float64 by kuiper's rule (docs/reliability.md)."""
    engine_switch("reference")
    outputs = _outputs(tmp_path, name, fuse=False)
    for label, x in _feeds(MODELS[name][0]):
        if label.startswith("huge") and not name.endswith("norm"):
            continue
        with np.errstate(all="ignore"):
            want = FLOAT64[name](x)
        assert_same_specials(outputs[label], want, f"{name}, {label}")


def test_a_causal_model_keeps_rows_before_a_nan_token_clean(tmp_path, engine_switch):
    """PyTorch's causal attention: a NaN at token t reaches rows t and later of its head, never rows before it."""
    x = np.random.default_rng(3).standard_normal(MODELS["causal_attention"][0]).astype(np.float32)
    x[0, 0, 40, 5] = np.nan
    for engine in ("reference", "compiled", "default"):
        engine_switch(engine)
        out = np.asarray(_load(tmp_path, "causal_attention", fuse=True)(x))
        assert not np.isnan(out[0, 0, :40]).any(), engine
        assert np.isnan(out[0, 0, 40:]).all(), engine
        assert not np.isnan(out[0, 1:]).any(), engine


@pytest.mark.parametrize("engine", ["default", "compiled", "reference"])
def test_hand_computed_ieee_cases(engine_switch, tmp_path, engine):
    """Cases worked out by hand: relu(NaN) = NaN, relu(-inf) = 0, relu(inf) = inf, relu6(+inf) = 6,
    relu6(NaN) = NaN; a max pool of a window of -inf is -inf, of a window with a NaN NaN;
    (inf + 1) * 2 - inf * 2 is NaN; a LayerNorm of rows of +-1e38 is (+-1) * weight + bias."""
    if engine == "default" and not onednn.available():
        pytest.skip(onednn.describe())
    engine_switch(engine)
    x = np.ones((1, 32, 56, 56), np.float32)
    x[0, :5, 0, 0] = [np.nan, -np.inf, np.inf, -2.0, 7.0]
    relu = np.asarray(_load(tmp_path, "identity_conv_relu", fuse=True)(x))[0, :5, 0, 0]
    np.testing.assert_array_equal(relu, [np.nan, 0.0, np.inf, 0.0, 7.0])
    relu6 = np.asarray(_load(tmp_path, "identity_conv_relu6", fuse=True)(x))[0, :5, 0, 0]
    np.testing.assert_array_equal(relu6, [np.nan, 0.0, 6.0, 0.0, 6.0])

    x = np.zeros((2, 16, 32, 32), np.float32)
    x[0, 0, :2, :2] = -np.inf
    x[0, 1, :2, :2] = [[np.nan, 1.0], [2.0, 3.0]]
    pooled = np.asarray(_load(tmp_path, "maxpool", fuse=True)(x))
    assert pooled[0, 0, 0, 0] == -np.inf and np.isnan(pooled[0, 1, 0, 0]) and pooled[0, 2, 0, 0] == 0.0

    with np.errstate(all="ignore"):
        chain = np.asarray(_load(tmp_path, "chain", fuse=True)(np.full((4, 4096), np.inf, np.float32)))
    assert np.isnan(chain).all()

    rows = np.zeros((8, 8, 768), np.float32)
    rows[..., 0::2], rows[..., 1::2] = 1e38, -1e38
    weight, bias = _weights("layernorm")["n.weight"], _weights("layernorm")["n.bias"]
    expected = np.where(np.arange(768) % 2 == 0, 1.0, -1.0) * weight + bias
    np.testing.assert_allclose(np.asarray(_load(tmp_path, "layernorm", fuse=True)(rows))[3, 5], expected,
                               rtol=1e-4, atol=1e-4)


# --- against PyTorch ----------------------------------------------------------------------------------

PYTORCH = Path(__file__).parent.parent / "fixtures" / "special_values.npz"  # tools/make_special_value_references.py


@pytest.mark.parametrize("name", PYTORCH_MODELS)
def test_the_default_engine_puts_nan_and_inf_where_pytorch_does(tmp_path, engine_switch, name):
    """PyTorch 2.13's outputs on the same weights and feeds (huge ones left out: there the order of a
    float32 sum decides what overflows): its NaN, +inf and -inf positions, and a sample of its values."""
    engine_switch("default")
    saved = np.load(PYTORCH)
    outputs = _outputs(tmp_path, name, fuse=True)
    for label, got in outputs.items():
        if label.startswith("huge"):
            continue
        key = f"{name}|{label}"
        for kind in ("nan", "posinf", "neginf"):
            want = np.unpackbits(saved[f"{key}|{kind}"], count=got.size).astype(bool)
            found = getattr(np, f"is{kind}")(got.ravel())
            if name == "causal_attention" and kind == "nan":
                # PyTorch's CPU kernel works in blocks of keys and lets a NaN token reach the earlier rows
                # of its block (0 * NaN); its math kernel spreads it over every row.  kuiper keeps every
                # earlier row clean (the float64 test above): its NaNs are a subset of PyTorch's.
                want = found & want
            mismatched = int(np.count_nonzero(found != want))
            assert mismatched == 0, f"{key}: {kind} differs from PyTorch at {mismatched} of {int(want.sum())} positions"
        sample = saved[f"{key}|sample"].astype(np.float64)
        positions = np.random.default_rng(0).choice(got.size, sample.size, replace=False)
        finite = np.isfinite(sample)
        np.testing.assert_allclose(got.ravel()[positions][finite], sample[finite], rtol=1e-3, atol=1e-3, err_msg=key)
