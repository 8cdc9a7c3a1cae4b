"""pnnx.Expression: an arithmetic expression over the op's inputs, compiled once.

The ``expr`` string is parsed (kuiper.expr), lowered to the tensor IR and
simplified (kuiper.ir), then compiled by the backend into one callable: a
buffer-reusing NumPy evaluation on the CPU, one fused CUDA kernel on CuPy.
Compilation depends on the input dtypes, so it happens on the first call with
each dtype combination and is cached.
"""

from __future__ import annotations

from .base import Op


def _dtype_name(value) -> str:
    """How kuiper.ir names an input's type: an array's dtype, or a Python scalar kind."""
    if isinstance(value, bool):
        return "pybool"
    if isinstance(value, int):
        return "pyint"
    if isinstance(value, float):
        return "pyfloat"
    return str(value.dtype)


class Expression(Op):
    types = ("pnnx.Expression",)

    @classmethod
    def elementwise_expression(cls, node):
        """The expression itself, when it computes a tensor elementwise (not a shape list or whole size)."""
        from ..expr import ListExpr, Size, parse

        text = node.params.get("expr")
        if not isinstance(text, str):
            return None
        expr = parse(text, num_inputs=len(node.inputs))
        if isinstance(expr, ListExpr) or (isinstance(expr, Size) and expr.dim is None):
            return None
        return text

    def setup(self):
        from ..expr import parse

        text = self.param("expr")
        if not isinstance(text, str):
            raise self.error(f"param 'expr' must be an expression string, found {text!r}")
        try:
            self.expr = parse(text, num_inputs=len(self.node.inputs))
        except Exception as exc:
            # Name the op and line; keep the caret rendering of ExpressionSyntaxError.
            from ..errors import ExpressionSyntaxError

            if isinstance(exc, ExpressionSyntaxError):
                raise ExpressionSyntaxError(
                    f"{self.node.describe()}: {exc.reason}", exc.text, exc.position
                ) from None
            raise
        self._compiled: dict[tuple[str, ...], object] = {}

    def forward(self, *inputs):
        key = tuple(_dtype_name(v) if not isinstance(v, (list, tuple)) else "list" for v in inputs)
        function = self._compiled.get(key)
        if function is None:
            from ..ir import lower, simplify

            function = self.backend.compile_elementwise(simplify(lower(self.expr, list(key))))
            self._compiled[key] = function
        return function(*inputs)


OPS = [Expression]
