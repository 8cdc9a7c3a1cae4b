"""Every kind of bad input raises a KuiperError subclass that says where and what was expected."""

import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kuiper
from kuiper.errors import (
    BackendUnavailableError,
    GraphError,
    InputError,
    ModelFormatError,
    ShapeError,
    UnsupportedOperatorError,
)
from kuiper.formats.pnnx_param import parse_param

from conftest import LINEAR, write_model
from conftest import LINEAR_WEIGHTS as WEIGHTS


def test_a_good_hand_written_model_loads_and_computes(tmp_path):
    model = kuiper.load(write_model(tmp_path, LINEAR, WEIGHTS))
    out = model(np.array([[1.0, 2.0, 3.0]], dtype=np.float32))
    # W = [[0,1,2],[3,4,5]], b = [1,1]: by hand, [0+2+6+1, 3+8+15+1]
    np.testing.assert_array_equal(out, [[9.0, 27.0]])


# -- param file -------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, message",
    [
        ("", r"empty"),
        ("7767518\n0 0\n", r":1: bad magic number '7767518'"),
        ("7767517\n", r":2: missing the '<op_count> <operand_count>' line"),
        ("7767517\n3\n", r":2: expected '<op_count> <operand_count>'"),
        ("7767517\nx 2\n", r":2: op count must be a non-negative integer, found 'x'"),
        ("7767517\n4 2\n" + LINEAR.split("\n", 2)[2], r"declares 4 op\(s\) but the file has 3"),
        ("7767517\n3 5\n" + LINEAR.split("\n", 2)[2], r":2: the header declares 5 operand\(s\) but the ops define 2"),
        ("7767517\n1 0\nnn.ReLU\n", r":3: truncated op line"),
        ("7767517\n1 1\nnn.ReLU r 1 1 x\n", r":3: op 'r' declares 1 input\(s\) and 1 output\(s\) but the line has only 1"),
        ("7767517\n1 1\nnn.ReLU r one 1 x y\n", r":3: op 'r': input count must be a non-negative integer, found 'one'"),
        ("7767517\n2 1\npnnx.Input a 0 1 x\npnnx.Output a 1 0 x\n", r":4: duplicate op name 'a' \(first defined on line 3\)"),
        ("7767517\n2 1\npnnx.Input a 0 1 x\npnnx.Input b 0 1 x\n", r":4: operand 'x' is produced twice"),
        ("7767517\n1 0\npnnx.Output out 1 0 ghost\n", r":3: op 'out' uses operand 'ghost', which no op defines"),
        ("7767517\n2 1\npnnx.Input a 0 1 x #x=(1,two)f32\npnnx.Output o 1 0 x\n", r":3: operand 'x' shape: a dimension must be a non-negative integer or '\?', found 'two'"),
        ("7767517\n2 1\npnnx.Input a 0 1 x #x=(1,-2)f32\npnnx.Output o 1 0 x\n", r":3: operand 'x' shape: a dimension must be a non-negative integer or '\?', found '-2'"),
        ("7767517\n2 1\npnnx.Input a 0 1 x #x=1,2f32\npnnx.Output o 1 0 x\n", r":3: operand 'x' shape: expected '\(d0,d1,...\)dtype'"),
        ("7767517\n2 1\npnnx.Input a 0 1 x junk\npnnx.Output o 1 0 x\n", r":3: op 'a': item 'junk' is not of the form key=value"),
        ("7767517\n2 1\npnnx.Input a 0 1 x\nnn.ReLU r 1 0 x $input=y\n", r":4: op 'r': '\$input=y' names operand 'y'"),
        ("7767517\n2 1\npnnx.Input a 0 1 x\npnnx.Output o 1 0 x k=\n", r":4: op 'o': param 'k' has an empty value"),
    ],
)
def test_malformed_param_files_name_file_and_line(tmp_path, text, message):
    param = write_model(tmp_path, text)
    with pytest.raises(ModelFormatError, match=message) as info:
        kuiper.load(param)
    assert str(param) in str(info.value)


