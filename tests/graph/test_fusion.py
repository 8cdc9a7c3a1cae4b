"""The fusion pass: which ops merge, which must not, and that results do not change."""

import numpy as np
import pytest

import kuiper
from kuiper.cli import main
from kuiper.graph.fusion import MAX_GROUP_DEPTH
from kuiper.ir.linearize import linearize
from kuiper.ir.nodes import Binary
from kuiper.onednn import conv as onednn_conv
from kuiper.ops.elementwise import function_for

from conftest import MODELS, reference_batches, write_model


def _model(tmp_path, body: str, operands: int, fuse=True):
    lines = body.strip().splitlines()
    text = f"7767517\n{len(lines)} {operands}\n" + "\n".join(line.strip() for line in lines) + "\n"
    return kuiper.load(write_model(tmp_path, text), fuse=fuse)


CHAIN = """
pnnx.Input in0 0 1 x #x=(2,3)f32
nn.ReLU r 1 1 x a
pnnx.Expression e 1 1 a b expr=mul(@0,2.0)
nn.Sigmoid s 1 1 b c
pnnx.Output out 1 0 c
"""


def test_a_chain_becomes_one_fused_node(tmp_path):
    model = _model(tmp_path, CHAIN, 4)
    assert [step.node.type for step in model.steps] == ["kuiper.Elementwise"]
    assert model.fused_groups == [["r", "e", "s"]]
    x = np.array([[-1.0, 0.5, 2.0], [3.0, -0.25, 0.0]], np.float32)
    expected = 1 / (1 + np.exp(-(np.maximum(x, 0) * 2)))
    np.testing.assert_allclose(model(x), expected, rtol=1e-6)


def test_fusion_can_be_switched_off(tmp_path):
    model = _model(tmp_path, CHAIN, 4, fuse=False)
    assert [step.node.type for step in model.steps] == ["ReLU", "pnnx.Expression", "Sigmoid"]
    assert model.fused_groups == []


def test_a_value_read_by_several_members_of_a_group_is_computed_once_inside_it(tmp_path):
    body = """
    pnnx.Input in0 0 1 x #x=(2,3)f32
    nn.ReLU r 1 1 x a
    pnnx.Expression e1 1 1 a b expr=mul(@0,2.0)
    pnnx.Expression e2 1 1 a c expr=add(@0,1.0)
    pnnx.Expression e3 2 1 b c d expr=sub(@0,@1)
    pnnx.Output out 1 0 d
    """
    model = _model(tmp_path, body, 5)
    # 'a' feeds e1 and e2, both in e3's group: relu joins it, and the group reads only x.
    assert [step.node.name for step in model.steps] == ["e3"]
    assert model.fused_groups == [["r", "e1", "e2", "e3"]]
    assert model.steps[0].node.inputs == ["x"]
    function = linearize(function_for(model.steps[0].node.params["math"], ("float32",)))
    assert sum(isinstance(s.value, Binary) and s.value.op == "max" for s in function.body.stmts) == 1
    x = np.array([[-1.0, 0.5, 2.0], [3.0, -0.25, 0.0]], np.float32)
    relu = np.maximum(x, 0)
    np.testing.assert_allclose(model(x), relu * 2 - (relu + 1), rtol=1e-6)


def test_a_value_read_outside_the_group_stays_out_of_it(tmp_path):
    body = """
    pnnx.Input in0 0 1 x #x=(2,3)f32
    nn.ReLU r 1 1 x a
    pnnx.Expression e1 1 1 a b expr=mul(@0,2.0)
    nn.Softmax sm 1 1 a c dim=1
    pnnx.Expression e3 2 1 b c d expr=sub(@0,@1)
    pnnx.Output out 1 0 d
    """
    model = _model(tmp_path, body, 5)
    # Softmax reads 'a' too: relu stays a step of its own; e1 joins e3.
    assert [step.node.name for step in model.steps] == ["r", "sm", "e3"]
    assert model.fused_groups == [["e1", "e3"]]
    x = np.array([[-1.0, 0.5, 2.0], [3.0, -0.25, 0.0]], np.float32)
    relu = np.maximum(x, 0)
    softmax = np.exp(relu) / np.exp(relu).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(model(x), relu * 2 - softmax, rtol=1e-6)


