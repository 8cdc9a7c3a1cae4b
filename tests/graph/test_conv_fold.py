"""Constant folding before fusion (kuiper/graph/constant_fold.py): which graphs fold, which must not,
and that results do not change.

The graphs are canonical ops built by hand (no frontend), shaped the way XLA writes a conv with
bias and ReLU: ``max(conv(x) + broadcast(bias), 0)``.  References: the same graph in float64
without fusion (so nothing is folded), and the JAX outputs saved for the HLO conv net.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import kuiper
from kuiper import onednn
from kuiper.graph import build
from kuiper.model_ir import ModelIR, OperandInfo, OpNode
from kuiper.numba_kernels import availability
from kuiper.numba_kernels.conv_post_ops import post_ops_for

HLO_FIXTURES = Path(__file__).parent.parent / "fixtures" / "hlo"
RNG = np.random.default_rng(27)
IN_CHANNELS, CHANNELS, SIZE = 4, 8, 10
OUT_SHAPE = (1, CHANNELS, SIZE, SIZE)
WEIGHT = RNG.standard_normal((CHANNELS, IN_CHANNELS, 3, 3)) / 6
BIAS = RNG.standard_normal(CHANNELS)
X = RNG.standard_normal((1, IN_CHANNELS, SIZE, SIZE))
CONV_PARAMS = {"spatial_dims": 2, "stride": [1, 1], "dilation": [1, 1], "groups": 1, "pads": [[1, 1], [1, 1]]}


def _elementwise(function: str, name: str, inputs: list[str], dtype: str) -> OpNode:
    return OpNode("Elementwise", name, inputs, [name],
                  {"function": function, "operand_dtypes": [dtype] * len(inputs), "dtype": dtype})


def _addend_ops(form: str, bias: np.ndarray) -> tuple[list[OpNode], dict[str, tuple]]:
    """Ops making operand 'addend' from ``bias`` (per channel unless the form says otherwise), and their shapes."""
    if form == "constant (1,C,1,1)":
        return [OpNode("Constant", "addend", [], ["addend"], attrs={"data": bias.reshape(1, -1, 1, 1)})], \
            {"addend": (1, CHANNELS, 1, 1)}
    if form == "constant (C,1,1)":
        return [OpNode("Constant", "addend", [], ["addend"], attrs={"data": bias.reshape(-1, 1, 1)})], \
            {"addend": (CHANNELS, 1, 1)}
    if form == "broadcast (C,) along dim 1":
        return [OpNode("Constant", "b", [], ["b"], attrs={"data": bias}),
                OpNode("Broadcast", "addend", ["b"], ["addend"], {"shape": list(OUT_SHAPE), "dims": [1]})], \
            {"b": (CHANNELS,), "addend": OUT_SHAPE}
    if form == "XLA's broadcast, reshape, broadcast":
        return [OpNode("Constant", "b", [], ["b"], attrs={"data": bias.reshape(1, -1, 1, 1)}),
                OpNode("Broadcast", "b1", ["b"], ["b1"], {"shape": [1, CHANNELS, 1, 1], "dims": [0, 1, 2, 3]}),
                OpNode("Reshape", "b2", ["b1"], ["b2"], {"shape": [1, CHANNELS]}),
                OpNode("Broadcast", "addend", ["b2"], ["addend"], {"shape": list(OUT_SHAPE), "dims": [0, 1]})], \
            {"b": (1, CHANNELS, 1, 1), "b1": (1, CHANNELS, 1, 1), "b2": (1, CHANNELS), "addend": OUT_SHAPE}
    if form == "varies along W":
        values = bias.reshape(1, -1, 1, 1) + np.arange(SIZE, dtype=bias.dtype)
        return [OpNode("Constant", "addend", [], ["addend"], attrs={"data": values})], {"addend": (1, CHANNELS, 1, SIZE)}
    raise ValueError(form)


def _values(dtype: str, integers: bool):
    """(weight, bias, x) in ``dtype``; whole numbers where ``integers``, so float64 computes them exactly."""
    if integers:
        return tuple(np.rint(value * scale).astype(dtype) for value, scale in ((WEIGHT, 6), (BIAS, 4), (X, 3)))
    return WEIGHT.astype(dtype), BIAS.astype(dtype), X.astype(dtype)


def _conv_bias_relu(form: str = "XLA's broadcast, reshape, broadcast", dtype: str = "float32", conv_bias: bool = False,
                    extra_outputs: tuple[str, ...] = (), second_reader: bool = False, integers: bool = False) -> ModelIR:
    """``max(conv(x) + addend, 0)`` in ``dtype``; the form 'input' makes the addend a model input."""
    weight, bias, _ = _values(dtype, integers)
    attrs = {"weight": weight} | ({"bias": bias[::-1].copy()} if conv_bias else {})
    ops = [OpNode("Conv", "conv", ["x"], ["conv"], dict(CONV_PARAMS), attrs)]
    shapes = {"x": X.shape, "conv": OUT_SHAPE, "add": OUT_SHAPE, "relu": OUT_SHAPE, "zero": (), "negated": OUT_SHAPE}
    inputs = ["x"]
    if form == "input":
        inputs.append("addend")
        shapes["addend"] = (1, CHANNELS, 1, 1)
    else:
        addend_ops, addend_shapes = _addend_ops(form, bias)
        ops += addend_ops
        shapes |= addend_shapes
    ops += [_elementwise("add", "add", ["conv", "addend"], dtype),
            OpNode("Constant", "zero", [], ["zero"], attrs={"data": np.zeros((), dtype)}),
            _elementwise("maximum", "relu", ["add", "zero"], dtype)]
    outputs = ["relu", *extra_outputs]
    if second_reader:
        ops.append(_elementwise("negate", "negated", ["conv"], dtype))
        outputs.append("negated")
    operands = {name: OperandInfo(name, shape, dtype) for name, shape in shapes.items()}
    return ModelIR(ops, operands, inputs, outputs, "test")


def _feeds(ir: ModelIR, dtype: str, integers: bool = False) -> list[np.ndarray]:
    _, bias, x = _values(dtype, integers)
    return [x] + ([bias.reshape(1, -1, 1, 1)] if "addend" in ir.inputs else [])


def _outputs(model, *feeds) -> list[np.ndarray]:
    got = model(*feeds, to_numpy=True)
    return list(got) if isinstance(got, (list, tuple)) else [got]


def _float64_unfused(**options) -> list[np.ndarray]:
    """The graph's outputs in float64 with fusion (and so folding) off: the reference."""
    ir = _conv_bias_relu(**(options | {"dtype": "float64"}))
    return _outputs(build(ir, backend="numpy", fuse=False), *_feeds(ir, "float64", options.get("integers", False)))


