"""Lowering expressions to IR functions, simplification, and linearization."""

from __future__ import annotations

import re

import pytest

from kuiper.errors import ExpressionSyntaxError
from kuiper.pnnx_expr import FUNCTIONS, Call, Input, Literal, Size, parse
from kuiper.pnnx_expr.lower import lower
from kuiper.ir import Var, linearize, make, print_ir, simplify


def lowered(text, *input_dtypes, simplified=True):
    fn = lower(parse(text), list(input_dtypes))
    return simplify(fn) if simplified else fn


def body(text, *input_dtypes, simplified=True):
    """The single result's expression, printed."""
    fn = lowered(text, *input_dtypes, simplified=simplified)
    return print_ir(fn.body.stmts[-1].value)


def test_lowered_function_prints_readably():
    assert print_ir(lowered("add(relu(@0),@1)", "float32", "float32")) == (
        "func expression(x0: float32, x1: float32) -> (out: float32) {\n  out = (max(x0, 0.0) + x1)\n}"
    )


def test_pnnx_quirk_lowers_to_the_right_tree():
    assert body("add(add(mul(@0,0.5),log1p),abs(@0)),@0", "float32") == "(((x0 * 0.5) + log1p(abs(x0))) + x0)"


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_every_function_lowers_for_float32(name):
    arity = FUNCTIONS[name].arity
    args = ",".join(f"@{i}" for i in range(arity))
    input_dtype = "int32" if FUNCTIONS[name].category == "bitwise" else "float32"
    fn = lower(parse(f"{name}({args})"), [input_dtype] * arity)
    expected = {"torch.bool": "bool", "torch.long": "int64"}.get(name, input_dtype)
    if FUNCTIONS[name].category == "compare":
        expected = "bool"
    assert fn.results[0].dtype == expected


@pytest.mark.parametrize(
    "text, dtypes_in, dtype_out",
    [
        ("mul(@0,0.5)", ["int64"], "float32"),
        ("add(@0,1)", ["int32"], "int32"),
        ("div(@0,@1)", ["int64", "int64"], "float32"),
        ("floor_divide(@0,@1)", ["int64", "int64"], "int64"),
        ("add(@0,@1)", ["bool", "bool"], "bool"),
        ("add(@0,@1)", ["bool", "int32"], "int32"),
        ("add(@0,@1)", ["int8", "uint8"], "int16"),
        ("mul(@0,2.5)", ["float16"], "float16"),
        ("exp(@0)", ["int32"], "float32"),
        ("exp(@0)", ["float64"], "float64"),
        ("floor(@0)", ["int32"], "int32"),
        ("abs(@0)", ["int8"], "int8"),
        ("sign(@0)", ["bool"], "bool"),
        ("square(@0)", ["bool"], "int64"),
        ("reciprocal(@0)", ["int64"], "float32"),
        ("int(@0)", ["float32"], "float32"),  # identity on a tensor
        ("int(2.7)", [], "pyint"),
        ("torch.float(@0)", ["int64"], "float32"),
        ("torch.long(@0)", ["float32"], "int64"),
        ("torch.bool(@0)", ["float32"], "bool"),
        ("and(@0,@1)", ["int32", "bool"], "int32"),
        ("lshift(@0,2)", ["int64"], "int64"),
        ("where(@0,@1,2.0)", ["bool", "int64"], "float32"),
        ("where(@0,1,0)", ["bool"], "int64"),
        ("where(@0,1,0)", ["pybool"], "pyint"),
        ("gt(@0,0.5)", ["int64"], "bool"),
        ("size(@0,1)", ["float32"], "pyint"),
        ("div(size(@0,1),2)", ["float32"], "pyfloat"),
        ("mul(@0,size(@0,1))", ["float16"], "float16"),
        ("add(@0,@1)", ["pyint", "pyint"], "pyint"),
        ("add(@0,@1)", ["pyint", "float32"], "float32"),
        ("sigmoid(@0)", ["int64"], "float32"),
        ("relu(@0)", ["int32"], "int32"),
        ("leaky_relu(@0,0.01)", ["float16"], "float16"),
    ],
)
def test_result_dtypes_follow_pytorch(text, dtypes_in, dtype_out):
    assert lower(parse(text), dtypes_in).results[0].dtype == dtype_out


def test_input_dtypes_may_be_numpy_dtypes():
    import numpy as np

    fn = lower(parse("add(@0,@1)"), [np.float32, np.dtype("int8")])
    assert [p.dtype for p in fn.params] == ["float32", "int8"]


def test_casts_are_explicit():
    assert body("add(@0,@1)", "int32", "float32") == "(float32(x0) + x1)"
    assert body("mul(@0,0.5)", "int64") == "(float32(x0) * 0.5)"
    assert body("div(@0,2)", "int64") == "(float32(x0) / 2.0)"


def test_lists_and_shapes():
    fn = lowered("[size(@0,0),mul(size(@0,1),2)]", "float32")
    assert fn.returns_list
    assert print_ir(fn, compact=True) == (
        "func expression(x0: float32) -> [out0: pyint, out1: pyint] { out0 = size(x0, 0) out1 = (size(x0, 1) * 2) }"
    )
    assert body("size(@0)", "float32") == "shape(x0)"


