"""Parsing pnnx.Expression strings: every function, PNNX's parenthesis quirk, lists, errors."""

from __future__ import annotations

import math

import pytest

from kuiper.errors import ExpressionSyntaxError
from kuiper.pnnx_expr import FUNCTIONS, MAX_DEPTH, Call, Input, ListExpr, Literal, Size, call, parse, to_string

X0, X1, X2 = Input(0), Input(1), Input(2)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_every_function_parses_with_its_arity(name):
    arity = FUNCTIONS[name].arity
    text = f"{name}({','.join(f'@{i}' for i in range(arity))})"
    assert parse(text) == Call(name, tuple(Input(i) for i in range(arity)))
    assert to_string(parse(text)) == text


def test_nested_calls_and_literals():
    assert parse("add(mul(@0,@1),mul(@0,0.5))") == call("add", call("mul", X0, X1), call("mul", X0, 0.5))
    assert parse("pow(@0,2)") == call("pow", X0, 2)
    assert parse("where(@0,True,None)") == call("where", X0, True, None)


def test_literal_types_are_kept_apart():
    assert parse("1") != parse("1.0")
    assert parse("1") != parse("True")
    assert parse("nan") == parse("nan")
    assert parse("-0.0") != parse("0.0")
    assert type(parse("1").value) is int
    assert parse("1.000000e-05") == Literal(1e-05)
    assert parse("-inf") == Literal(-math.inf)
    assert parse("1.000000e+00+-2.000000e+00j") == Literal(complex(1.0, -2.0))


# --- PNNX prints log1p/expm1 with misplaced parentheses; token order decides -----------------

QUIRKS = [
    # re-printed by pnnx's eval_expression for log1p(x)+x
    ("add(log1p,@0),@0", call("add", call("log1p", X0), X0)),
    # a real export of y*0.5 + torch.log1p(y.abs()) + y
    (
        "add(add(mul(@0,0.5),log1p),abs(@0)),@0",
        call("add", call("add", call("mul", X0, 0.5), call("log1p", call("abs", X0))), X0),
    ),
    # a real export of torch.expm1(x)*2 - torch.expm1(x*3)
    (
        "sub(mul(expm1,@0),2),expm1,mul(@0,3)",
        call("sub", call("mul", call("expm1", X0), 2), call("expm1", call("mul", X0, 3))),
    ),
    # a real export of torch.log1p(x.abs()) * torch.expm1(x) + 1
    (
        "add(mul(log1p,abs(@0)),expm1),@0,1",
        call("add", call("mul", call("log1p", call("abs", X0)), call("expm1", X0)), 1),
    ),
    ("mul(expm1,@0),2", call("mul", call("expm1", X0), 2)),
    ("expm1,@0", call("expm1", X0)),
    ("add(log1p,expm1),@0,@1", call("add", call("log1p", call("expm1", X0)), X1)),
    ("[log1p,@0,2]", ListExpr((call("log1p", X0), Literal(2)))),
]


@pytest.mark.parametrize("text, expected", QUIRKS, ids=[q[0] for q in QUIRKS])
def test_pnnx_parenthesis_quirk_is_read_by_token_order(text, expected):
    assert parse(text) == expected
    # The canonical form has the right parentheses and reads back the same.
    assert parse(to_string(expected)) == expected


def test_quirk_canonical_text():
    assert to_string(parse("add(add(mul(@0,0.5),log1p),abs(@0)),@0")) == "add(add(mul(@0,0.5),log1p(abs(@0))),@0)"


# --- sizes and lists -------------------------------------------------------------------------


def test_size_of_a_dimension():
    assert parse("size(@0,1)") == Size(X0, 1)
    assert parse("size(@1,-1)") == Size(X1, -1)
    assert parse("mul(size(@0,2),2)") == call("mul", Size(X0, 2), 2)


def test_whole_shape_only_as_the_entire_expression():
    assert parse("size(@0)") == Size(X0, None)
    with pytest.raises(ExpressionSyntaxError, match="size"):
        parse("[size(@0)]")


def test_top_level_lists():
    assert parse("[size(@0,0),-1]") == ListExpr((Size(X0, 0), Literal(-1)))
    assert parse("[1,size(@0,1),mul(size(@0,2),2)]") == ListExpr((Literal(1), Size(X0, 1), call("mul", Size(X0, 2), 2)))
    assert parse("[]") == ListExpr(())
    assert parse("[@0]") == ListExpr((X0,))


