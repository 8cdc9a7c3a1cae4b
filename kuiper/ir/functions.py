"""Every elementwise operation of the tensor IR, declared once.

One row per operation: its arity, its dtype rule, how each target spells it
and its algebraic properties.  ``make.py`` (dtype rules), the renderers
(``printer.py``, ``render_c.py``, ``render_numpy.py``), ``simplify.py`` and
``xp_ops.py`` (NumPy/CuPy/array API) all read this table; the derivative of
each row sits beside it in ``derivatives.py`` (it is built with the typed
constructors, which read this table).  Adding a function is one row here,
one rule there (plus a C helper if C has no such function).

Three kinds of node carry an operation name (see nodes.py):

* ``Unary(op)`` and ``Binary(op)``: operators (``neg``, ``add``, ``shl`` ...);
* ``Compare(op)``: comparisons, whose result is bool;
* ``Call(func)``: intrinsic math functions (``exp``, ``erf``, ``atan2`` ...).

Spellings:

* ``symbol``: the infix (or, for arity 1, prefix) symbol of the readable
  printer, of C and of Python, where that language's operator means the same;
* ``c_name``: C for floating operands: a <cmath> function for double (float32
  appends ``f``) or one of the ``kuiper_`` helper templates (render_c.py);
* ``c_integer``: C for integer and bool operands, where the symbol does not
  mean the same (Python's ``//`` and ``%`` round toward -inf, C's toward 0);
* ``c_bool``: C's logical operator, for and/or of bools;
* ``array_names``: the array-API name first, then NumPy's.
"""

from __future__ import annotations

from dataclasses import dataclass

from kuiper.errors import IRError

# Dtype rules (applied by make.py):
FLOAT = "float"  # integer and bool operands are promoted to float first (exp, sqrt, atan2 ...)
ROUNDING = "rounding"  # identity on integers (floor, round ...)
NUMERIC = "numeric"  # any numeric dtype, result in the promoted dtype (abs, add ...)
INTEGRAL = "integral"  # bool or integer operands only (and, or, shl ...)
BOOL_RESULT = "bool"  # the result is bool (comparisons, not)


@dataclass(frozen=True)
class Operation:
    name: str  # the name in IR nodes
    arity: int
    rule: str  # one of the dtype rules above
    array_names: tuple[str, ...]  # array-API spelling first, then NumPy's
    symbol: str = ""  # infix symbol (prefix for arity 1), when the operation has one
    c_name: str = ""  # C for floating operands, when it is a function
    c_integer: str = ""  # C for integer operands, when it is a function
    c_bool: str = ""  # C for bool operands, when it differs from the symbol
    commutative: bool = False
    summary: str = ""


def _op(name, arity, rule, array_names, symbol="", commutative=False, summary="", c_name="", c_integer="", c_bool=""):
    return Operation(name, arity, rule, tuple(array_names), symbol, c_name, c_integer, c_bool, commutative, summary)


def _fn(name, rule, c_name, array_names, summary, arity=1, c_integer=""):
    return Operation(name, arity, rule, tuple(array_names), "", c_name, c_integer, "", False, summary)


OPERATORS: dict[str, Operation] = {
    op.name: op
    for op in (
        _op("neg", 1, NUMERIC, ["negative"], "-", summary="-x"),
        _op("not", 1, BOOL_RESULT, ["logical_not"], "!", summary="logical not"),
        _op("add", 2, NUMERIC, ["add"], "+", True, "a + b"),
        _op("sub", 2, NUMERIC, ["subtract"], "-", summary="a - b"),
        _op("mul", 2, NUMERIC, ["multiply"], "*", True, "a * b"),
        _op("div", 2, FLOAT, ["divide"], "/", summary="true division"),
        _op("floordiv", 2, NUMERIC, ["floor_divide"], "//", summary="rounds toward -inf",
            c_name="kuiper_floordiv_float", c_integer="kuiper_floordiv_int"),
        _op("mod", 2, NUMERIC, ["remainder"], "%", summary="sign of the divisor (Python)",
            c_name="kuiper_remainder_float", c_integer="kuiper_remainder_int"),
        _op("fmod", 2, NUMERIC, ["fmod"], summary="sign of the dividend (C)",
            c_name="fmod", c_integer="kuiper_fmod_int"),
        _op("pow", 2, NUMERIC, ["pow", "power"], "**", summary="a ** b", c_name="pow", c_integer="kuiper_pow_int"),
        _op("max", 2, NUMERIC, ["maximum"], "", True, "NaN-propagating maximum", "kuiper_max", "kuiper_max"),
        _op("min", 2, NUMERIC, ["minimum"], "", True, "NaN-propagating minimum", "kuiper_min", "kuiper_min"),
        _op("and", 2, INTEGRAL, ["bitwise_and"], "&", True, "a & b", c_bool="&&"),
        _op("or", 2, INTEGRAL, ["bitwise_or"], "|", True, "a | b", c_bool="||"),
        _op("xor", 2, INTEGRAL, ["bitwise_xor"], "^", True, "a ^ b"),
        _op("shl", 2, INTEGRAL, ["bitwise_left_shift", "left_shift"], "<<", summary="a << b"),
        _op("shr", 2, INTEGRAL, ["bitwise_right_shift", "right_shift"], ">>", summary="a >> b (arithmetic)"),
        _op("gt", 2, BOOL_RESULT, ["greater"], ">"),
        _op("ge", 2, BOOL_RESULT, ["greater_equal"], ">="),
        _op("lt", 2, BOOL_RESULT, ["less"], "<"),
        _op("le", 2, BOOL_RESULT, ["less_equal"], "<="),
        _op("eq", 2, BOOL_RESULT, ["equal"], "==", True),
        _op("ne", 2, BOOL_RESULT, ["not_equal"], "!=", True),
    )
}

