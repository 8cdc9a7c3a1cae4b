"""Param value typing, item kinds and shapes, as PNNX writes them (PNNX-FORMAT.md section 1)."""

import math

import pytest

from kuiper.errors import ModelFormatError
from kuiper.formats.pnnx_param import parse_param, parse_value


@pytest.mark.parametrize(
    "text, expected",
    [
        ("None", None),
        ("()", None),
        ("[]", None),
        ("True", True),
        ("False", False),
        ("1", 1),
        ("0", 0),
        ("-3", -3),
        ("2147483647", 2147483647),
        ("0.5", 0.5),
        ("2.0", 2.0),
        ("1.000000e-05", 1e-5),
        ("1.000000e-5", 1e-5),
        ("1e-5", 1e-5),
        ("-3.000000e-7", -3e-7),
        ("1.000000e8", 1e8),
        ("5.65685415", 5.65685415),
        ("nearest", "nearest"),
        ("zeros", "zeros"),
        ("torch.float", "torch.float"),
        ("ijkl,ijkl->ij", "ijkl,ijkl->ij"),
        ("tanh", "tanh"),
        ("(1,2)", [1, 2]),
        ("(32)", [32]),
        ("(-1)", [-1]),
        ("[1,2,3]", [1, 2, 3]),
        ("(0.5,2.0)", [0.5, 2.0]),
        ("(0,@0)", [0, "@0"]),
        ("(2147483647,1)", [2147483647, 1]),
        ("(1.0,2)", [1.0, 2]),  # typed element by element, not by the last one
        ("1.000000e+00+2.000000e+00j", complex(1, 2)),
        ("1.0e+00+-2.0e+00j", complex(1, -2)),
        ("(1.000000e+00+2.000000e+00j,3.000000e+00+-1.000000e+00j)", [complex(1, 2), complex(3, -1)]),
        ("%pattern", "%pattern"),
    ],
)
def test_value_kinds(text, expected):
    value = parse_value(text)
    assert value == expected
    assert type(value) is type(expected)
    if isinstance(expected, list):
        assert [type(v) for v in value] == [type(v) for v in expected]


@pytest.mark.parametrize("text, sign", [("inf", 1), ("-inf", -1)])
def test_infinities_are_floats(text, sign):
    value = parse_value(text)
    assert isinstance(value, float) and math.isinf(value) and math.copysign(1, value) == sign


def test_nan_is_a_float():
    value = parse_value("nan")
    assert isinstance(value, float) and math.isnan(value)


def _param(*lines, operands=None):
    body = "\n".join(lines)
    count = operands if operands is not None else len({t for l in lines for t in l.split()[4:] if "=" not in t})
    return f"7767517\n{len(lines)} {count}\n{body}\n"


def test_items_of_every_kind_are_split_by_their_first_character():
    text = _param(
        "pnnx.Input in0 0 1 x #x=(1,?,224,224)f32",
        "pnnx.Input in1 0 1 y #y=(1,3)i64",
        "torch.matmul mm 2 1 x y z $input=x $other=y #z=(1,2)f32",
        "pnnx.Expression e 1 1 z w expr=[size(@0,0),-1] #w=(2)i64",
        "pnnx.Output out 1 0 w",
        operands=4,
    )
    parsed = parse_param(text, "t.param")
    inp, _, mm, expr, _ = parsed.ops
    assert parsed.operands["x"].shape == (1, None, 224, 224)
    assert parsed.operands["x"].dtype == "float32"
    assert parsed.operands["y"].dtype == "int64"
    assert mm.input_keys == ["input", "other"]
    assert expr.params["expr"] == "[size(@0,0),-1]"  # kept raw, not split as a list
    assert inp.source == "t.param:3"


def test_keyword_binding_with_the_same_operand_twice_fills_positions_in_order():
    text = _param(
        "pnnx.Input in0 0 1 x",
        "torch.matmul mm 2 1 x x z $input=x $other=x",
        "pnnx.Output out 1 0 z",
        operands=2,
    )
    assert parse_param(text).ops[1].input_keys == ["input", "other"]


def test_weight_declarations_are_collected_per_op():
    text = _param("pnnx.Attribute a 0 1 x @data=(2,3)f16", "pnnx.Output out 1 0 x", operands=1)
    decl = parse_param(text).weights["a"]["data"]
    assert decl.shape == (2, 3) and decl.dtype == "f16"


def test_long_type_names_are_not_truncated():
    text = _param(
        "pnnx.Input in0 0 1 0",
        "example.layers.ScaledTanhWithAVeryLongName act 1 1 0 1 @alpha=(4)f32",
        "pnnx.Output out 1 0 1",
        operands=2,
    )
    assert parse_param(text).ops[1].type == "example.layers.ScaledTanhWithAVeryLongName"


@pytest.mark.parametrize("token", ["f32", "f64", "f16", "bf16", "i64", "i32", "i16", "i8", "u8", "bool", "c64", "c128"])
def test_every_dtype_token_is_known(token):
    text = _param(f"pnnx.Input in0 0 1 x #x=(2)${token}".replace("$", ""), "pnnx.Output out 1 0 x", operands=1)
    assert parse_param(text).operands["x"].dtype is not None


def test_unknown_dtype_names_the_line():
    text = _param("pnnx.Input in0 0 1 x #x=(2)f12", "pnnx.Output out 1 0 x", operands=1)
    with pytest.raises(ModelFormatError, match=r"t.param:3: .*unknown dtype 'f12'"):
        parse_param(text, "t.param")