def test_num_inputs_bounds_the_input_numbers():
    assert parse("add(@0,@1)", num_inputs=2) == call("add", X0, X1)


def test_absurd_but_iterative_input_is_rejected_quickly():
    deep = "neg(" * 20_000 + "@0" + ")" * 20_000
    with pytest.raises(ExpressionSyntaxError, match=f"deeper than {MAX_DEPTH}"):
        parse(deep)
    with pytest.raises(ExpressionSyntaxError):
        parse("(" * 20_000)


def test_depth_limit_is_exact():
    at_limit = "neg(" * (MAX_DEPTH - 1) + "@0" + ")" * (MAX_DEPTH - 1)
    assert isinstance(parse(at_limit), Call)
    over = "neg(" * MAX_DEPTH + "@0" + ")" * MAX_DEPTH
    with pytest.raises(ExpressionSyntaxError) as info:
        parse(over)
    assert info.value.position == 0  # the outermost neg is one too many


# --- errors: a clear message and a caret at the right place ---------------------------------

ERRORS = [
    ("", 0, "empty expression"),
    ("   ", 0, "empty expression"),
    ("foo(@0)", 0, "unknown function 'foo'"),
    ("add(@0,bar)", 7, "unknown function 'bar'"),
    ("add(@0)", 0, "add takes 2 arguments but only 1 follow"),
    ("log1p", 0, "log1p takes 1 argument but none follow"),
    ("where(@0,@1)", 0, "where takes 3 arguments"),
    ("add(@0,@1,@2)", 10, "unexpected extra expression"),
    ("@0,@1", 3, "unexpected extra expression"),
    ("neg()", 4, "empty argument before ')'"),
    ("add(@0,,@1)", 7, "empty argument before ','"),
    (",@0", 0, "empty argument before ','"),
    ("add(@0,@1),", 10, "ends with ','"),
    ("add(@0,@1", 3, "'(' is never closed"),
    ("add(@0,@1))", 10, "unbalanced ')'"),
    (")(", 0, "unbalanced ')'"),
    ("add((@0,@1)", 4, "'(' must follow a function name"),
    ("@0(@1)", 2, "'(' must follow a function name"),
    ("True(@0)", 0, "True is a constant, not a function"),
    ("[@0,@1", 0, "'[' is never closed"),
    ("@0]", 2, "']' without a matching '['"),
    ("[@0],@1", 3, "']' must end the expression"),
    ("[@0,]", 4, "empty list item"),
    ("add(@0,[@1])", 7, "'[' may only open a list"),
    ("[[@0]]", 1, "'[' may only open a list"),
    ("add(@0 @1)", 7, "missing ','"),
    ("add(@0,@1)@2", 10, "missing ','"),
    ("size(1,2)", 0, "size(@N,d)"),
    ("size(@0,1.5)", 0, "size(@N,d)"),
    ("add(size(@0),1)", 0, "add takes 2 arguments"),
    ("99999999999999999999", 0, "64 bits"),
    ("mul(@0,$)", 7, "unexpected character"),
]


@pytest.mark.parametrize("text, position, message", ERRORS, ids=[e[0] or "empty" for e in ERRORS])
def test_bad_expressions_raise_with_a_caret(text, position, message):
    with pytest.raises(ExpressionSyntaxError) as info:
        parse(text)
    error = info.value
    assert message in error.reason
    assert error.position == position
    assert error.text == text
    if text.strip():
        lines = str(error).splitlines()
        assert lines[-2] == f"  {text}"
        assert lines[-1] == "  " + " " * position + "^"


def test_input_beyond_the_op_inputs():
    with pytest.raises(ExpressionSyntaxError, match="the op has 2 inputs") as info:
        parse("add(@0,@2)", num_inputs=2)
    assert info.value.position == 7


def test_not_a_string():
    with pytest.raises(ExpressionSyntaxError, match="must be a string"):
        parse(None)


def test_error_is_a_kuiper_model_format_error():
    from kuiper.errors import KuiperError, ModelFormatError

    with pytest.raises(ModelFormatError):
        parse("add(")
    assert issubclass(ExpressionSyntaxError, KuiperError)