INTRINSICS: dict[str, Operation] = {
    fn.name: fn
    for fn in (
        _fn("abs", NUMERIC, "fabs", ["abs"], "|x|", c_integer="kuiper_abs_int"),
        _fn("sqrt", FLOAT, "sqrt", ["sqrt"], "square root"),
        _fn("exp", FLOAT, "exp", ["exp"], "e ** x"),
        _fn("expm1", FLOAT, "expm1", ["expm1"], "e ** x - 1, exact near 0"),
        _fn("log", FLOAT, "log", ["log"], "natural logarithm"),
        _fn("log10", FLOAT, "log10", ["log10"], "base-10 logarithm"),
        _fn("log1p", FLOAT, "log1p", ["log1p"], "log(1 + x), exact near 0"),
        _fn("sin", FLOAT, "sin", ["sin"], "sine"),
        _fn("cos", FLOAT, "cos", ["cos"], "cosine"),
        _fn("tan", FLOAT, "tan", ["tan"], "tangent"),
        _fn("asin", FLOAT, "asin", ["asin", "arcsin"], "arc sine"),
        _fn("acos", FLOAT, "acos", ["acos", "arccos"], "arc cosine"),
        _fn("atan", FLOAT, "atan", ["atan", "arctan"], "arc tangent"),
        _fn("sinh", FLOAT, "sinh", ["sinh"], "hyperbolic sine"),
        _fn("cosh", FLOAT, "cosh", ["cosh"], "hyperbolic cosine"),
        _fn("tanh", FLOAT, "tanh", ["tanh"], "hyperbolic tangent"),
        _fn("asinh", FLOAT, "asinh", ["asinh", "arcsinh"], "inverse hyperbolic sine"),
        _fn("acosh", FLOAT, "acosh", ["acosh", "arccosh"], "inverse hyperbolic cosine"),
        _fn("atanh", FLOAT, "atanh", ["atanh", "arctanh"], "inverse hyperbolic tangent"),
        _fn("erf", FLOAT, "erf", ["erf"], "error function"),
        _fn("floor", ROUNDING, "floor", ["floor"], "round down"),
        _fn("ceil", ROUNDING, "ceil", ["ceil"], "round up"),
        _fn("round", ROUNDING, "rint", ["rint", "round"], "round half to even (as torch.round)"),
        _fn("trunc", ROUNDING, "trunc", ["trunc"], "round toward zero"),
        _fn("atan2", FLOAT, "atan2", ["atan2", "arctan2"], "atan2(y, x)", arity=2),
        _fn("logaddexp", FLOAT, "kuiper_logaddexp", ["logaddexp"], "log(exp(a) + exp(b))", arity=2),
    )
}


def operation(name: str) -> Operation:
    """The row for an operator, comparison or intrinsic name."""
    found = OPERATORS.get(name) or INTRINSICS.get(name)
    if found is None:
        raise IRError(f"unknown IR operation {name!r}")
    return found


def describe() -> str:
    """A plain-text table of every operation (for docs and `kuiper` help)."""
    rows = [*OPERATORS.values(), *INTRINSICS.values()]
    return "\n".join(f"{op.name:<10} {op.arity}  {op.rule:<9} {op.summary}" for op in rows)