def test_composites_expand_to_primitives():
    assert body("sigmoid(@0)", "float32") == "(1.0 / (exp((-x0)) + 1.0))"
    assert body("sign(@0)", "float32") == "(float32((x0 > 0.0)) - float32((x0 < 0.0)))"
    assert body("leaky_relu(@0,0.5)", "float32") == "select((x0 > 0.0), x0, (x0 * 0.5))"
    assert body("clamp(@0,-1,1)", "float32") == "min(max(x0, -1.0), 1.0)"
    assert body("rsqrt(@0)", "float32") == "(1.0 / sqrt(x0))"


@pytest.mark.parametrize(
    "text, dtypes_in, message",
    [
        ("sub(@0,@1)", ["bool", "bool"], "sub is not defined for two bool tensors"),
        ("neg(@0)", ["bool"], "neg is not defined"),
        ("lshift(@0,1)", ["float32"], "needs bool or integer"),
        ("add(@0,None)", ["float32"], "None is not a value"),
        ("gt(@0,1.0+2.0j)", ["float32"], "gt is not defined for complex"),
        ("add(@0,@1)", ["float32"], "@1 has no dtype"),
        ("neg(@0)", ["complex32"], "input 0 has dtype 'complex32'"),
    ],
)
def test_lowering_errors(text, dtypes_in, message):
    with pytest.raises(ExpressionSyntaxError, match=re.escape(message)):
        lower(parse(text), dtypes_in)


def test_type_errors_show_the_whole_expression():
    with pytest.raises(ExpressionSyntaxError) as info:
        lower(parse("add(@1,sub(@0,@0))"), ["bool", "float32"])
    assert info.value.text == "add(@1,sub(@0,@0))"
    assert "(in sub(@0,@0))" in info.value.reason


def test_whole_shape_inside_a_call_is_rejected():
    # The parser never builds this; a careless rewrite could.
    expr = Call("add", (Size(Input(0), None), Literal(1)))
    with pytest.raises(ExpressionSyntaxError, match="whole shape"):
        lower(expr, ["float32"])


# --- simplification -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, dtypes_in, expected",
    [
        ("add(@0,0)", ["float32"], "x0"),
        ("add(0,@0)", ["int64"], "x0"),
        ("sub(@0,0)", ["float32"], "x0"),
        ("mul(@0,1)", ["float32"], "x0"),
        ("mul(1,@0)", ["int32"], "x0"),
        ("div(@0,1)", ["float32"], "x0"),
        ("neg(neg(@0))", ["float32"], "x0"),
        ("pow(@0,1)", ["float32"], "x0"),
        ("pow(@0,2)", ["float32"], "(x0 * x0)"),
        ("pow(@0,2)", ["int64"], "(x0 * x0)"),
        ("add(2,@0)", ["int64"], "(x0 + 2)"),
        ("mul(@0,add(1,2))", ["float32"], "(x0 * 3.0)"),
        ("mul(@0,sub(mul(2,3),1))", ["int64"], "(x0 * 5)"),
        ("add(@0,0.0)", ["int64"], "float32(x0)"),
        ("mul(@0,0)", ["float32"], "(x0 * 0.0)"),  # NaN * 0 is NaN: kept
        ("sub(0,@0)", ["float32"], "(0.0 - x0)"),
        ("int(2.7)", [], "2"),
        ("int(-2.7)", [], "-2"),
        ("div(7,2)", [], "3.5"),
        ("floor_divide(-7,2)", [], "-4"),
        ("remainder(-7,3)", [], "2"),
        ("fmod(-7,3)", [], "-1"),
        ("max(1.0,nan)", [], "nan"),
        ("exp(0)", [], "1.0"),
        ("torch.long(2.9)", [], "2"),
    ],
)
def test_simplify(text, dtypes_in, expected):
    assert body(text, *dtypes_in) == expected


def test_folding_uses_the_node_dtype():
    # 1/3 is computed as a Python float, then rounded once to float32 for the tensor op.
    fn = lowered("mul(@0,div(1,3))", "float32")
    constant = fn.body.stmts[0].value.rhs
    assert constant.dtype == "float32"
    assert constant.value == float(__import__("numpy").float32(1 / 3))


def test_folding_leaves_errors_for_run_time():
    x = Var("n", "pyint")
    node = simplify(make.pow(make.const(2), make.const(-1)))  # numpy refuses int ** negative int
    assert print_ir(node) == "(2 ** -1)"
    assert simplify(make.add(x, 0)) == x


def test_linearize_shares_common_subexpressions():
    fn = linearize(lowered("add(exp(@0),exp(@0))", "float32"))
    assert print_ir(fn) == (
        "func expression(x0: float32) -> (out: float32) {\n  t0 = exp(x0)\n  t1 = (t0 + t0)\n  out = t1\n}"
    )
    assert linearize(fn) == fn


def test_linearize_silu_shares_its_input_reads():
    fn = linearize(lowered("mul(silu(@0),silu(@0))", "float32"))
    assert [print_ir(s) for s in fn.body.stmts] == [
        "t0 = (-x0)",
        "t1 = exp(t0)",
        "t2 = (t1 + 1.0)",
        "t3 = (x0 / t2)",
        "t4 = (t3 * t3)",
        "out = t4",
    ]
