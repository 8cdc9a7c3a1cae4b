"""pnnx.Expression: an arithmetic expression over the op's inputs, compiled once per input dtypes.

The ``expr`` string is parsed once (kuiper.pnnx_expr) and lowered to the tensor IR
(kuiper.pnnx_expr.lower).  An expression with one elementwise value is an
elementwise op like any activation: its math is the lowered IR, compiled by
the backend (one buffer-reusing NumPy evaluation, one CUDA kernel on CuPy) and
fusable with its neighbours.  A ``[...]`` list (shapes for reshape, index
lists) or the whole ``size(@i)`` is host-side shape arithmetic: it is lowered
to a Function with several results and run the same way, never fused.

The op lives with its language, not in kuiper/ops: the op set knows IR math, never a
parser. The PNNX frontend registers it (kuiper/formats/pnnx.py), as the te language
registers its kernels as ops.
"""

from __future__ import annotations

import functools

from ..errors import ExpressionSyntaxError
from ..ir import simplify
from ..ops.base import NodeParams
from ..ops.elementwise import ElementwiseMath, ElementwiseOp, dtype_name
from .lower import lower, lower_value
from .nodes import ListExpr, Literal, Size
from .parser import parse
from .transform import uses_size_of


@functools.lru_cache(maxsize=4096)
def _parse(text: str, num_inputs: int):
    return parse(text, num_inputs=num_inputs)


def parsed_expression(node):
    """The node's ``expr`` parsed (once per distinct text), errors naming the op and line."""
    text = node.params.get("expr")
    if not isinstance(text, str):
        raise NodeParams(node).error(f"param 'expr' must be an expression string, found {text!r}")
    try:
        return _parse(text, len(node.inputs))
    except ExpressionSyntaxError as exc:
        # Say which op and line, keeping the caret under the bad position.
        raise ExpressionSyntaxError(exc.reason, exc.text, exc.position, context=node.describe()) from None


def _is_elementwise(expr) -> bool:
    return not isinstance(expr, ListExpr) and not (isinstance(expr, Size) and expr.dim is None)


class Expression(ElementwiseOp):
    types = ("pnnx.Expression",)

    @classmethod
    def elementwise(cls, node):
        expr = parsed_expression(node)
        if not _is_elementwise(expr):
            return None
        whole = frozenset(i for i in range(len(node.inputs)) if uses_size_of(expr, i))
        return ElementwiseMath(lambda *inputs: lower_value(expr, inputs), len(node.inputs), whole)

    def setup(self):
        expr = parsed_expression(self.node)
        self._compiled = {}
        if _is_elementwise(expr):
            self.math = type(self).elementwise(self.node)
            return
        self.math = None
        # `x[:, i]` gives index lists like [None,@0]: None means "all of this dim" to Tensor.index.
        # The IR has no None value, so those items are left out and put back after evaluation.
        self.none_positions: tuple[int, ...] = ()
        if isinstance(expr, ListExpr):
            self.none_positions = tuple(
                i for i, item in enumerate(expr.items) if isinstance(item, Literal) and item.value is None
            )
            expr = ListExpr(tuple(item for i, item in enumerate(expr.items) if i not in self.none_positions))
        self.shape_expr = expr

    def forward(self, *inputs):
        if self.math is not None:
            return super().forward(*inputs)
        return self._shape_arithmetic(inputs)

    def _shape_arithmetic(self, inputs):
        key = tuple("list" if isinstance(v, (list, tuple)) else dtype_name(v) for v in inputs)

        def compile_for_dtypes():
            function = simplify(lower(self.shape_expr, list(key), self.name))
            return function, self.backend.compile_elementwise(function)

        _, run = self.cached(self._compiled, key, compile_for_dtypes)
        result = run(*inputs)
        if self.none_positions:
            result = list(result)
            for position in self.none_positions:
                result.insert(position, None)
        elif any(result is value for value in inputs):
            result = self.xp.asarray(result, copy=True)  # outputs are always fresh arrays
        return result


OPS = [Expression]