def _conv_step(model):
    (conv,) = [step for step in model.steps if step.node.type == "Conv"]
    return conv


def _assert_runs_on_onednn_with_relu(conv_step):
    """The conv's epilogue is oneDNN's ReLU post-op, and with the compiled kernels and oneDNN
    installed the conv runs there."""
    node = conv_step.node
    assert post_ops_for(node.params["epilogue"], node.params["epilogue_operand"]) == (("eltwise_relu", 0.0, 0.0),)
    if availability()[0] and onednn.available():
        assert conv_step.op.kernel_note.startswith("oneDNN") and "as oneDNN post-ops" in conv_step.op.kernel_note


def _op_names_run(model) -> set[str]:
    """The names of the graph's ops that its steps compute, fused or in an epilogue."""
    return {name for step in model.steps for name in
            [step.node.name, *step.node.params.get("members", []), *step.node.params.get("epilogue_members", [])]}


FOLDING_FORMS = ["constant (1,C,1,1)", "constant (C,1,1)", "broadcast (C,) along dim 1",
                 "XLA's broadcast, reshape, broadcast"]


@pytest.mark.parametrize("form", FOLDING_FORMS)
def test_a_per_channel_constant_add_becomes_the_conv_bias_and_zero_makes_relu(form):
    model = build(_conv_bias_relu(form), backend="numpy")
    assert [step.node.type for step in model.steps] == ["Conv"]  # the constants and the add are gone
    conv = _conv_step(model)
    np.testing.assert_array_equal(conv.node.attrs["bias"], BIAS.astype(np.float32))
    assert conv.node.params["epilogue_members"] == ["relu"]
    assert conv.node.inputs == ["x"]  # 0 is an IR constant now, not an input
    _assert_runs_on_onednn_with_relu(conv)
    (got,) = _outputs(model, X.astype(np.float32))
    np.testing.assert_allclose(got, _float64_unfused(form=form)[0], rtol=1e-5, atol=1e-5)


