"""Lower an expression AST to an elementwise IR Function.

``lower(parse("add(relu(@0),@1)"), ["float32", "float32"])`` gives::

    func expression(x0: float32, x1: float32) -> (out: float32) {
      out = (max(x0, 0.0) + x1)
    }

Input ``@i`` becomes parameter ``x{i}`` with ``input_dtypes[i]``: a tensor
dtype ('float32', 'int64', 'bool' ...) or a Python scalar ('pyint',
'pyfloat', 'pybool'; see dtypes.py).  Composite functions (sign, rsqrt,
the activations ...) are the IR's own (kuiper.ir.composites), so code
generators only see primitives and the math is written once.

``lower_value(expr, inputs)`` lowers over arbitrary IR expressions instead
of fresh parameters: the graph's fusion pass composes ops that way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kuiper.errors import ExpressionSyntaxError, IRError
from kuiper.pnnx_expr.nodes import Call, Expr, Input, ListExpr, Literal, Size, to_string
from kuiper.ir import composites, dtypes, make
from kuiper.ir.functions import INTRINSICS
from kuiper.ir.nodes import Assign, Block, DimSize, Function, IRExpr, Var
from kuiper.ir.recursion import deep_recursion


def lower(expr: Expr, input_dtypes: Sequence[str], name: str = "expression") -> Function:
    """The whole expression (a value or a ``[...]`` list) as a Function over inputs ``x0, x1, ...``."""
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
    """A dtype's name, for names and any namespace's dtypes: numpy.float32 and array_api_strict.float32 give 'float32'."""
    try:
        return dtypes.name_of(dtype)
    except IRError:
        return str(dtype)  # refused by the caller, named as given


def lower_value(expr: Expr, inputs: Sequence[IRExpr]) -> IRExpr:
    """One elementwise value: ``@i`` stands for ``inputs[i]`` (any IR expression, e.g. a fused producer)."""
    lowering = _Lowering(tuple(inputs), expr)
    with deep_recursion():
        return lowering.lower(expr)


class _Lowering:
    def __init__(self, params: tuple[IRExpr, ...], whole: Expr):
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
        except IRError as error:  # a type error of the IR is this expression's fault
            raise ExpressionSyntaxError(f"{error} (in {expr})", to_string(self.whole)) from None
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
            tensor = self.param(expr.input)
            if not isinstance(tensor, Var):
                raise ExpressionSyntaxError(f"size(@{expr.input.index},...) needs input {expr.input.index} as a tensor")
            return DimSize(tensor, expr.dim, "pyint")
        if isinstance(expr, Call):
            args = [self.lower(arg) for arg in expr.args]
            return _FUNCTIONS[expr.name](*args)
        raise ExpressionSyntaxError(f"a list may only appear at the top level, found {expr}")

    def param(self, node: Input) -> IRExpr:
        if node.index >= len(self.params):
            raise ExpressionSyntaxError(f"@{node.index} has no dtype: only {len(self.params)} input dtype(s) given")
        return self.params[node.index]


# --- PNNX functions ------------------------------------------------------------


def _int(x: IRExpr) -> IRExpr:
    """Python int(): truncates a scalar; on a tensor PNNX means the identity."""
    return make.cast(x, "pyint") if dtypes.is_scalar(x.dtype) else x


def _intrinsic(name: str) -> Callable[..., IRExpr]:
    return lambda *args: make.call(name, *args)


def _cast_to(dtype: str) -> Callable[[IRExpr], IRExpr]:
    return lambda x: make.cast(x, dtype)


_FUNCTIONS: dict[str, Callable[..., IRExpr]] = {
    **{name: _intrinsic(name) for name in sorted(INTRINSICS)},
    "neg": make.neg,
    "sign": composites.sign,
    "rsqrt": composites.rsqrt,
    "square": composites.square,
    "reciprocal": composites.reciprocal,
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
    # Activations by name (kuiper's own vocabulary; PNNX writes them as ops).
    "relu": composites.relu,
    "clamp": composites.clamp,
    "sigmoid": composites.sigmoid,
    "silu": composites.silu,
    "gelu": composites.gelu,
    "gelu_tanh": composites.gelu_tanh,
    "hardsigmoid": composites.hardsigmoid,
    "hardswish": composites.hardswish,
    "softplus": composites.softplus,
    "mish": composites.mish,
    "leaky_relu": composites.leaky_relu,
    "elu": composites.elu,
}
