"""A built model hands its convolutions' weights over to oneDNN (kuiper/graph/kept_weights.py), which frees
the arrays the file gave once it has them in its own layouts (the first call): the IR holds
``RemadeWeight``s that give the same bits, and every path that reads the weight as given (a new input shape,
the reference path for NaN inputs, a second build from the model's IR) computes what it computed before.
References: float64 NumPy, and the bits of a fresh model."""

from __future__ import annotations

import numpy as np
import pytest

import kuiper
from kuiper import onednn
from kuiper.errors import WeightDroppedError
from kuiper.frontends import load_ir
from kuiper.graph.kept_weights import drop_weights_no_step_reads
from kuiper.model_ir import DroppedWeight, ModelIR, OpNode, RemadeWeight

from conftest import memory_freed_ref, param_text, write_model

pytestmark = pytest.mark.skipif(not onednn.available(), reason=onednn.describe())

RNG = np.random.default_rng(41)
WIDE, SIDE = 48, 24
WEIGHTS = {
    "first.weight": (RNG.standard_normal((32, 3, 3, 3)) / 5).astype(np.float32),
    "first.bias": RNG.standard_normal(32).astype(np.float32),
    "second.weight": (RNG.standard_normal((WIDE, 32, 3, 3)) / 17).astype(np.float32),
    "second.bias": RNG.standard_normal(WIDE).astype(np.float32),
}
BODY = f"""
pnnx.Input in0 0 1 x #x=(1,3,?,?)f32
nn.Conv2d first 1 1 x y bias=True dilation=(1,1) groups=1 in_channels=3 kernel_size=(3,3) out_channels=32 padding=(1,1) padding_mode=zeros stride=(1,1) @bias=(32)f32 @weight=(32,3,3,3)f32
nn.ReLU relu 1 1 y z
nn.Conv2d second 1 1 z out bias=True dilation=(1,1) groups=1 in_channels=32 kernel_size=(3,3) out_channels={WIDE} padding=(1,1) padding_mode=zeros stride=(1,1) @bias=({WIDE})f32 @weight=({WIDE},32,3,3)f32
pnnx.Output output 1 0 out
"""


@pytest.fixture
def param(tmp_path):
    return write_model(tmp_path, param_text(BODY), {name: array.tobytes() for name, array in WEIGHTS.items()})


def _conv(x, weight, bias):
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))
    return np.einsum("nchwij,ocij->nohw", windows, weight.astype(np.float64)) + bias[:, None, None]


def _float64(x):
    y = np.maximum(_conv(x.astype(np.float64), WEIGHTS["first.weight"], WEIGHTS["first.bias"]), 0)
    return _conv(y, WEIGHTS["second.weight"], WEIGHTS["second.bias"])


def _image(side=SIDE, batch=1):
    return RNG.standard_normal((batch, 3, side, side)).astype(np.float32)


def _all_nodes(model):
    """The nodes of the model's steps, of its partitions' members and of its IR."""
    nodes = []
    for step in model.steps:
        nodes.append(step.node)
        nodes += [unit.node for unit in getattr(step.op, "members", ())]
    return nodes + list(model.ir.ops)


def test_the_first_call_frees_the_weight_the_file_gave(param):
    model = kuiper.load(param)
    remade = [node.attrs["weight"] for node in _all_nodes(model) if node.name == "second"]
    assert remade and all(isinstance(value, RemadeWeight) for value in remade)
    assert remade[0].shape == (WIDE, 32, 3, 3) and remade[0].dtype == np.float32
    given = np.asarray(remade[0])  # before the first call: the array the file gave, still held
    np.testing.assert_array_equal(given, WEIGHTS["second.weight"])
    freed = memory_freed_ref(given)
    del given
    model(_image())
    assert freed() is None, "the given weight of the 48-channel conv is still held after the first call"
    np.testing.assert_array_equal(np.asarray(remade[0]), WEIGHTS["second.weight"])  # remade: the same bits
    assert model.ir.parameter_count() == sum(array.size for array in WEIGHTS.values())


