"""Print IR as readable text, for tests and error messages (one target of render.py).

    func expression(x0: float32, x1: float32) -> (out: float32) {
      out = (exp(x0) + x1)
    }

``print_ir(node, compact=True)`` puts everything on one line:
``for i in (0, 200, 1) { b = (b + A[idx, i]) }``.  ``str(node)`` is ``print_ir(node)``.
"""

from __future__ import annotations

from kuiper.ir.functions import Operation
from kuiper.ir.nodes import Cast, Const, DimSize, For, Function, Indexing, IRExpr, Node, Select
from kuiper.ir.render import Renderer


class ReadableRenderer(Renderer):
    target = "readable text"

    def spell(self, row: Operation, node: IRExpr) -> str:
        return row.symbol or row.name  # max/min/fmod and the intrinsics print as calls

    def literal(self, node: Const) -> str:
        return repr(node.value)

    def visit_Cast(self, node: Cast) -> str:
        return f"{node.dtype}({self.visit(node.operand)})"

    def visit_Select(self, node: Select) -> str:
        return f"select({self.visit(node.cond)}, {self.visit(node.true_value)}, {self.visit(node.false_value)})"

    def visit_Indexing(self, node: Indexing) -> str:
        return f"{node.tensor.name}[{', '.join(self.visit(i) for i in node.indices)}]"

    def visit_DimSize(self, node: DimSize) -> str:
        return f"shape({node.tensor.name})" if node.axis is None else f"size({node.tensor.name}, {node.axis})"

    def assign(self, target: str, value: str) -> str:
        return f"{target} = {value}"

    def for_header(self, node: For) -> str:
        bounds = ", ".join(self.visit(e) for e in (node.start, node.stop, node.step))
        return f"for {node.var.name} in ({bounds}) {{"

    def visit_Function(self, node: Function) -> list[str]:
        params = ", ".join(f"{p.name}: {p.dtype}" for p in node.params)
        results = ", ".join(f"{r.name}: {r.dtype}" for r in node.results)
        results = f"[{results}]" if node.returns_list else f"({results})"
        return [f"func {node.name}({params}) -> {results} {{", *self.nested(node.body), "}"]


_READABLE = ReadableRenderer()


def print_ir(node: Node, compact: bool = False) -> str:
    return _READABLE.render(node, compact)


# Every node prints as this text.  Attached here because nodes.py sits below this module.
Node.__str__ = lambda self: print_ir(self)
