"""Lower an expression AST to an elementwise IR Function.

``lower(parse("add(relu(@0),@1)"), ["float32", "float32"])`` gives::

    func expression(x0: float32, x1: float32) -> (out: float32) {
      out = (max(x0, 0.0) + x1)
    }

Input ``@i`` becomes parameter ``x{i}`` with ``input_dtypes[i]``: a tensor
dtype ('float32', 'int64', 'bool' ...) or a Python scalar ('pyint',
'pyfloat', 'pybool'; see dtypes.py).  Composite functions (sigmoid, gelu,
sign, rsqrt ...) are expanded into primitives here, with the formulas
PyTorch's CPU kernels use, so code generators only see primitives.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy

from kuiper.errors import ExpressionSyntaxError
from kuiper.expr.nodes import Call, Expr, Input, ListExpr, Literal, Size
from kuiper.expr.printer import to_string
from kuiper.expr.recursion import deep_recursion
from kuiper.ir import dtypes, make
from kuiper.ir.nodes import Assign, Block, DimSize, Function, IRExpr, Var


def lower(expr: Expr, input_dtypes: Sequence[str], name: str = "expression") -> Function:
    input_dtypes = [_dtype_name(d) for d in input_dtypes]
    for index, dtype in enumerate(input_dtypes):
        if not (dtype in dtypes.TENSOR_DTYPES or dtype in dtypes.SCALAR_DTYPES):
            raise ExpressionSyntaxError(
                f"input {index} has dtype {dtype!r}; expected one of "
                f"{', '.join([*dtypes.TENSOR_DTYPES, *dtypes.SCALAR_DTYPES])}"
            )
    params = tuple(Var(f"x{i}", dtype) for i, dtype in enumerate(input_dtypes))
    items = expr.items if isinstance(expr, ListExpr) else (expr,)
    lowering = _Lowering(params, expr)
    with deep_recursion():
        values = [lowering.top_level(item) for item in items]
    if isinstance(expr, ListExpr):
        results = tuple(Var(f"out{i}", v.dtype) for i, v in enumerate(values))
    else:
        results = (Var("out", values[0].dtype),)
    body = Block(tuple(Assign(r, v) for r, v in zip(results, values)))
    return Function(name, params, body, results, isinstance(expr, ListExpr))


def _dtype_name(dtype) -> str:
    """Accept NumPy dtypes and scalar types too: numpy.float32 -> 'float32'."""
    if isinstance(dtype, str):
        return dtype
    try:
        return numpy.dtype(dtype).name
    except TypeError:
        return str(dtype)


class _Lowering:
    def __init__(self, params: tuple[Var, ...], whole: Expr):
        self.params = params
        self.whole = whole
        self.memo: dict[int, tuple[Expr, IRExpr]] = {}  # id(node) -> (node, lowered)

    def top_level(self, expr: Expr) -> IRExpr:
        if isinstance(expr, Size) and expr.dim is None:
            return DimSize(self.param(expr.input), None, dtypes.SHAPE)
        return self.lower(expr)

    def lower(self, expr: Expr) -> IRExpr:
        # Keyed by identity: substitution shares subtrees, lower each once.
        cached = self.memo.get(id(expr))
        if cached is not None:
            return cached[1]
        try:
            result = self._lower(expr)
        except ExpressionSyntaxError as error:
            if error.text:
                raise
            raise ExpressionSyntaxError(f"{error.reason} (in {expr})", to_string(self.whole)) from None
        self.memo[id(expr)] = (expr, result)
        return result

    def _lower(self, expr: Expr) -> IRExpr:
        if isinstance(expr, Input):
            return self.param(expr)
        if isinstance(expr, Literal):
            return make.const(expr.value, dtypes.of_python_value(expr.value))
        if isinstance(expr, Size):
            if expr.dim is None:
                raise ExpressionSyntaxError("size(@N) (the whole shape) may only be the entire expression")
            return DimSize(self.param(expr.input), expr.dim, "pyint")
        if isinstance(expr, Call):
            args = [self.lower(arg) for arg in expr.args]
            return _FUNCTIONS[expr.name](*args)
        raise ExpressionSyntaxError(f"a list may only appear at the top level, found {expr}")

    def param(self, node: Input) -> Var:
        if node.index >= len(self.params):
            raise ExpressionSyntaxError(f"@{node.index} has no dtype: only {len(self.params)} input dtype(s) given")
        return self.params[node.index]


# --- PNNX functions ------------------------------------------------------------


def _int(x: IRExpr) -> IRExpr:
    """Python int(): truncates a scalar; on a tensor PNNX means the identity."""
    return make.cast(x, "pyint") if dtypes.is_scalar(x.dtype) else x


def _sign(x: IRExpr) -> IRExpr:
    if dtypes.is_bool(x.dtype):
        return x
    # torch.sign: (0 < x) - (x < 0), which is 0 for NaN (numpy's sign gives NaN).
    return make.sub(make.cast(make.gt(x, 0), x.dtype), make.cast(make.lt(x, 0), x.dtype))


def _square(x: IRExpr) -> IRExpr:
    if x.dtype == "bool":
        x = make.cast(x, "int64")  # torch.square(bool) is int64
    return make.mul(x, x)


def _float(x: IRExpr) -> IRExpr:
    return make.cast(x, dtypes.to_float(x.dtype))


# --- internal activations (formulas as in PyTorch's CPU kernels) -------------------


def _sigmoid(x: IRExpr) -> IRExpr:
    x = _float(x)
    return make.div(1, make.add(1, make.call("exp", make.neg(x))))


def _silu(x: IRExpr) -> IRExpr:
    x = _float(x)
    return make.div(x, make.add(1, make.call("exp", make.neg(x))))


def _relu(x: IRExpr) -> IRExpr:
    return make.maximum(x, 0)


def _clamp(x: IRExpr, low: IRExpr, high: IRExpr) -> IRExpr:
    return make.minimum(make.maximum(x, low), high)


def _relu6_of_x_plus_3(x: IRExpr) -> IRExpr:
    return make.minimum(make.maximum(make.add(x, 3), 0), 6)


def _hardsigmoid(x: IRExpr) -> IRExpr:
    return make.div(_relu6_of_x_plus_3(_float(x)), 6)


def _hardswish(x: IRExpr) -> IRExpr:
    x = _float(x)
    return make.div(make.mul(x, _relu6_of_x_plus_3(x)), 6)


def _gelu(x: IRExpr) -> IRExpr:
    x = _float(x)
    return make.mul(make.mul(x, 0.5), make.add(1, make.call("erf", make.mul(x, 0.7071067811865476))))


def _gelu_tanh(x: IRExpr) -> IRExpr:
    x = _float(x)
    cube = make.mul(make.mul(make.mul(0.044715, x), x), x)
    inner = make.mul(0.7978845608028654, make.add(x, cube))
    return make.mul(make.mul(0.5, x), make.add(1, make.call("tanh", inner)))


def _softplus(x: IRExpr) -> IRExpr:
    # log1p(exp(x)) rewritten so exp never overflows.
    x = _float(x)
    return make.add(make.maximum(x, 0), make.call("log1p", make.call("exp", make.neg(make.call("abs", x)))))


def _mish(x: IRExpr) -> IRExpr:
    x = _float(x)
    return make.mul(x, make.call("tanh", _softplus(x)))


def _leaky_relu(x: IRExpr, slope: IRExpr) -> IRExpr:
    return make.select(make.gt(x, 0), x, make.mul(x, slope))


def _elu(x: IRExpr, alpha: IRExpr) -> IRExpr:
    x = _float(x)
    return make.select(make.gt(x, 0), x, make.mul(alpha, make.call("expm1", x)))


def _intrinsic(name: str) -> Callable[..., IRExpr]:
    return lambda *args: make.call(name, *args)


def _cast_to(dtype: str) -> Callable[[IRExpr], IRExpr]:
    return lambda x: make.cast(x, dtype)


_FUNCTIONS: dict[str, Callable[..., IRExpr]] = {
    **{name: _intrinsic(name) for name in sorted(make.INTRINSICS)},
    "neg": make.neg,
    "sign": _sign,
    "rsqrt": lambda x: make.div(1, make.call("sqrt", x)),
    "square": _square,
    "reciprocal": lambda x: make.div(1, x),
    "int": _int,
    "torch.bool": _cast_to("bool"),
    "torch.float": _cast_to("float32"),
    "torch.long": _cast_to("int64"),
    "add": make.add,
    "sub": make.sub,
    "mul": make.mul,
    "div": make.div,
    "floor_divide": make.floordiv,
    "remainder": make.mod,
    "fmod": make.fmod,
    "pow": make.pow,
    "max": make.maximum,
    "min": make.minimum,
    "maximum": make.maximum,
    "minimum": make.minimum,
    "and": lambda a, b: make.bitwise("and", a, b),
    "or": lambda a, b: make.bitwise("or", a, b),
    "xor": lambda a, b: make.bitwise("xor", a, b),
    "lshift": lambda a, b: make.bitwise("shl", a, b),
    "rshift": lambda a, b: make.bitwise("shr", a, b),
    "gt": make.gt,
    "ge": make.ge,
    "lt": make.lt,
    "le": make.le,
    "eq": make.eq,
    "ne": make.ne,
    "where": make.select,
    "relu": _relu,
    "clamp": _clamp,
    "sigmoid": _sigmoid,
    "silu": _silu,
    "gelu": _gelu,
    "gelu_tanh": _gelu_tanh,
    "hardsigmoid": _hardsigmoid,
    "hardswish": _hardswish,
    "softplus": _softplus,
    "mish": _mish,
    "leaky_relu": _leaky_relu,
    "elu": _elu,
}