def test_calls_after_letting_go_give_the_bits_of_the_first_call(param):
    model = kuiper.load(param)
    x = _image()
    first = model(x)
    np.testing.assert_allclose(first, _float64(x), rtol=0, atol=3e-5)
    for _ in range(3):  # the memory plan's recording call and the planned ones
        np.testing.assert_array_equal(model(x), first)


def test_a_new_input_shape_after_letting_go_gives_what_a_fresh_model_gives(param):
    """The new shape's plan reorders the weight from the kept layout, not from the array let go."""
    model = kuiper.load(param)
    model(_image())
    x = _image(side=40, batch=2)
    got = model(x)
    np.testing.assert_array_equal(got, kuiper.load(param)(x))
    np.testing.assert_allclose(got, _float64(x), rtol=0, atol=3e-5)


def test_the_reference_path_reads_the_remade_weight(param):
    """An input holding NaN and infinity takes the reference path (IEEE 754's results, not oneDNN's), which
    then reads the weight remade from oneDNN's layout: the bits a fresh model's reference path gives."""
    model = kuiper.load(param)
    model(_image())
    assert all(isinstance(node.attrs["weight"], RemadeWeight) for node in _all_nodes(model) if node.name == "second")
    x = _image()
    x[0, 1, 5, 7], x[0, 2, 11, 3] = np.nan, np.inf
    got = model(x)
    np.testing.assert_array_equal(got, kuiper.load(param)(x))
    assert np.isnan(got).any() and np.isfinite(got).any()


def test_a_second_build_from_the_models_ir_gives_the_same_outputs(param):
    model = kuiper.load(param)
    x = _image()
    expected = model(x)
    again = kuiper.build(model.ir)
    np.testing.assert_array_equal(again(x), expected)


def test_the_ir_a_caller_builds_from_is_not_changed(param):
    ir = load_ir(param)
    model = kuiper.build(ir)
    model(_image())
    assert all(isinstance(value, np.ndarray) for node in ir.ops for value in node.attrs.values())
    assert any(isinstance(value, RemadeWeight) for node in model.ir.ops for value in node.attrs.values())


# -- a Linear: oneDNN packs its weight for products of many rows; NumPy's BLAS runs those of one row ----------

LINEAR_IN, LINEAR_OUT, TOKENS = 192, 576, 197
LINEAR_WEIGHT = (RNG.standard_normal((LINEAR_OUT, LINEAR_IN)) / 14).astype(np.float32)
LINEAR_BIAS = RNG.standard_normal(LINEAR_OUT).astype(np.float32)
LINEAR_BODY = f"""
pnnx.Input in0 0 1 x #x=(1,?,{LINEAR_IN})f32
nn.Linear fc 1 1 x out bias=True in_features={LINEAR_IN} out_features={LINEAR_OUT} @weight=({LINEAR_OUT},{LINEAR_IN})f32 @bias=({LINEAR_OUT})f32
pnnx.Output output 1 0 out
"""


@pytest.fixture
def linear_param(tmp_path):
    return write_model(tmp_path, param_text(LINEAR_BODY),
                       {"fc.weight": LINEAR_WEIGHT.tobytes(), "fc.bias": LINEAR_BIAS.tobytes()}, name="linear")


def _linear(x):
    return x.astype(np.float64) @ LINEAR_WEIGHT.T.astype(np.float64) + LINEAR_BIAS


