"""The canonical ``Elementwise`` op: a named function of the op set on operands of given dtypes.

Params: ``function`` (a name of elementwise_exact's tables, or select, clamp, compare, convert,
erf), ``operand_dtypes`` and ``dtype`` (the result's), and for compare ``direction`` (eq ne lt le
gt ge) and ``order`` ("" natural, "float", "total", "signed", "unsigned"). The op runs the
function as IR (elementwise_ir: compiled, fused with its neighbours) where the IR can say it,
else the exact array-API code (elementwise_exact).
"""

from __future__ import annotations

from ..ir.dtypes import array_dtype
from . import elementwise_exact as exact
from .base import NodeParams
from .elementwise import ElementwiseOp
from .elementwise_ir import math_for

FUNCTIONS = frozenset([*exact.UNARY, *exact.BINARY, "erf", "select", "clamp", "compare", "convert"])
ARITY = {**{name: 1 for name in exact.UNARY}, **{name: 2 for name in exact.BINARY},
         "erf": 1, "select": 3, "clamp": 3, "compare": 2, "convert": 1}
FUNCTION_NAMES = tuple(sorted(FUNCTIONS))
ORDERS = ("", "float", "total", "signed", "unsigned")
# An Elementwise node's params -> its math. A module of 100,000 instructions has a few dozen
# distinct (function, dtypes) pairs, and the graph passes ask for every node's math several times:
# reading and checking the params each time was a fifth of such a module's load. Bounded: cleared
# when full, as a hostile file may make every node's params differ.
_MATHS: dict[tuple, object] = {}
_MATHS_LIMIT = 4096


def _read(params) -> tuple[str, tuple[str, ...], str, str, str]:
    """(function, operand dtypes, result dtype, direction, order), checked, from an op or NodeParams."""
    function = params.choice_param("function", FUNCTION_NAMES)
    operands = params.param("operand_dtypes")
    if not isinstance(operands, (list, tuple)) or not all(isinstance(t, str) for t in operands) \
            or len(operands) != ARITY[function]:
        raise params.error(f"param 'operand_dtypes' must name {ARITY[function]} dtype(s) for {function}, "
                           f"found {operands!r}")
    direction = params.choice_param("direction", exact.COMPARISONS) if function == "compare" else ""
    order = params.choice_param("order", ORDERS, default="")
    return function, tuple(operands), params.str_param("dtype"), direction, order


def _params_key(params: dict) -> tuple | None:
    """The params that decide an Elementwise node's math, as a dict key (None when they cannot be one)."""
    operands = params.get("operand_dtypes")
    if not isinstance(operands, (list, tuple)):
        return None
    key = (params.get("function"), tuple(operands), params.get("dtype"), params.get("direction"), params.get("order"))
    try:
        hash(key)  # only params that were read and checked are ever stored under a key
    except TypeError:
        return None
    return key


class Elementwise(ElementwiseOp):
    types = ("Elementwise",)

    @classmethod
    def elementwise(cls, node):
        key = _params_key(node.params)
        if key in _MATHS:
            return _MATHS[key]
        function, operands, dtype, direction, order = _read(NodeParams(node))  # checked: raises on bad params
        math = math_for(function, operands, dtype, direction, order)
        if key is not None:
            if len(_MATHS) >= _MATHS_LIMIT:
                _MATHS.clear()
            _MATHS[key] = math
        return math

    def setup(self):
        self.function, operands, dtype_name, self.direction, self.order = _read(self)
        self.require_inputs(len(operands))
        self.dtype = array_dtype(self.xp, dtype_name)
        if self.dtype is None:
            raise self.unsupported("dtype", dtype_name, f"a dtype of the '{self.backend.name}' backend's array namespace")
        self.math = math_for(self.function, operands, dtype_name, self.direction, self.order)
        self._compiled = {}

    def forward(self, *inputs):
        if self.math is not None:
            return ElementwiseOp.forward(self, *inputs)
        result = self.xp.asarray(self.exact(*inputs))
        if any(result is value for value in inputs):
            result = self.xp.asarray(result, copy=True)  # outputs are always fresh arrays
        return result if result.dtype == self.dtype else result.astype(self.dtype)

    def exact(self, *inputs):
        xp, function = self.xp, self.function
        if function in exact.UNARY:
            return exact.UNARY[function](xp, *inputs)
        if function in exact.BINARY:
            return exact.BINARY[function](xp, *inputs)
        if function == "erf":
            return self.backend.erf(inputs[0])
        if function == "compare":
            return exact.compare(xp, *inputs, self.direction, self.order)
        if function == "select":
            return xp.where(*inputs)
        if function == "clamp":
            low, x, high = inputs
            return xp.minimum(xp.maximum(x, low), high).astype(x.dtype)
        return exact.convert(xp, inputs[0], self.dtype)


OPS = [Elementwise]
