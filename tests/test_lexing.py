"""The shared lexer (kuiper.lexing) under both token tables, and the one error type it raises."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kuiper.errors import ExpressionSyntaxError, LanguageSyntaxError, ModelFormatError, TESyntaxError
from kuiper.lexing import COMPLEX, END, FLOAT, INT, NAME, Token, tokenize
from kuiper.pnnx_expr.parser import INPUT
from kuiper.pnnx_expr.parser import TOKENS as PNNX
from kuiper.te.parser import TOKENS as TE


def pairs(text, table):
    return [(t.kind, t.text) for t in tokenize(text, table)]


# --- one text, two tables ----------------------------------------------------------------------


def test_a_minus_sign_is_part_of_a_pnnx_number_but_an_operator_in_te():
    assert pairs("a,-1", PNNX) == [(NAME, "a"), (",", ","), (INT, "-1"), (END, "")]
    assert pairs("a-1", TE) == [(NAME, "a"), ("-", "-"), (INT, "1"), (END, "")]
    assert tokenize("-1", PNNX)[0].value == -1


def test_dotted_names_only_in_pnnx():
    assert pairs("torch.float", PNNX)[0] == (NAME, "torch.float")
    with pytest.raises(TESyntaxError, match="unexpected character '.'") as info:
        tokenize("torch.float", TE)
    assert info.value.position == 5


def test_inf_nan_and_complex_only_in_pnnx():
    assert [(t.kind, t.value) for t in tokenize("inf,3j", PNNX)[::2]] == [(FLOAT, float("inf")), (COMPLEX, 3j)]
    assert pairs("inf", TE)[0] == (NAME, "inf")  # an index variable may be called inf
    with pytest.raises(TESyntaxError, match="malformed number"):
        tokenize("3j", TE)


def test_keywords_are_their_own_kind():
    assert [t.kind for t in tokenize("None,True,Nonesuch", PNNX)] == ["None", ",", "True", ",", NAME, END]
    assert [t.kind for t in tokenize("where select wherever", TE)] == ["where", "select", NAME, END]
    assert [t.kind for t in tokenize("True", TE)] == [NAME, END]


def test_prefixed_integers_only_in_pnnx():
    (token, _end) = tokenize("@12", PNNX)
    assert (token.kind, token.value) == (INPUT, 12)
    with pytest.raises(TESyntaxError, match="unexpected character '@'"):
        tokenize("@12", TE)


def test_te_operators_take_the_longest_match():
    assert [t.kind for t in tokenize("a+=b//c<=d&&!e!=f||g", TE)][:-1] == [
        NAME, "+=", NAME, "//", NAME, "<=", NAME, "&&", "!", NAME, "!=", NAME, "||", NAME,
    ]  # fmt: skip


def test_te_comments_run_to_the_end_of_the_line():
    tokens = tokenize("A # a comment; B\nC", TE)
    assert [(t.text, t.position) for t in tokens] == [("A", 0), ("C", 17), ("", 18)]


def test_a_number_glued_to_a_name_is_malformed_in_both_languages():
    for table, error in ((PNNX, ExpressionSyntaxError), (TE, TESyntaxError)):
        with pytest.raises(error, match="malformed number") as info:
            tokenize("x, 2abc", table)
        assert info.value.position == 3


def test_every_token_list_ends_with_end_at_the_text_length():
    for text, table in (("", PNNX), ("   ", TE), ("add(@0,1)", PNNX), ("A[i] = 1; # done", TE)):
        assert tokenize(text, table)[-1] == Token(END, "", len(text))


# --- one error type: line, column and a caret ------------------------------------------------------


def test_both_languages_raise_one_error_type():
    for table, error in ((PNNX, ExpressionSyntaxError), (TE, TESyntaxError)):
        assert issubclass(error, LanguageSyntaxError) and issubclass(error, ModelFormatError)
        with pytest.raises(LanguageSyntaxError):
            tokenize("$", table)


@pytest.mark.parametrize("table", [PNNX, TE], ids=["pnnx", "te"])
def test_errors_on_a_later_line_name_line_and_column(table):
    text = "x,\n\n  y, $z"
    with pytest.raises(LanguageSyntaxError) as info:
        tokenize(text, table)
    error = info.value
    assert (error.position, error.line, error.column) == (9, 3, 6)
    assert str(error).splitlines() == [
        "line 3, column 6: unexpected character '$'",
        "    y, $z",
        "       ^",
    ]


def test_a_one_line_text_names_only_the_column():
    with pytest.raises(ExpressionSyntaxError) as info:
        tokenize("add(@0,$)", PNNX)
    assert (info.value.line, info.value.column) == (1, 8)
    assert str(info.value).splitlines() == ["column 8: unexpected character '$'", "  add(@0,$)", "         ^"]


def test_a_position_at_the_end_puts_the_caret_after_the_last_character():
    error = TESyntaxError("expected ';'", "A[i] = 1\nB[i] = 2", 17)
    assert (error.line, error.column) == (2, 9)
    assert str(error).splitlines()[-1] == "  " + " " * 8 + "^"


def test_context_leads_and_the_bare_reason_is_kept():
    error = ExpressionSyntaxError("unknown function 'frob'", "add(@0,frob(@0))", 7, context="m.pnnx.param:4: op 'e'")
    assert str(error).startswith("m.pnnx.param:4: op 'e': column 8: unknown function 'frob'\n")
    assert error.reason == "unknown function 'frob'"


def test_without_a_position_the_message_is_bare():
    error = TESyntaxError("a kernel's dtype must be floating-point")
    assert str(error) == "a kernel's dtype must be floating-point"
    assert error.line is None and error.column is None


# --- properties: tokens tile the text, and nothing but the language's error escapes ---------------

PNNX_TEXT = st.text(alphabet="add(@01,.5e-+j)[]infTrue \n$x", max_size=30)
TE_TEXT = st.text(alphabet="A<4>[i]=+-*/%&|!;(),.5e where#\nx$", max_size=30)


@pytest.mark.parametrize(
    "table, texts, error",
    [(PNNX, PNNX_TEXT, ExpressionSyntaxError), (TE, TE_TEXT, TESyntaxError)],
    ids=["pnnx", "te"],
)
def test_tokens_are_the_text_at_their_positions(table, texts, error):
    @given(texts)
    def check(text):
        try:
            tokens = tokenize(text, table)
        except error as exc:
            assert 0 <= exc.position < len(text)
            assert exc.line == text.count("\n", 0, exc.position) + 1
            return
        ends = [0]
        for token in tokens:
            assert text[token.position : token.position + len(token.text)] == token.text
            skipped = text[ends[-1] : token.position]
            if table.comment:
                skipped = re.sub(re.escape(table.comment) + "[^\n]*", "", skipped)
            assert skipped.strip() == ""  # only whitespace and comments lie between tokens
            ends.append(token.position + len(token.text))

    check()
