"""The PNNX expression language's tokens (the shared lexer with its table): kinds, values and positions."""

from __future__ import annotations

import math

import pytest

from kuiper.errors import ExpressionSyntaxError
from kuiper import lexing
from kuiper.lexing import COMPLEX, END, FLOAT, INT, NAME
from kuiper.pnnx_expr.parser import INPUT, TOKENS


def tokenize(text):
    """The tokens of ``text`` without the END token, which every token list ends with."""
    tokens = lexing.tokenize(text, TOKENS)
    assert tokens[-1].kind == END and tokens[-1].position == len(text)
    return tokens[:-1]


def kinds(text):
    return [t.kind for t in tokenize(text)]


def test_tokens_remember_their_position():
    tokens = tokenize("add(@0,mul(@12,2.5))")
    assert [(t.kind, t.text, t.position) for t in tokens] == [
        (NAME, "add", 0),
        ("(", "(", 3),
        (INPUT, "@0", 4),
        (",", ",", 6),
        (NAME, "mul", 7),
        ("(", "(", 10),
        (INPUT, "@12", 11),
        (",", ",", 14),
        (FLOAT, "2.5", 15),
        (")", ")", 18),
        (")", ")", 19),
    ]
    assert tokens[6].value == 12


def test_list_brackets_are_tokens():
    assert kinds("[size(@0,0),-1]") == ["[", NAME, "(", INPUT, ",", INT, ")", ",", INT, "]"]


@pytest.mark.parametrize(
    "text, kind, value",
    [
        ("2", INT, 2),
        ("-1", INT, -1),
        ("+7", INT, 7),
        ("2.0", FLOAT, 2.0),
        ("2.", FLOAT, 2.0),
        (".5", FLOAT, 0.5),
        ("-0.25", FLOAT, -0.25),
        ("1.000000e-05", FLOAT, 1e-05),
        ("1e-5", FLOAT, 1e-5),
        ("1E+3", FLOAT, 1000.0),
        ("3.402823e+38", FLOAT, 3.402823e38),
        ("inf", FLOAT, math.inf),
        ("-inf", FLOAT, -math.inf),
        ("+inf", FLOAT, math.inf),
        ("1.000000e+00+-2.000000e+00j", COMPLEX, complex(1, -2)),
        ("1.0+2.0j", COMPLEX, complex(1, 2)),
        ("1.200000e+00-9.000000e-01j", COMPLEX, complex(1.2, -0.9)),  # how pnnx prints a negative imaginary part
        ("-1.0-2.0j", COMPLEX, complex(-1, -2)),
        ("-0.5+0.0j", COMPLEX, complex(-0.5, 0)),
        ("3j", COMPLEX, complex(0, 3)),
        ("inf+nanj", COMPLEX, None),
    ],
)
def test_number_literals_in_every_printed_form(text, kind, value):
    (token,) = tokenize(text)
    assert token.kind == kind
    assert token.text == text
    if value is not None:
        assert token.value == value
        assert type(token.value) is type(value)


def test_nan_is_a_float():
    (token,) = tokenize("nan")
    assert token.kind == FLOAT and math.isnan(token.value)


def test_names_include_dotted_casts_and_keywords():
    assert [(t.kind, t.text) for t in tokenize("torch.float(True)")][:1] == [(NAME, "torch.float")]
    assert [t.text for t in tokenize("None,False,info")] == ["None", ",", "False", ",", "info"]


def test_whitespace_is_skipped():
    assert kinds(" add( @0 , 1 ) ") == [NAME, "(", INPUT, ",", INT, ")"]


@pytest.mark.parametrize(
    "text, position",
    [
        ("add(@0,$)", 7),
        ("@", 0),
        ("add(@x,1)", 4),
        ("1.2.3", 0),
        ("2abc", 0),
        ("1e", 0),
        ("-", 0),
        ("mul(@0,1+2)", 7),
        ("@0;", 2),
    ],
)
def test_bad_characters_point_at_the_problem(text, position):
    with pytest.raises(ExpressionSyntaxError) as info:
        tokenize(text)
    assert info.value.position == position
    assert info.value.text == text
    # The message shows the text and a caret under the position.
    lines = str(info.value).splitlines()
    assert lines[-2].strip() == text
    assert lines[-1].index("^") - 2 == position
