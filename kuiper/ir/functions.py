"""Every elementwise operation of the tensor IR, declared once.

One row per operation: its arity, its dtype rule, how each code generator
spells it, its algebraic properties, and its derivative.  ``make.py`` (dtype
rules), ``printer.py``, ``simplify.py``, ``xp_ops.py`` (NumPy/CuPy/array API),
``codegen_cuda.py`` and the autodiff of ``kuiper.te`` all read this table, so
adding a function is one row here (plus a C helper if C has no such function).

Three kinds of node carry an operation name (see nodes.py):

* ``Unary(op)`` and ``Binary(op)``: operators (``neg``, ``add``, ``shl`` ...);
* ``Compare(op)``: comparisons, whose result is bool;
* ``Call(func)``: intrinsic math functions (``exp``, ``erf``, ``atan2`` ...).

A derivative rule is ``rule(args, result, grad) -> tuple`` with one IR
expression per argument: the gradient flowing to that argument given the
gradient ``grad`` of the result (reverse mode).  None means "not
differentiable" (comparisons, bitwise operations, rounding has zero slope
almost everywhere and says so with ``ZERO``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

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
    symbol: str = ""  # infix symbol for the printer and C, when the operation has one
    c_name: str = ""  # C math function for double (float32 appends 'f'), when it is one
    commutative: bool = False
    summary: str = ""
    derivative: Callable | None = None


def _make():
    from kuiper.ir import make

    return make


# --- derivative rules (reverse mode; built with the typed constructors) -------------------------


def _d_neg(args, result, grad):
    return (_make().neg(grad),)


def _d_add(args, result, grad):
    return grad, grad


def _d_sub(args, result, grad):
    return grad, _make().neg(grad)


def _d_mul(args, result, grad):
    a, b = args
    m = _make()
    return m.mul(grad, b), m.mul(grad, a)


def _d_div(args, result, grad):
    a, b = args
    m = _make()
    return m.div(grad, b), m.neg(m.div(m.mul(grad, result), b))


def _d_mod(args, result, grad):
    a, b = args
    m = _make()
    return grad, m.neg(m.mul(grad, m.call("floor", m.div(a, b))))  # a - floor(a/b) * b


def _d_fmod(args, result, grad):
    a, b = args
    m = _make()
    return grad, m.neg(m.mul(grad, m.call("trunc", m.div(a, b))))  # a - trunc(a/b) * b


def _d_pow(args, result, grad):
    a, b = args
    m = _make()
    # d(a**b)/da = b * a**(b-1); d/db = a**b * log(a) (used only where a > 0 matters)
    return m.mul(grad, m.mul(b, m.pow(a, m.sub(b, 1)))), m.mul(grad, m.mul(result, m.call("log", a)))


def _d_max(args, result, grad):
    a, b = args
    m = _make()
    take_a = m.ge(a, b)
    return m.select(take_a, grad, 0), m.select(take_a, 0, grad)


def _d_min(args, result, grad):
    a, b = args
    m = _make()
    take_a = m.le(a, b)
    return m.select(take_a, grad, 0), m.select(take_a, 0, grad)


def _unary(rule: Callable) -> Callable:
    """A rule written as ``f'(x, f(x))`` becomes ``grad * f'``."""

    def derivative(args, result, grad):
        return (_make().mul(grad, rule(_make(), args[0], result)),)

    return derivative


def _sign(x):
    """sign(x), 0 at 0: the subgradient of |x| PyTorch uses."""
    from kuiper.ir.composites import sign

    return sign(x)


def _zero(args, result, grad):
    return tuple(_make().mul(grad, 0) for _ in args)


_SQRT_PI_OVER_2 = 0.886226925452758  # sqrt(pi) / 2: d erf(x)/dx = exp(-x^2) / (sqrt(pi)/2)


def _d_atan2(args, result, grad):
    y, x = args
    m = _make()
    denominator = m.add(m.mul(x, x), m.mul(y, y))
    return m.div(m.mul(grad, x), denominator), m.neg(m.div(m.mul(grad, y), denominator))


def _d_logaddexp(args, result, grad):
    a, b = args
    m = _make()
    return m.mul(grad, m.call("exp", m.sub(a, result))), m.mul(grad, m.call("exp", m.sub(b, result)))


def _op(name, arity, rule, array_names, symbol="", commutative=False, summary="", derivative=None):
    return Operation(name, arity, rule, tuple(array_names), symbol, "", commutative, summary, derivative)


def _fn(name, rule, c_name, array_names, summary, derivative=None, arity=1):
    return Operation(name, arity, rule, tuple(array_names), "", c_name, False, summary, derivative)


OPERATORS: dict[str, Operation] = {
    op.name: op
    for op in (
        _op("neg", 1, NUMERIC, ["negative"], "-", summary="-x", derivative=_d_neg),
        _op("not", 1, BOOL_RESULT, ["logical_not"], "!", summary="logical not"),
        _op("add", 2, NUMERIC, ["add"], "+", True, "a + b", _d_add),
        _op("sub", 2, NUMERIC, ["subtract"], "-", summary="a - b", derivative=_d_sub),
        _op("mul", 2, NUMERIC, ["multiply"], "*", True, "a * b", _d_mul),
        _op("div", 2, FLOAT, ["divide"], "/", summary="true division", derivative=_d_div),
        _op("floordiv", 2, NUMERIC, ["floor_divide"], "//", summary="rounds toward -inf", derivative=_zero),
        _op("mod", 2, NUMERIC, ["remainder"], "%", summary="sign of the divisor (Python)", derivative=_d_mod),
        _op("fmod", 2, NUMERIC, ["fmod"], summary="sign of the dividend (C)", derivative=_d_fmod),
        _op("pow", 2, NUMERIC, ["pow", "power"], "**", summary="a ** b", derivative=_d_pow),
        _op("max", 2, NUMERIC, ["maximum"], "", True, "NaN-propagating maximum", _d_max),
        _op("min", 2, NUMERIC, ["minimum"], "", True, "NaN-propagating minimum", _d_min),
        _op("and", 2, INTEGRAL, ["bitwise_and"], "&", True, "a & b"),
        _op("or", 2, INTEGRAL, ["bitwise_or"], "|", True, "a | b"),
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
        _fn("abs", NUMERIC, "fabs", ["abs"], "|x|", _unary(lambda m, x, y: _sign(x))),
        _fn("sqrt", FLOAT, "sqrt", ["sqrt"], "square root", _unary(lambda m, x, y: m.div(0.5, y))),
        _fn("exp", FLOAT, "exp", ["exp"], "e ** x", _unary(lambda m, x, y: y)),
        _fn("expm1", FLOAT, "expm1", ["expm1"], "e ** x - 1, exact near 0", _unary(lambda m, x, y: m.add(y, 1))),
        _fn("log", FLOAT, "log", ["log"], "natural logarithm", _unary(lambda m, x, y: m.div(1, x))),
        _fn("log10", FLOAT, "log10", ["log10"], "base-10 logarithm",
            _unary(lambda m, x, y: m.div(0.4342944819032518, x))),
        _fn("log1p", FLOAT, "log1p", ["log1p"], "log(1 + x), exact near 0", _unary(lambda m, x, y: m.div(1, m.add(x, 1)))),
        _fn("sin", FLOAT, "sin", ["sin"], "sine", _unary(lambda m, x, y: m.call("cos", x))),
        _fn("cos", FLOAT, "cos", ["cos"], "cosine", _unary(lambda m, x, y: m.neg(m.call("sin", x)))),
        _fn("tan", FLOAT, "tan", ["tan"], "tangent", _unary(lambda m, x, y: m.add(m.mul(y, y), 1))),
        _fn("asin", FLOAT, "asin", ["asin", "arcsin"], "arc sine",
            _unary(lambda m, x, y: m.div(1, m.call("sqrt", m.sub(1, m.mul(x, x)))))),
        _fn("acos", FLOAT, "acos", ["acos", "arccos"], "arc cosine",
            _unary(lambda m, x, y: m.div(-1, m.call("sqrt", m.sub(1, m.mul(x, x)))))),
        _fn("atan", FLOAT, "atan", ["atan", "arctan"], "arc tangent",
            _unary(lambda m, x, y: m.div(1, m.add(m.mul(x, x), 1)))),
        _fn("sinh", FLOAT, "sinh", ["sinh"], "hyperbolic sine", _unary(lambda m, x, y: m.call("cosh", x))),
        _fn("cosh", FLOAT, "cosh", ["cosh"], "hyperbolic cosine", _unary(lambda m, x, y: m.call("sinh", x))),
        _fn("tanh", FLOAT, "tanh", ["tanh"], "hyperbolic tangent", _unary(lambda m, x, y: m.sub(1, m.mul(y, y)))),
        _fn("asinh", FLOAT, "asinh", ["asinh", "arcsinh"], "inverse hyperbolic sine",
            _unary(lambda m, x, y: m.div(1, m.call("sqrt", m.add(m.mul(x, x), 1))))),
        _fn("acosh", FLOAT, "acosh", ["acosh", "arccosh"], "inverse hyperbolic cosine",
            _unary(lambda m, x, y: m.div(1, m.call("sqrt", m.sub(m.mul(x, x), 1))))),
        _fn("atanh", FLOAT, "atanh", ["atanh", "arctanh"], "inverse hyperbolic tangent",
            _unary(lambda m, x, y: m.div(1, m.sub(1, m.mul(x, x))))),
        _fn("erf", FLOAT, "erf", ["erf"], "error function",
            _unary(lambda m, x, y: m.div(m.call("exp", m.neg(m.mul(x, x))), _SQRT_PI_OVER_2))),
        _fn("floor", ROUNDING, "floor", ["floor"], "round down", _zero),
        _fn("ceil", ROUNDING, "ceil", ["ceil"], "round up", _zero),
        _fn("round", ROUNDING, "rint", ["rint", "round"], "round half to even (as torch.round)", _zero),
        _fn("trunc", ROUNDING, "trunc", ["trunc"], "round toward zero", _zero),
        _fn("atan2", FLOAT, "atan2", ["atan2", "arctan2"], "atan2(y, x)", _d_atan2, arity=2),
        _fn("logaddexp", FLOAT, "", ["logaddexp"], "log(exp(a) + exp(b))", _d_logaddexp, arity=2),
    )
}


def operation(name: str) -> Operation:
    """The row for an operator, comparison or intrinsic name."""
    found = OPERATORS.get(name) or INTRINSICS.get(name)
    if found is None:
        from kuiper.errors import IRError

        raise IRError(f"unknown IR operation {name!r}")
    return found


def describe() -> str:
    """A plain-text table of every operation (for docs and `kuiper` help)."""
    rows = [*OPERATORS.values(), *INTRINSICS.values()]
    return "\n".join(f"{op.name:<10} {op.arity}  {op.rule:<9} {op.summary}" for op in rows)