def test_binary_garbage_as_param_file(tmp_path):
    param = tmp_path / "m.pnnx.param"
    param.write_bytes(b"7767517\n\xff\xfe\x00garbage")
    with pytest.raises(ModelFormatError, match=r":2: not UTF-8 text"):
        kuiper.load(param)


def test_missing_param_file(tmp_path):
    with pytest.raises(ModelFormatError, match="model file not found"):
        kuiper.load(tmp_path / "nope.pnnx.param")


def test_a_cycle_is_a_graph_error(tmp_path):
    # op a reads d, which op d makes from a's output: every name is defined, but no order exists.
    text = (
        "7767517\n4 3\n"
        "pnnx.Input in0 0 1 x\n"
        "nn.ReLU a 1 1 d b\n"
        "nn.ReLU d 1 1 b d\n"
        "pnnx.Output out 1 0 b\n"
    )
    with pytest.raises(GraphError, match="cycle"):
        kuiper.load(write_model(tmp_path, text))


def test_ops_out_of_file_order_are_sorted_topologically(tmp_path):
    text = (
        "7767517\n4 3\n"
        "pnnx.Output out 1 0 y\n"
        "nn.ReLU r2 1 1 h y\n"
        "nn.ReLU r1 1 1 x h\n"
        "pnnx.Input in0 0 1 x #x=(1,2)f32\n"
    )
    model = kuiper.load(write_model(tmp_path, text))
    np.testing.assert_array_equal(model(np.array([[-1.0, 2.0]], np.float32)), [[0.0, 2.0]])


# -- weights file --------------------------------------------------------------------


def test_missing_bin_file(tmp_path):
    param = write_model(tmp_path, LINEAR)
    with pytest.raises(ModelFormatError, match=r"m.pnnx.bin: weight file not found"):
        kuiper.load(param)


def test_empty_bin_file(tmp_path):
    param = write_model(tmp_path, LINEAR)
    (tmp_path / "m.pnnx.bin").write_bytes(b"")
    with pytest.raises(ModelFormatError, match="weight file is empty"):
        kuiper.load(param)


def test_corrupt_bin_file(tmp_path):
    param = write_model(tmp_path, LINEAR)
    (tmp_path / "m.pnnx.bin").write_bytes(b"PK\x03\x04" + b"\x00" * 100)
    with pytest.raises(ModelFormatError, match="not a zip archive"):
        kuiper.load(param)


def test_truncated_bin_file(tmp_path):
    param = write_model(tmp_path, LINEAR, WEIGHTS)
    data = (tmp_path / "m.pnnx.bin").read_bytes()
    (tmp_path / "m.pnnx.bin").write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelFormatError, match="m.pnnx.bin"):
        kuiper.load(param)


def test_missing_entry_names_the_op_and_weight(tmp_path):
    param = write_model(tmp_path, LINEAR, {"fc.weight": WEIGHTS["fc.weight"]})
    with pytest.raises(ModelFormatError, match=r"missing zip entry 'fc.bias'.*weight 'bias' of op 'fc'"):
        kuiper.load(param)


def test_weight_size_must_match_its_shape(tmp_path):
    param = write_model(tmp_path, LINEAR, {**WEIGHTS, "fc.weight": np.zeros(5, "<f4").tobytes()})
    with pytest.raises(ModelFormatError, match=r"'fc.weight' holds 20 bytes, but shape \(2, 3\) f32 needs 24"):
        kuiper.load(param)