def test_the_constant_is_added_to_a_bias_the_conv_has():
    model = build(_conv_bias_relu(conv_bias=True), backend="numpy")
    bias = BIAS.astype(np.float32)
    np.testing.assert_array_equal(_conv_step(model).node.attrs["bias"], bias[::-1] + bias)
    (got,) = _outputs(model, X.astype(np.float32))
    np.testing.assert_allclose(got, _float64_unfused(conv_bias=True)[0], rtol=1e-5, atol=1e-5)


NOT_FOLDING = {
    "the conv's output is also a model output": dict(extra_outputs=("conv",)),
    "another op reads the conv's output": dict(second_reader=True),
    "the constant varies along W": dict(form="varies along W"),
    "an int32 conv and constant": dict(dtype="int32", integers=True),
    "the addend is a model input": dict(form="input"),
}


@pytest.mark.parametrize("case", list(NOT_FOLDING))
def test_adds_that_are_not_a_float32_per_channel_bias_stay_adds(case):
    options = NOT_FOLDING[case]
    ir = _conv_bias_relu(**options)
    model = build(ir, backend="numpy")
    conv = _conv_step(model)
    assert "bias" not in conv.node.attrs
    assert "add" in _op_names_run(model)
    got = _outputs(model, *_feeds(ir, options.get("dtype", "float32"), options.get("integers", False)))
    for value, expected in zip(got, _float64_unfused(**options), strict=True):
        if options.get("integers"):
            np.testing.assert_array_equal(value, expected)  # whole numbers: float64 is exact
        else:
            np.testing.assert_allclose(value, expected, rtol=1e-5, atol=1e-5)


def test_a_constant_of_higher_rank_than_the_tensor_stays_an_input():
    """max(x, zeros(1,1,1,1,1)) has rank 5: inlining the 0 would lose the result's leading dim."""
    ir = _conv_bias_relu()
    ir.ops[-2].attrs["data"] = np.zeros((1, 1, 1, 1, 1), np.float32)
    ir.operands["zero"].shape = ir.operands["relu"].shape = (1,) + OUT_SHAPE
    model = build(ir, backend="numpy")
    assert "zero" in _conv_step(model).node.inputs
    (got,) = _outputs(model, X.astype(np.float32))
    assert got.shape == (1,) + OUT_SHAPE
    np.testing.assert_allclose(got[0], _float64_unfused()[0], rtol=1e-5, atol=1e-5)


def test_the_hlo_conv_net_runs_each_conv_with_its_bias_and_relu_and_matches_jax():
    """JAX's conv net (tools/make_hlo_fixtures.py): four convs, each ``max(conv + broadcast bias, 0)``."""
    data = np.load(HLO_FIXTURES / "conv_net.npz")
    model = kuiper.load(HLO_FIXTURES / "conv_net.hlo.txt", backend="numpy", providers=False)
    assert [step.node.type for step in model.steps] == ["Conv"] * 4
    # The four biases, in file order as the convs are: f32[1,16,1,1] constants.
    biases = [node.attrs["data"].reshape(-1) for node in model.ir.ops
              if node.type == "Constant" and node.attrs["data"].shape == (1, 16, 1, 1)]
    assert len(biases) == 4
    for step, bias in zip(model.steps, biases):
        np.testing.assert_array_equal(step.node.attrs["bias"], bias)
        assert len(step.node.params["epilogue_members"]) == 1  # the ReLU alone: the add is the bias
        assert step.node.inputs[1:] == []  # and its 0 is an IR constant
        _assert_runs_on_onednn_with_relu(step)
    np.testing.assert_allclose(model(data["input0"], to_numpy=True), data["output0"], rtol=1e-4, atol=1e-5)
