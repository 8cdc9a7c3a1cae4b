"""Properties over generated input: printing round-trips, and bad text only raises ExpressionSyntaxError."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuiper.errors import ExpressionSyntaxError
from kuiper.pnnx_expr import FUNCTIONS, Call, Expr, Input, ListExpr, Literal, Size, parse, to_string

FUNCTION_NAMES = sorted(FUNCTIONS)

inputs = st.integers(0, 6).map(Input)
literals = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.complex_numbers(allow_nan=True, allow_infinity=True),
).map(Literal)
sizes = st.builds(Size, inputs, st.integers(-8, 8))


def _calls(children):
    return st.sampled_from(FUNCTION_NAMES).flatmap(
        lambda name: st.tuples(*[children] * FUNCTIONS[name].arity).map(lambda args: Call(name, args))
    )


values = st.recursive(st.one_of(inputs, literals, sizes), _calls, max_leaves=24)
expressions = st.one_of(
    values,
    st.lists(values, max_size=5).map(lambda items: ListExpr(tuple(items))),
    inputs.map(lambda i: Size(i, None)),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expressions)
def test_print_then_parse_gives_the_same_ast(expr: Expr):
    text = to_string(expr)
    assert parse(text) == expr
    assert to_string(parse(text)) == text


# --- fuzzing: nothing but ExpressionSyntaxError escapes -------------------------------------

ALPHABET = "@0123456789()[],.+-eEjinfaTrueFlsNoxdmulb_ \t$#"
ATOMS = "size @0 @1 @99 2 -1 0.5 1e-5 inf nan True None 1.0+-2.0j foo torch. @ - .".split()
vocabulary = st.sampled_from([*FUNCTION_NAMES, *ATOMS, "(", ")", ",", "[", "]", " "])


def _parse_or_syntax_error(text: str):
    try:
        expr = parse(text, num_inputs=4)
    except ExpressionSyntaxError as error:
        assert error.text == text or not text.strip()
        str(error)  # the message with its caret renders
        return None
    # Whatever parses also prints and reads back.
    assert parse(to_string(expr)) == expr
    return expr


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=ALPHABET, max_size=60))
def test_fuzz_characters(text):
    _parse_or_syntax_error(text)


@settings(max_examples=400, deadline=None)
@given(st.lists(vocabulary, max_size=40).map("".join))
def test_fuzz_token_soup(text):
    _parse_or_syntax_error(text)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_fuzz_any_unicode(text):
    _parse_or_syntax_error(text)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(FUNCTION_NAMES), st.integers(200, 3000))
def test_fuzz_deep_nesting(name, depth):
    arity = FUNCTIONS[name].arity
    text = f"{name}(" * depth + ",".join(["@0"] * arity) + ")" * depth
    _parse_or_syntax_error(text)
