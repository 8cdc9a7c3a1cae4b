"""The PNNX frontend's translation table: PNNX spellings -> the canonical op set."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kuiper
from kuiper.cli import main
from kuiper.errors import UnsupportedOperatorError
from kuiper.formats.pnnx import load_pnnx
from kuiper.formats.pnnx_ops import PNNX_OPS, pnnx_spellings, translate
from kuiper.formats.pnnx_param_names import KNOWN_PARAMS
from kuiper.model_ir import OpNode
from kuiper.plugins import op_registry

from conftest import pnnx_node, write_model

# PNNX's own markers, which the frontend turns into the model's inputs and outputs, and its
# expression op, which the PNNX frontend registers under PNNX's name.
NOT_TRANSLATED = {"pnnx.Input", "pnnx.Output", "pnnx.Expression"}


def test_every_known_pnnx_type_translates_to_a_registered_canonical_op():
    registry = op_registry()
    for pnnx_type in set(KNOWN_PARAMS) - NOT_TRANSLATED:
        assert pnnx_type in PNNX_OPS, f"{pnnx_type} has no canonical op"
        canonical = PNNX_OPS[pnnx_type].canonical
        assert canonical in registry, f"{pnnx_type} -> {canonical}, which no plugin registers"
        assert registry[canonical].plugin == "builtin_ops"


def test_builtin_ops_declare_no_pnnx_spelling():
    pnnx_types = set(PNNX_OPS) | set(KNOWN_PARAMS)
    builtin = {t for t, r in op_registry().items() if r.plugin == "builtin_ops"}
    assert not builtin & pnnx_types


def test_every_spelling_is_listed_under_its_canonical_type():
    listed = pnnx_spellings()
    assert sorted(s for spellings in listed.values() for s in spellings) == sorted(PNNX_OPS)
    assert set(listed["ReLU"]) == {"nn.ReLU", "F.relu", "torch.relu"}
    assert set(listed["Transpose"]) == {"Tensor.permute", "torch.permute"}
    assert {"torch.cat", "torch.concat"} <= set(listed["Concat"])
    assert set(listed["Reshape"]) == {"Tensor.reshape", "Tensor.view"}
    assert set(listed["Reverse"]) == {"torch.flip", "Tensor.flip"}


@pytest.mark.parametrize("pnnx_type, canonical, params", [
    ("torch.mean", "Reduction", {"reduction": "mean"}),
    ("torch.prod", "Reduction", {"reduction": "prod"}),
    ("torch.amin", "Extremum", {"reduction": "min"}),
    ("torch.argmax", "ArgExtremum", {"reduction": "max"}),
    ("torch.std", "Variance", {"standard_deviation": True}),
    ("F.log_softmax", "Softmax", {"log": True}),
    ("nn.Softmin", "Softmax", {"negate": True}),
    ("nn.Softmax2d", "Softmax", {"dim": -3, "input_ranks": [3, 4]}),
    ("nn.GRU", "Recurrent", {"cell": "GRU"}),
    ("torch.bmm", "MatrixProduct", {"rank": 3}),
    ("torch.fft.irfft2", "FFT", {"transform": "irfft", "form": "2d"}),
    ("torch.logical_xor", "Logical", {"operation": "xor"}),
    ("torch.bitwise_left_shift", "Bitwise", {"operation": "lshift"}),
    ("torch.ge", "Compare", {"comparison": "ge"}),
    ("Tensor.addcdiv", "AddScaled", {"divide": True}),
    ("torch.cumprod", "CumulativeScan", {"reduction": "prod"}),
    ("Tensor.half", "Cast", {"dtype": "float16"}),
])
def test_a_spelling_that_carries_meaning_states_it_as_typed_params(pnnx_type, canonical, params):
    node = pnnx_node(pnnx_type, "op", ["x"], ["y"])
    assert node.type == canonical
    assert node.params == params


def test_instance_norm_modules_state_their_spatial_dims_and_constant_affine():
    for n in (1, 2, 3):
        node = pnnx_node(f"nn.InstanceNorm{n}d", "n", ["x"], ["y"], {"affine": True, "eps": 1e-5})
        assert (node.type, node.params["spatial_dims"], node.params["constant_affine"]) == ("InstanceNorm", n, True)
    functional = pnnx_node("F.instance_norm", "n", ["x"], ["y"], {"eps": 1e-5})
    assert functional.type == "InstanceNorm" and "spatial_dims" not in functional.params
    assert "constant_affine" not in functional.params
    # nn.BatchNorm's affine defaults to True in PyTorch, nn.LayerNorm's flag has another name
    assert pnnx_node("nn.BatchNorm2d", "b", ["x"], ["y"]).params["constant_affine"] is True
    layer = pnnx_node("nn.LayerNorm", "l", ["x"], ["y"], {"elementwise_affine": False})
    assert layer.params["constant_affine"] is False


def test_dtype_spellings_become_array_api_names():
    assert pnnx_node("Tensor.to", "c", ["x"], ["y"], {"dtype": "torch.long"}).params["dtype"] == "int64"
    assert pnnx_node("torch.arange", "a", [], ["y"], {"end": 3, "dtype": "torch.float"}).params["dtype"] == "float32"
    # an unknown spelling stays, for the op to reject by name
    assert pnnx_node("Tensor.to", "c", ["x"], ["y"], {"dtype": "torch.cfloat"}).params["dtype"] == "torch.cfloat"


def test_clamp_min_binds_its_bound_input_by_key():
    assert pnnx_node("aten::clamp_min", "c", ["x", "v"], ["y"]).input_keys == ["input", "min"]
    assert pnnx_node("aten::clamp_max", "c", ["v", "x"], ["y"], input_keys=[None, "input"]).input_keys == ["max", "input"]


def test_baddbmm_inputs_take_the_canonical_keys():
    node = pnnx_node("torch.baddbmm", "b", ["c", "p", "q"], ["y"], input_keys=["input", "batch1", "batch2"])
    assert (node.type, node.input_keys, node.params) == ("AddMatrixProduct", ["input", "mat1", "mat2"], {"batched": True})


def test_a_type_not_in_the_table_passes_through_unchanged():
    node = OpNode("models.yolo.Detect", "d", ["x"], ["y"], {"nc": 80}, source="m.pnnx.param:3")
    assert translate(node) is node
    assert translate(OpNode("pnnx.Expression", "e", ["x"], ["y"], {"expr": "@0"})).type == "pnnx.Expression"


def test_the_translated_node_still_names_its_pnnx_spelling_and_line():
    node = translate(OpNode("nn.Hardtanh", "h", ["x"], ["y"], {"min_val": -1.0}, source="m.pnnx.param:4"))
    assert node.describe() == "op 'h' of type Hardtanh (m.pnnx.param:4, PNNX nn.Hardtanh)"


def _chain_model(tmp_path, op_lines, weights=None):
    lines = ["pnnx.Input in 0 1 x", *op_lines, "pnnx.Output out 1 0 y"]
    return write_model(tmp_path, f"7767517\n{len(lines)} {len(lines) - 1}\n" + "\n".join(lines) + "\n", weights)


def test_a_plugin_op_with_a_pnnx_spelling_runs_beside_translated_ops(tmp_path):
    # kuiper-scaled-tanh registers example.layers.ScaledTanh under PNNX's spelling: alpha * tanh(beta * x)
    pytest.importorskip("kuiper_scaled_tanh", reason="the example plugin is not installed")
    alpha, beta = np.array([2.0, 0.5, 1.0], "<f4"), np.array([1.0, 3.0, -1.0], "<f4")
    path = _chain_model(tmp_path, ["nn.ReLU r 1 1 x a", "example.layers.ScaledTanh s 1 1 a y @alpha=(3)f32 @beta=(3)f32"],
                        {"s.alpha": alpha.tobytes(), "s.beta": beta.tobytes()})
    ir = load_pnnx(path)
    assert [op.type for op in ir.ops] == ["ReLU", "example.layers.ScaledTanh"]
    x = np.array([[-1.0, 0.5, 3.0]], dtype=np.float32)
    got = kuiper.to_numpy(kuiper.load(path)(x))
    want = [float(a) * math.tanh(float(b) * max(v, 0.0)) for a, b, v in zip(alpha, beta, (-1.0, 0.5, 3.0))]
    np.testing.assert_allclose(got[0], want, rtol=1e-6)


def test_an_unknown_pnnx_type_is_named_with_its_file(tmp_path):
    path = _chain_model(tmp_path, ["nn.ReLU r 1 1 x a", "nn.Frobnicate f 1 1 a y"])
    with pytest.raises(UnsupportedOperatorError, match=r"m\.pnnx\.param: 1 op type\(s\) .*\n  nn\.Frobnicate: used by f"):
        kuiper.load(path)


def test_kuiper_ops_lists_the_pnnx_spellings_under_each_canonical_type(capsys):
    assert main(["ops"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # the first listing of a type is the registry's (compiled kernels that replace it follow later)
    conv = next(i for i, line in enumerate(lines) if line.split()[:1] == ["Conv2d"])
    assert lines[conv + 1].strip() == "PNNX: nn.Conv2d, F.conv2d"
    softmax = next(i for i, line in enumerate(lines) if line.split()[:1] == ["Softmax"])
    label, _, listed = lines[softmax + 1].partition(": ")
    assert label.strip() == "PNNX" and {"nn.LogSoftmax", "nn.Softmax2d", "F.softmin"} <= set(listed.split(", "))
