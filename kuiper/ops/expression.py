"""pnnx.Expression: an arithmetic expression over the op's inputs, compiled once.

The ``expr`` string is parsed (kuiper.expr), lowered to the tensor IR and
simplified (kuiper.ir), then compiled by the backend into one callable: a
buffer-reusing NumPy evaluation on the CPU, one fused CUDA kernel on CuPy.
Compilation depends on the input dtypes, so it happens on the first call with
each dtype combination and is cached.
"""

from __future__ import annotations

from ..errors import ExpressionSyntaxError
from ..expr import ListExpr, Literal, Size, parse
from ..ir import lower, simplify
from ..ir.dtypes import TENSOR_DTYPES
from ..ir.evaluate import dtype_name
from .base import Op


class Expression(Op):
    types = ("pnnx.Expression",)
    fresh_output = True  # forward never returns an input itself (see _lent_output and forward)

    @classmethod
    def elementwise_expression(cls, node):
        """The expression itself, when it computes a tensor elementwise (not a shape list or whole size)."""
        text = node.params.get("expr")
        if not isinstance(text, str):
            return None
        expr = parse(text, num_inputs=len(node.inputs))
        if isinstance(expr, ListExpr) or (isinstance(expr, Size) and expr.dim is None):
            return None
        return text

    def setup(self):
        text = self.param("expr")
        if not isinstance(text, str):
            raise self.error(f"param 'expr' must be an expression string, found {text!r}")
        try:
            expr = parse(text, num_inputs=len(self.node.inputs))
        except ExpressionSyntaxError as exc:
            # Say which op and line, keeping the caret under the bad position.
            raise ExpressionSyntaxError(f"{self.node.describe()}: {exc.reason}", exc.text, exc.position) from None
        # `x[:, i]` gives index lists like [None,@0]: None means "all of this dim" to Tensor.index.
        # The IR has no None value, so those items are left out and put back after evaluation.
        self.none_positions: tuple[int, ...] = ()
        if isinstance(expr, ListExpr):
            self.none_positions = tuple(
                i for i, item in enumerate(expr.items) if isinstance(item, Literal) and item.value is None
            )
            expr = ListExpr(tuple(item for i, item in enumerate(expr.items) if i not in self.none_positions))
        self.expr = expr
        self.expr_is_list = isinstance(expr, ListExpr)
        self._compiled: dict[tuple[str, ...], object] = {}

    def _lent_output(self, inputs, ir_function) -> dict:
        """``{"out": buffer}`` when the graph lent an input buffer of the result's shape and dtype."""
        if not self.donated_inputs or self.expr_is_list:
            return {}
        shapes = [v.shape for v in inputs if self.backend.is_array(v)]
        dtype = ir_function.results[0].dtype
        if dtype not in TENSOR_DTYPES:
            return {}  # a Python scalar result has no buffer
        for position in sorted(self.donated_inputs):
            buffer = inputs[position]
            if (
                self.backend.is_array(buffer)
                and buffer.dtype == dtype
                and tuple(buffer.shape) == self.backend.native.broadcast_shapes(*shapes)
                and buffer.flags.c_contiguous
                and buffer.flags.writeable
            ):
                return {"out": buffer}
        return {}

    def forward(self, *inputs):
        key = tuple("list" if isinstance(v, (list, tuple)) else dtype_name(v) for v in inputs)
        compiled = self._compiled.get(key)
        if compiled is None:
            ir_function = simplify(lower(self.expr, list(key)))
            compiled = (ir_function, self.backend.compile_elementwise(ir_function))
            self._compiled[key] = compiled
        ir_function, function = compiled
        lent = self._lent_output(inputs, ir_function)
        result = function(*inputs, **lent)
        if self.none_positions:
            result = list(result)
            for position in self.none_positions:
                result.insert(position, None)
        elif not lent and any(result is value for value in inputs):
            # An expression that simplifies to one of its inputs: copy, so the output is
            # always a fresh array (the graph may lend it to the next op to overwrite).
            result = self.xp.asarray(result, copy=True)
        return result


OPS = [Expression]