def test_a_long_chain_of_diamonds_fuses_in_bounded_groups(tmp_path):
    """x <- x * x + x, 200 times: each value is read twice by the next op pair.  As trees these
    groups would hold 2^32 copies of their first value; as one value each they build at once."""
    lines = ["pnnx.Input in0 0 1 v0 #v0=(4)f32"]
    for k in range(200):
        lines.append(f"pnnx.Expression sq{k} 1 1 v{k} s{k} expr=mul(@0,@0)")
        lines.append(f"pnnx.Expression ad{k} 2 1 s{k} v{k} v{k + 1} expr=add(@0,@1)")
    lines.append("pnnx.Output out 1 0 v200")
    model = _model(tmp_path, "\n".join(lines), 401)
    assert all(len(group) <= MAX_GROUP_DEPTH for group in model.fused_groups)
    assert sum(len(group) for group in model.fused_groups) == 400
    x = np.float32([0.001, -0.002, 0.0, 0.0005])
    expected = x.astype(np.float64)
    for _ in range(200):
        expected = expected * expected + expected
    np.testing.assert_allclose(model(x), expected, rtol=1e-5)


def test_a_model_output_is_never_absorbed(tmp_path):
    body = """
    pnnx.Input in0 0 1 x #x=(2,3)f32
    nn.ReLU r 1 1 x a
    nn.Sigmoid s 1 1 a b
    pnnx.Output out0 1 0 a
    pnnx.Output out1 1 0 b
    """
    model = _model(tmp_path, body, 3)
    assert model.fused_groups == []
    a, b = model(np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(a, np.ones((2, 3)))


def test_non_elementwise_ops_break_chains(tmp_path):
    body = """
    pnnx.Input in0 0 1 x #x=(2,3)f32
    nn.ReLU r 1 1 x a
    nn.Softmax sm 1 1 a b dim=1
    nn.Sigmoid s 1 1 b c
    pnnx.Output out 1 0 c
    """
    model = _model(tmp_path, body, 4)
    # Softmax is not elementwise: no chain forms, each activation runs alone (compiled).
    assert [step.node.type for step in model.steps] == ["ReLU", "Softmax", "Sigmoid"]
    assert model.fused_groups == []
    x = np.array([[-1.0, 0.5, 2.0]], np.float32)
    softmax = np.exp(np.maximum(x, 0)) / np.exp(np.maximum(x, 0)).sum()
    np.testing.assert_allclose(model(x), 1 / (1 + np.exp(-softmax)), rtol=1e-6)


def test_shape_expressions_are_not_fused(tmp_path):
    body = """
    pnnx.Input in0 0 1 x #x=(2,3)f32
    pnnx.Expression shape 1 1 x s expr=[size(@0,0),-1]
    Tensor.reshape view 2 1 x s y $input=x $shape=s
    pnnx.Output out 1 0 y
    """
    model = _model(tmp_path, body, 3)
    assert model.fused_groups == []
    assert model(np.zeros((2, 3), np.float32)).shape == (2, 3)


def test_resnet_has_fewer_ops_after_fusion_and_the_same_outputs(monkeypatch):
    # Every conv on oneDNN's blocked kernels: small ones would otherwise take its GEMM kernel on plain
    # arrays, which adds a fused residual before the products, not after them as the separate add
    # does (a few ulp apart; test_models.py holds both models to PyTorch's outputs).
    monkeypatch.setattr(onednn_conv, "PLAIN_CONV_WORK", 0)
    param = MODELS / "resnet18_w8" / "model.pnnx.param"
    # Without providers: the conv chains (numba_kernels/conv_chain.py) sum in another order; this is fusion's test.
    fused, unfused = kuiper.load(param, providers=False), kuiper.load(param, fuse=False, providers=False)
    assert len(fused.steps) < len(unfused.steps)
    assert len(fused.fused_groups) == 8  # each residual add with the ReLU after it
    x = reference_batches("resnet18_w8")["b3"]["inputs"][0]
    np.testing.assert_allclose(fused(x), unfused(x), atol=1e-6, rtol=0)


def test_kuiper_info_reports_the_fused_chains(capsys):
    assert main(["info", str(MODELS / "resnet18_w8" / "model.pnnx.param")]) == 0
    out = capsys.readouterr().out
    assert "fused 8 elementwise chain(s):" in out
    assert main(["info", "--no-fuse", str(MODELS / "resnet18_w8" / "model.pnnx.param")]) == 0
    assert "fused" not in capsys.readouterr().out.split("op(s) to run")[-1]


@pytest.mark.parametrize("name", ["act_chains_fused", "relu_variants", "residual_scale"])
def test_fixtures_with_elementwise_chains_do_fuse(name):
    model = kuiper.load(MODELS / name / "model.pnnx.param")
    assert model.fused_groups, f"{name}: expected at least one fused chain"


def test_fused_relu_keeps_an_integer_dtype(tmp_path):
    body = """
    pnnx.Input in0 0 1 x #x=(4)i64
    nn.ReLU r 1 1 x a
    pnnx.Expression e 1 1 a b expr=mul(@0,2)
    pnnx.Output out 1 0 b
    """
    model = _model(tmp_path, body, 3)
    assert model.fused_groups == [["r", "e"]]
    out = model(np.array([-2, -1, 0, 3], np.int64))
    assert out.dtype == np.int64  # torch.relu(int) * 2 stays int64
    np.testing.assert_array_equal(out, [0, 0, 0, 6])


# -- buffers lent to elementwise ops -----------------------------------------------------------

# A Linear whose weight is an input (GPT-2's tied form): a conv, or a Linear with a constant
# weight, takes the ReLU in as its epilogue (test_conv_epilogue_graph.py).
CONV_RELU = """
pnnx.Input in0 0 1 x #x=(1,1,?,1)f32
pnnx.Attribute w 0 1 w @data=(1,1)f32
nn.Linear c 2 1 x w a bias=False in_features=1 out_features=1
nn.ReLU r 1 1 a b
pnnx.Output out 1 0 b
"""


def _conv_relu(tmp_path, body):
    lines = body.strip().splitlines()
    text = f"7767517\n{len(lines)} 4\n" + "\n".join(line.strip() for line in lines) + "\n"
    return kuiper.load(write_model(tmp_path, text, {"w.data": np.float32([-2.0]).tobytes()}))


def _record_outputs(model):
    seen = {}
    for step in model.steps:
        forward = step.op.forward

        def recording(*args, forward=forward, name=step.node.name):
            seen[name] = (args, forward(*args))
            return seen[name][1]

        step.op.forward = recording
    return seen


def test_an_activation_writes_into_the_dead_conv_output(tmp_path):
    model = _conv_relu(tmp_path, CONV_RELU)
    seen = _record_outputs(model)
    x = np.arange(-512, 512, dtype=np.float32).reshape(1, 1, 1024, 1)  # 4 KiB: LEND_MIN_BYTES
    out = model(x)
    np.testing.assert_array_equal(out, np.maximum(-2 * x, 0))
    assert np.shares_memory(seen["r"][1], seen["c"][1])  # relu reused the conv's buffer
    np.testing.assert_array_equal(x, np.arange(-512, 512, dtype=np.float32).reshape(1, 1, 1024, 1))  # feed untouched


def test_a_buffer_still_read_later_or_returned_is_not_lent(tmp_path):
    body = CONV_RELU.replace("pnnx.Output out 1 0 b", "pnnx.Output out0 1 0 a\npnnx.Output out1 1 0 b")
    model = _conv_relu(tmp_path, body)
    x = np.arange(-4, 5, dtype=np.float32).reshape(1, 1, 9, 1)
    conv, relu = model(x)
    np.testing.assert_array_equal(conv, -2 * x)  # the conv output is returned, so relu must not overwrite it
    np.testing.assert_array_equal(relu, np.maximum(-2 * x, 0))


def test_feeds_are_never_overwritten(tmp_path):
    body = """
    pnnx.Input in0 0 1 x #x=(4)f32
    nn.ReLU r 1 1 x y
    pnnx.Output out 1 0 y
    """
    model = _model(tmp_path, body, 2)
    x = np.array([-1.0, 2.0, -3.0, 4.0], np.float32)
    model(x)
    np.testing.assert_array_equal(x, [-1.0, 2.0, -3.0, 4.0])


def test_an_expression_that_simplifies_to_its_input_returns_a_copy(tmp_path):
    body = """
    pnnx.Input in0 0 1 x #x=(3)f32
    pnnx.Expression e 1 1 x y expr=mul(@0,1)
    pnnx.Output out 1 0 y
    """
    model = _model(tmp_path, body, 2)
    x = np.array([1.0, 2.0, 3.0], np.float32)
    y = model(x)
    np.testing.assert_array_equal(y, x)
    assert not np.shares_memory(x, y)  # an output never aliases the caller's feed


def test_a_buffer_with_a_live_view_is_not_lent(tmp_path):
    # The conv output `a` is read by a reshape (a view of the same memory) and last by relu;
    # the view `v` is used after relu, so relu must not write into `a`.
    body = """
    pnnx.Input in0 0 1 x #x=(1,1,3,3)f32
    nn.Conv2d c 1 1 x a bias=False kernel_size=(1,1) out_channels=1 in_channels=1 @weight=(1,1,1,1)f32
    Tensor.reshape v 1 1 a av shape=(1,9)
    nn.ReLU r 1 1 a b
    Tensor.reshape w 1 1 b bv shape=(1,9)
    pnnx.Expression e 2 1 av bv y expr=add(@0,@1)
    pnnx.Output out 1 0 y
    """
    lines = body.strip().splitlines()
    text = f"7767517\n{len(lines)} 6\n" + "\n".join(line.strip() for line in lines) + "\n"
    model = kuiper.load(write_model(tmp_path, text, {"c.weight": np.float32([-2.0]).tobytes()}))
    x = np.arange(-4, 5, dtype=np.float32).reshape(1, 1, 3, 3)
    conv = (-2 * x).reshape(1, 9)
    np.testing.assert_array_equal(model(x), conv + np.maximum(conv, 0))