def test_a_linear_packed_by_onednn_frees_its_given_weight_and_still_runs_one_row_on_blas(linear_param):
    model = kuiper.load(linear_param)
    (remade,) = {id(node.attrs["weight"]): node.attrs["weight"] for node in _all_nodes(model)}.values()
    assert isinstance(remade, RemadeWeight)
    freed = memory_freed_ref(np.asarray(remade))
    tokens = RNG.standard_normal((1, TOKENS, LINEAR_IN)).astype(np.float32)
    first = model(tokens)
    assert freed() is None, "the given Linear weight is still held after oneDNN packed it"
    np.testing.assert_allclose(first, _linear(tokens), rtol=0, atol=2e-5)
    np.testing.assert_array_equal(model(tokens), first)
    one_row = RNG.standard_normal((1, 1, LINEAR_IN)).astype(np.float32)  # NumPy's BLAS: W^T remade from the packing
    got = model(one_row)
    np.testing.assert_array_equal(got, kuiper.load(linear_param)(one_row))
    np.testing.assert_allclose(got, _linear(one_row), rtol=0, atol=2e-5)
    np.testing.assert_array_equal(np.asarray(remade), LINEAR_WEIGHT)


# -- nn.MultiheadAttention: its packed input projection and its output projection ------------------------------

EMBED, HEADS = 192, 4
MHA_WEIGHTS = {
    "attn.in_proj_weight": (RNG.standard_normal((3 * EMBED, EMBED)) / 14).astype(np.float32),
    "attn.in_proj_bias": RNG.standard_normal(3 * EMBED).astype(np.float32),
    "attn.out_proj.weight": (RNG.standard_normal((EMBED, EMBED)) / 14).astype(np.float32),
    "attn.out_proj.bias": RNG.standard_normal(EMBED).astype(np.float32),
}
MHA_BODY = f"""
pnnx.Input in0 0 1 x #x=(1,?,{EMBED})f32
nn.MultiheadAttention attn 1 1 x out add_bias_kv=False add_zero_attn=False batch_first=True bias=True embed_dim={EMBED} kdim={EMBED} num_heads={HEADS} vdim={EMBED} @in_proj_weight=({3 * EMBED},{EMBED})f32 @in_proj_bias=({3 * EMBED})f32 @out_proj.weight=({EMBED},{EMBED})f32 @out_proj.bias=({EMBED})f32
pnnx.Output output 1 0 out
"""


@pytest.fixture
def mha_param(tmp_path):
    return write_model(tmp_path, param_text(MHA_BODY), {name: array.tobytes() for name, array in MHA_WEIGHTS.items()},
                       name="mha")


def _mha(x):
    """Self-attention in float64, batch first, as nn.MultiheadAttention documents it."""
    w = {name.split(".", 1)[1]: array.astype(np.float64) for name, array in MHA_WEIGHTS.items()}
    q, k, v = np.split(x[0].astype(np.float64) @ w["in_proj_weight"].T + w["in_proj_bias"], 3, axis=-1)
    width = EMBED // HEADS
    heads = []
    for h in range(HEADS):
        cols = slice(h * width, (h + 1) * width)
        scores = q[:, cols] @ k[:, cols].T / np.sqrt(width)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        heads.append(scores / scores.sum(axis=-1, keepdims=True) @ v[:, cols])
    return (np.concatenate(heads, axis=-1) @ w["out_proj.weight"].T + w["out_proj.bias"])[None]


def test_multihead_attention_frees_its_projections_given_weights_and_still_runs_one_token(mha_param):
    model = kuiper.load(mha_param)
    node = next(node for node in _all_nodes(model) if node.name == "attn")
    remade = [node.attrs[key] for key in ("in_proj_weight", "out_proj.weight")]
    assert all(isinstance(value, RemadeWeight) for value in remade)
    freed = [memory_freed_ref(np.asarray(value)) for value in remade]
    tokens = RNG.standard_normal((1, 64, EMBED)).astype(np.float32)
    first = model(tokens)
    assert [ref() is None for ref in freed] == [True, True], "a projection's given weight is still held"
    np.testing.assert_allclose(first, _mha(tokens), rtol=0, atol=5e-5)
    np.testing.assert_array_equal(model(tokens), first)
    one = RNG.standard_normal((1, 1, EMBED)).astype(np.float32)  # NumPy's BLAS: the weights remade from oneDNN's
    got = model(one)
    np.testing.assert_array_equal(got, kuiper.load(mha_param)(one))
    np.testing.assert_allclose(got, _mha(one), rtol=0, atol=5e-5)
    np.testing.assert_array_equal(np.asarray(remade[0]), MHA_WEIGHTS["attn.in_proj_weight"])


