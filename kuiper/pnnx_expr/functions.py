"""The table of functions an expression may call.

PNNX writes the functions marked ``pnnx``.  The ``internal`` ones are never
in a model file: the graph's fusion pass writes them when it folds an
activation op into an expression.  Each entry has a fixed arity, because the
parser reads prefix calls by arity, not by parentheses (see parser.py).

Composite internal functions are expanded into primitives when lowered to
the IR by kuiper/pnnx_expr/lower.py, which calls kuiper.ir.composites (where each
formula is written); ``expansion`` here only documents it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FunctionInfo:
    name: str
    arity: int
    category: str  # "math", "cast", "arith", "bitwise", "compare", "select", "activation"
    source: str  # "pnnx" (written by PNNX) or "internal" (written by kuiper's fusion)
    summary: str
    expansion: str = ""  # for composites: the formula lowering uses


def _table(*infos: FunctionInfo) -> dict[str, FunctionInfo]:
    return {info.name: info for info in infos}


def _math(name: str, summary: str, expansion: str = "") -> FunctionInfo:
    return FunctionInfo(name, 1, "math", "pnnx", summary, expansion)


def _arith(name: str, summary: str) -> FunctionInfo:
    return FunctionInfo(name, 2, "arith", "pnnx", summary)


def _act(name: str, arity: int, summary: str, expansion: str) -> FunctionInfo:
    return FunctionInfo(name, arity, "activation", "internal", summary, expansion)


FUNCTIONS: dict[str, FunctionInfo] = _table(
    # --- unary math, as written by PNNX ---------------------------------
    _math("neg", "-x"),
    _math("abs", "|x|"),
    _math("sign", "-1, 0 or 1 (0 for NaN, as torch.sign)", "(x > 0) - (x < 0)"),
    _math("sqrt", "square root"),
    _math("rsqrt", "1 / sqrt(x)", "1 / sqrt(x)"),
    _math("square", "x * x", "x * x"),
    _math("reciprocal", "1 / x (always floating)", "1 / x"),
    _math("exp", "e ** x"),
    _math("expm1", "e ** x - 1"),
    _math("log", "natural logarithm"),
    _math("log10", "base-10 logarithm"),
    _math("log1p", "log(1 + x)"),
    _math("sin", "sine"),
    _math("cos", "cosine"),
    _math("tan", "tangent"),
    _math("asin", "arc sine"),
    _math("acos", "arc cosine"),
    _math("atan", "arc tangent"),
    _math("sinh", "hyperbolic sine"),
    _math("cosh", "hyperbolic cosine"),
    _math("tanh", "hyperbolic tangent"),
    _math("asinh", "inverse hyperbolic sine"),
    _math("acosh", "inverse hyperbolic cosine"),
    _math("atanh", "inverse hyperbolic tangent"),
    _math("erf", "error function"),
    _math("floor", "round down (identity on integers)"),
    _math("ceil", "round up (identity on integers)"),
    _math("round", "round half to even (identity on integers)"),
    _math("trunc", "round toward zero (identity on integers)"),
    _math("int", "Python int(): truncates a scalar, identity on a tensor"),
    # --- casts --------------------------------------------------------------
    FunctionInfo("torch.bool", 1, "cast", "pnnx", "cast to bool"),
    FunctionInfo("torch.float", 1, "cast", "pnnx", "cast to float32"),
    FunctionInfo("torch.long", 1, "cast", "pnnx", "cast to int64"),
    # --- binary arithmetic ----------------------------------------------------
    _arith("add", "a + b"),
    _arith("sub", "a - b"),
    _arith("mul", "a * b"),
    _arith("div", "a / b, true division (integers give float32)"),
    _arith("floor_divide", "a // b, rounds toward -inf (Python semantics)"),
    _arith("remainder", "a % b, sign of b (Python semantics)"),
    _arith("fmod", "C fmod, sign of a"),
    _arith("pow", "a ** b"),
    _arith("atan2", "atan2(a, b)"),
    _arith("max", "elementwise maximum, NaN-propagating (torch.max(a, b))"),
    _arith("min", "elementwise minimum, NaN-propagating (torch.min(a, b))"),
    _arith("maximum", "elementwise maximum, NaN-propagating"),
    _arith("minimum", "elementwise minimum, NaN-propagating"),
    _arith("logaddexp", "log(exp(a) + exp(b))"),
    # --- bitwise / logical -------------------------------------------------------
    FunctionInfo("and", 2, "bitwise", "pnnx", "a & b (bool or integer)"),
    FunctionInfo("or", 2, "bitwise", "pnnx", "a | b (bool or integer)"),
    FunctionInfo("xor", 2, "bitwise", "pnnx", "a ^ b (bool or integer)"),
    FunctionInfo("lshift", 2, "bitwise", "pnnx", "a << b (integer)"),
    FunctionInfo("rshift", 2, "bitwise", "pnnx", "a >> b (integer)"),
    # --- internal: comparisons and selection ---------------------------------
    FunctionInfo("gt", 2, "compare", "internal", "a > b"),
    FunctionInfo("ge", 2, "compare", "internal", "a >= b"),
    FunctionInfo("lt", 2, "compare", "internal", "a < b"),
    FunctionInfo("le", 2, "compare", "internal", "a <= b"),
    FunctionInfo("eq", 2, "compare", "internal", "a == b"),
    FunctionInfo("ne", 2, "compare", "internal", "a != b"),
    FunctionInfo("where", 3, "select", "internal", "cond ? a : b (torch.where)"),
    # --- internal: activations the fusion pass folds into expressions ----------
    _act("relu", 1, "max(x, 0)", "max(x, 0)"),
    _act("clamp", 3, "min(max(x, lo), hi)", "min(max(x, lo), hi)"),
    _act("sigmoid", 1, "logistic function", "1 / (1 + exp(-x))"),
    _act("silu", 1, "x * sigmoid(x)", "x / (1 + exp(-x))"),
    _act("gelu", 1, "exact GELU", "0.5 * x * (1 + erf(x * 0.7071067811865476))"),
    _act(
        "gelu_tanh",
        1,
        "GELU, tanh approximation",
        "0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))",
    ),
    _act("hardsigmoid", 1, "relu6(x + 3) / 6", "min(max(x + 3, 0), 6) / 6"),
    _act("hardswish", 1, "x * relu6(x + 3) / 6", "x * min(max(x + 3, 0), 6) / 6"),
    _act("softplus", 1, "log(1 + exp(x)), overflow-safe", "max(x, 0) + log1p(exp(-|x|))"),
    _act("mish", 1, "x * tanh(softplus(x))", "x * tanh(softplus(x))"),
    _act("leaky_relu", 2, "x if x > 0 else x * slope", "where(x > 0, x, x * slope)"),
    _act("elu", 2, "x if x > 0 else alpha * expm1(x)", "where(x > 0, x, alpha * expm1(x))"),
)


def describe_functions() -> str:
    """A plain-text table of every function, for documentation and error messages."""
    lines = []
    for info in FUNCTIONS.values():
        formula = f"  = {info.expansion}" if info.expansion else ""
        lines.append(f"{info.name:<13} {info.arity}  {info.source:<8} {info.summary}{formula}")
    return "\n".join(lines)