def test_compressed_entries_are_rejected(tmp_path):
    param = write_model(tmp_path, LINEAR)
    with zipfile.ZipFile(tmp_path / "m.pnnx.bin", "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for entry, data in WEIGHTS.items():
            archive.writestr(entry, data)
    with pytest.raises(ModelFormatError, match="is compressed"):
        kuiper.load(param)


def test_bin_path_can_be_given_explicitly(tmp_path):
    write_model(tmp_path, LINEAR, WEIGHTS)
    (tmp_path / "m.pnnx.bin").rename(tmp_path / "elsewhere.bin")
    model = kuiper.load(tmp_path / "m.pnnx.param", bin_path=tmp_path / "elsewhere.bin")
    assert model(np.zeros((1, 3), np.float32)).tolist() == [[1.0, 1.0]]


# -- ops ------------------------------------------------------------------------------


def test_unknown_op_types_are_listed_together_with_their_ops(tmp_path):
    text = (
        "7767517\n5 4\n"
        "pnnx.Input in0 0 1 x\n"
        "nn.Frobnicate f1 1 1 x a\n"
        "nn.Frobnicate f2 1 1 a b\n"
        "torch.wibble w 1 1 b c\n"
        "pnnx.Output out 1 0 c\n"
    )
    with pytest.raises(UnsupportedOperatorError) as info:
        kuiper.load(write_model(tmp_path, text))
    message = str(info.value)
    assert "2 op type(s)" in message
    # Each op is named with the line of the param file that declares it.
    assert "nn.Frobnicate: used by f1 (line 4), f2 (line 5)" in message
    assert "torch.wibble: used by w (line 6)" in message


def test_unsupported_param_value_names_op_param_and_choices(tmp_path):
    text = (
        "7767517\n3 2\n"
        "pnnx.Input in0 0 1 x\n"
        "nn.Conv2d c 1 1 x y bias=False groups=1 padding=(1,1) padding_mode=mirror stride=(1,1) @weight=(1,1,3,3)f32\n"
        "pnnx.Output out 1 0 y\n"
    )
    param = write_model(tmp_path, text, {"c.weight": np.zeros(9, "<f4").tobytes()})
    with pytest.raises(UnsupportedOperatorError, match=r"op 'c' of type Conv2d .*PNNX nn.Conv2d\): padding_mode='mirror' .*'reflect'"):
        kuiper.load(param)


def test_missing_weight_names_the_op(tmp_path):
    text = "7767517\n3 2\npnnx.Input in0 0 1 x\nnn.Linear fc 1 1 x y bias=False\npnnx.Output out 1 0 y\n"
    with pytest.raises(ModelFormatError, match=r"op 'fc' of type Linear .*:4, PNNX nn.Linear\)"):
        kuiper.load(write_model(tmp_path, text))


# -- feeds ------------------------------------------------------------------------------


@pytest.fixture
def linear_model(tmp_path):
    return kuiper.load(write_model(tmp_path, LINEAR, WEIGHTS))


def test_feed_with_wrong_rank(linear_model):
    with pytest.raises(ShapeError, match=r"input 'x' expects rank 2 \(\?, 3\), got shape \(3,\)"):
        linear_model(np.zeros(3, np.float32))


def test_feed_with_wrong_shape(linear_model):
    with pytest.raises(ShapeError, match=r"input 'x' .*dim 1 must be 3"):
        linear_model(np.zeros((1, 4), np.float32))


def test_batch_dim_may_vary(linear_model):
    assert linear_model(np.zeros((5, 3), np.float32)).shape == (5, 2)


def test_feed_with_wrong_dtype(linear_model):
    with pytest.raises(InputError, match=r"input 'x' expects dtype float32, got int64"):
        linear_model(np.zeros((1, 3), np.int64))


class _GradTensor:
    """Stands in for a PyTorch tensor that requires grad: its ``__array__`` refuses as torch's does."""

    shape, ndim = (1, 3), 2

    def __array__(self, dtype=None, copy=None):
        raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")


class _Bfloat16Tensor(_GradTensor):
    """Stands in for a bfloat16 PyTorch tensor, whose conversion NumPy cannot take."""

    def __array__(self, dtype=None, copy=None):
        raise TypeError("Got unsupported ScalarType BFloat16")


@pytest.mark.parametrize("feed, cause", [(_GradTensor(), "requires grad"), (_Bfloat16Tensor(), "BFloat16")])
def test_a_feed_that_refuses_to_convert_is_an_input_error_saying_what_to_pass(linear_model, feed, cause):
    with pytest.raises(InputError, match=rf"input 'x': a {type(feed).__name__} .*{cause}.*pass a NumPy array, "
                                         r"e.g. for a PyTorch tensor x.detach\(\).cpu\(\).float\(\).numpy\(\)"):
        linear_model(feed)


def test_pytorch_tensors_that_require_grad_or_are_bfloat16_are_input_errors(linear_model):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (CI has none; the stand-ins above run)")
    for tensor in (torch.zeros((1, 3), requires_grad=True), torch.zeros((1, 3), dtype=torch.bfloat16)):
        with pytest.raises(InputError, match="pass a NumPy array"):
            linear_model(tensor)
    assert linear_model(torch.zeros((1, 3))).shape == (1, 2)


def test_float64_feed_is_converted_to_the_declared_float32(linear_model):
    assert linear_model(np.zeros((1, 3), np.float64)).dtype == np.float32


def test_missing_and_unknown_feeds(linear_model):
    with pytest.raises(InputError, match=r"missing feed\(s\) for input\(s\) \['x'\]"):
        linear_model.run({})
    with pytest.raises(InputError, match=r"unknown input\(s\) \['z'\]"):
        linear_model.run({"x": np.zeros((1, 3), np.float32), "z": 1})
    with pytest.raises(InputError, match=r"expected 1 input\(s\) \(x\), got 2"):
        linear_model(np.zeros((1, 3), np.float32), np.zeros((1, 3), np.float32))


def test_non_array_feed(linear_model):
    with pytest.raises(InputError, match="must be an array"):
        linear_model("hello")


# -- backends -----------------------------------------------------------------------------


def test_unknown_backend_lists_the_known_ones(tmp_path):
    with pytest.raises(BackendUnavailableError, match=r"unknown backend 'tpu' \(from argument\); registered backends: .*numpy"):
        kuiper.load(write_model(tmp_path, LINEAR, WEIGHTS), backend="tpu")


def test_unavailable_backend_says_why(tmp_path):
    info = {b.name: b for b in kuiper.backends()}["cupy"]
    if info.available:
        pytest.skip("CuPy is usable on this machine")
    with pytest.raises(BackendUnavailableError, match=r"backend 'cupy' \(from argument\) is not available: .*CuPy"):
        kuiper.load(write_model(tmp_path, LINEAR, WEIGHTS), backend="cupy")


# -- fuzz ------------------------------------------------------------------------------------

_TOKENS = st.sampled_from(
    ["7767517", "\n", " ", "0", "1", "2", "-1", "x", "y", "pnnx.Input", "pnnx.Output", "nn.ReLU", "a=1",
     "#x=(1,?)f32", "@w=(2)f32", "$input=x", "expr=add(@0,1)", "k=(1,@0)", "=", "(", ")", "?", "%s", "inf"]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=200), st.lists(_TOKENS, max_size=60).map("".join)))