# -- weights the build folded into others: the IR the model keeps drops the file's copy ---------------------

SCALE = RNG.uniform(0.5, 2.0, WIDE).astype(np.float32)
SCALED_BODY = f"""
pnnx.Input in0 0 1 x #x=(1,32,{SIDE},{SIDE})f32
nn.Conv2d second 1 1 x y bias=True dilation=(1,1) groups=1 in_channels=32 kernel_size=(3,3) out_channels={WIDE} padding=(1,1) padding_mode=zeros stride=(1,1) @bias=({WIDE})f32 @weight=({WIDE},32,3,3)f32 #y=(1,{WIDE},{SIDE},{SIDE})f32
pnnx.Attribute scale 0 1 g @data=(1,{WIDE},1,1)f32 #g=(1,{WIDE},1,1)f32
pnnx.Expression mul 2 1 y g out expr=mul(@0,@1) #out=(1,{WIDE},{SIDE},{SIDE})f32
pnnx.Output output 1 0 out
"""


def test_a_weight_the_build_folded_into_another_is_dropped_from_the_ir_at_the_first_call(tmp_path):
    """The per-channel scale folds into the conv (kuiper/graph/constant_fold.py): the steps read a new weight,
    and the file's, which only the model's IR held, goes at the first call."""
    param = write_model(tmp_path, param_text(SCALED_BODY), {
        "second.weight": WEIGHTS["second.weight"].tobytes(), "second.bias": WEIGHTS["second.bias"].tobytes(),
        "scale.data": SCALE.tobytes()}, name="scaled")
    model = kuiper.load(param)
    (conv,) = [node for node in model.ir.ops if node.name == "second"]
    given = conv.attrs["weight"]
    assert isinstance(given, np.ndarray)  # before the first call, the IR still gives it
    np.testing.assert_array_equal(given, WEIGHTS["second.weight"])
    freed = memory_freed_ref(given)
    del given
    x = RNG.standard_normal((1, 32, SIDE, SIDE)).astype(np.float32)
    expected = (_conv(x.astype(np.float64), WEIGHTS["second.weight"], WEIGHTS["second.bias"])
                * SCALE[:, None, None])
    np.testing.assert_allclose(model(x), expected, rtol=0, atol=3e-5)
    assert freed() is None, "the file's weight, folded into the conv's, is still held after the first call"
    dropped = conv.attrs["weight"]
    assert isinstance(dropped, DroppedWeight) and dropped.shape == (WIDE, 32, 3, 3)
    with pytest.raises(WeightDroppedError, match="second.*load_ir"):
        np.asarray(dropped)
    assert model.ir.parameter_count() == WEIGHTS["second.weight"].size + WIDE + WIDE
    np.testing.assert_allclose(model(x), expected, rtol=0, atol=3e-5)
    with pytest.raises(WeightDroppedError, match="second"):
        kuiper.build(model.ir)  # the IR no longer holds the file's weight: load_ir reads it


def test_an_array_that_something_else_holds_stays_in_the_ir():
    """Dropping frees memory only where the IR alone holds the array: an op's own reference (a compiled
    chain's constant) keeps it, and then so does the IR."""
    held_by_an_op = RNG.standard_normal((8, 8)).astype(np.float32)
    ir = ModelIR(ops=[OpNode("Constant", "a", [], ["a"], attrs={"data": held_by_an_op}),
                      OpNode("Constant", "b", [], ["b"], attrs={"data": RNG.standard_normal((8, 8)).astype(np.float32)}),
                      OpNode("Constant", "c", [], ["c"], attrs={"data": RNG.standard_normal(8).astype(np.float32)[2:]})],
                 operands={})
    drop_weights_no_step_reads([], ir)
    assert [type(node.attrs["data"]).__name__ for node in ir.ops] == ["ndarray", "DroppedWeight", "DroppedWeight"]
    assert ir.parameter_count() == 64 + 64 + 6
