"""The derivative of every differentiable row of functions.py, in reverse mode.

A rule is ``rule(args, result, grad) -> tuple`` with one IR expression per
argument: the gradient flowing to that argument given the gradient ``grad``
of the result.  An operation without a rule is not differentiable
(comparisons, bitwise operations); rounding has zero slope almost everywhere
and says so with ``_zero``.  The rules are built with the typed constructors
(make.py), which read functions.py, so they sit beside that table rather
than in it.
"""

from __future__ import annotations

from collections.abc import Callable

from kuiper.ir import make as m
from kuiper.ir.composites import sign

_SQRT_PI_OVER_2 = 0.886226925452758  # sqrt(pi) / 2: d erf(x)/dx = exp(-x^2) / (sqrt(pi)/2)
_LOG10_E = 0.4342944819032518  # d log10(x)/dx = log10(e) / x


def _d_div(args, result, grad):
    a, b = args
    return m.div(grad, b), m.neg(m.div(m.mul(grad, result), b))


def _d_pow(args, result, grad):
    a, b = args
    # d(a**b)/da = b * a**(b-1); d/db = a**b * log(a) (used only where a > 0 matters)
    return m.mul(grad, m.mul(b, m.pow(a, m.sub(b, 1)))), m.mul(grad, m.mul(result, m.call("log", a)))


def _d_bound(keep_a: Callable) -> Callable:
    """max/min: the gradient goes to the operand that was taken (``a`` on ties)."""

    def derivative(args, result, grad):
        take_a = keep_a(*args)
        return m.select(take_a, grad, 0), m.select(take_a, 0, grad)

    return derivative


def _d_remainder(rounding: str) -> Callable:
    """mod and fmod: a - round(a / b) * b, rounded with floor (mod) or trunc (fmod)."""

    def derivative(args, result, grad):
        a, b = args
        return grad, m.neg(m.mul(grad, m.call(rounding, m.div(a, b))))

    return derivative


def _unary(rule: Callable) -> Callable:
    """A rule written as ``f'(x, f(x))`` becomes ``grad * f'``."""

    def derivative(args, result, grad):
        return (m.mul(grad, rule(args[0], result)),)

    return derivative


def _zero(args, result, grad):
    return tuple(m.mul(grad, 0) for _ in args)


def _d_atan2(args, result, grad):
    y, x = args
    denominator = m.add(m.mul(x, x), m.mul(y, y))
    return m.div(m.mul(grad, x), denominator), m.neg(m.div(m.mul(grad, y), denominator))


def _d_logaddexp(args, result, grad):
    a, b = args
    return m.mul(grad, m.call("exp", m.sub(a, result))), m.mul(grad, m.call("exp", m.sub(b, result)))


DERIVATIVES: dict[str, Callable] = {
    # operators
    "neg": lambda args, result, grad: (m.neg(grad),),
    "add": lambda args, result, grad: (grad, grad),
    "sub": lambda args, result, grad: (grad, m.neg(grad)),
    "mul": lambda args, result, grad: (m.mul(grad, args[1]), m.mul(grad, args[0])),
    "div": _d_div,
    "floordiv": _zero,
    "mod": _d_remainder("floor"),
    "fmod": _d_remainder("trunc"),
    "pow": _d_pow,
    "max": _d_bound(m.ge),
    "min": _d_bound(m.le),
    # intrinsics
    "abs": _unary(lambda x, y: sign(x)),  # the subgradient 0 at 0, as PyTorch
    "sqrt": _unary(lambda x, y: m.div(0.5, y)),
    "exp": _unary(lambda x, y: y),
    "expm1": _unary(lambda x, y: m.add(y, 1)),
    "log": _unary(lambda x, y: m.div(1, x)),
    "log10": _unary(lambda x, y: m.div(_LOG10_E, x)),
    "log1p": _unary(lambda x, y: m.div(1, m.add(x, 1))),
    "sin": _unary(lambda x, y: m.call("cos", x)),
    "cos": _unary(lambda x, y: m.neg(m.call("sin", x))),
    "tan": _unary(lambda x, y: m.add(m.mul(y, y), 1)),
    "asin": _unary(lambda x, y: m.div(1, m.call("sqrt", m.sub(1, m.mul(x, x))))),
    "acos": _unary(lambda x, y: m.div(-1, m.call("sqrt", m.sub(1, m.mul(x, x))))),
    "atan": _unary(lambda x, y: m.div(1, m.add(m.mul(x, x), 1))),
    "sinh": _unary(lambda x, y: m.call("cosh", x)),
    "cosh": _unary(lambda x, y: m.call("sinh", x)),
    "tanh": _unary(lambda x, y: m.sub(1, m.mul(y, y))),
    "asinh": _unary(lambda x, y: m.div(1, m.call("sqrt", m.add(m.mul(x, x), 1)))),
    "acosh": _unary(lambda x, y: m.div(1, m.call("sqrt", m.sub(m.mul(x, x), 1)))),
    "atanh": _unary(lambda x, y: m.div(1, m.sub(1, m.mul(x, x)))),
    "erf": _unary(lambda x, y: m.div(m.call("exp", m.neg(m.mul(x, x))), _SQRT_PI_OVER_2)),
    "floor": _zero,
    "ceil": _zero,
    "round": _zero,
    "trunc": _zero,
    "atan2": _d_atan2,
    "logaddexp": _d_logaddexp,
}


def derivative(name: str) -> Callable | None:
    """The reverse-mode rule of an operator or intrinsic, or None when it has none."""
    return DERIVATIVES.get(name)