def test_param_parser_either_parses_or_raises_model_format_error(text):
    try:
        parse_param(text, "fuzz.param")
    except ModelFormatError:
        pass


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=300))
def test_loader_on_arbitrary_bytes_raises_only_kuiper_errors(tmp_path_factory, data):
    folder = tmp_path_factory.mktemp("fuzz")
    (folder / "m.pnnx.param").write_bytes(data)
    (folder / "m.pnnx.bin").write_bytes(data)
    try:
        kuiper.load(folder / "m.pnnx.param")
    except kuiper.KuiperError:
        pass


def test_bad_expression_names_op_and_line_with_a_caret(tmp_path):
    text = (
        "7767517\n3 2\n"
        "pnnx.Input in0 0 1 x #x=(1,2)f32\n"
        "pnnx.Expression bad 1 1 x y expr=add(@0,frob(@0))\n"
        "pnnx.Output out 1 0 y\n"
    )
    with pytest.raises(kuiper.ExpressionSyntaxError) as info:
        kuiper.load(write_model(tmp_path, text))
    message = str(info.value)
    assert "op 'bad' of type pnnx.Expression" in message and "m.pnnx.param:4" in message
    assert "unknown function 'frob'" in message
    assert message.endswith("add(@0,frob(@0))\n         ^")


def test_expression_input_beyond_the_ops_inputs(tmp_path):
    text = (
        "7767517\n3 2\n"
        "pnnx.Input in0 0 1 x #x=(1,2)f32\n"
        "pnnx.Expression e 1 1 x y expr=add(@0,@1)\n"
        "pnnx.Output out 1 0 y\n"
    )
    with pytest.raises(kuiper.ExpressionSyntaxError, match="@1"):
        kuiper.load(write_model(tmp_path, text))
