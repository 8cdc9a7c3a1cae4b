"""Visitor and Mutator bases for IR passes.

Subclasses define ``visit_<NodeClass>`` for the nodes they care about; the
rest is walked generically through the dataclass fields.  The Mutator
rebuilds a node only when one of its children changed, and remembers what
it returned for each node, so shared subtrees (a DAG) are rewritten once.
"""

from __future__ import annotations

from dataclasses import fields, replace

from kuiper.ir.recursion import deep_recursion
from kuiper.ir.nodes import Node


class Visitor:
    """Walks every node (shared subtrees once per occurrence)."""

    def __call__(self, node: Node):
        with deep_recursion():
            return self.visit(node)

    def visit(self, node: Node):
        method = getattr(self, f"visit_{type(node).__name__}", self.generic_visit)
        return method(node)

    def generic_visit(self, node: Node):
        for child in node.children():
            self.visit(child)


class Mutator:
    """Returns a rewritten copy; ``visit_X`` methods return the replacement node."""

    def __init__(self):
        self._memo: dict[Node, Node] = {}

    def __call__(self, node: Node) -> Node:
        with deep_recursion():
            return self.visit(node)

    def visit(self, node: Node) -> Node:
        done = self._memo.get(node)
        if done is not None:
            return done
        method = getattr(self, f"visit_{type(node).__name__}", self.generic_visit)
        result = method(node)
        self._memo[node] = result
        return result

    def generic_visit(self, node: Node) -> Node:
        """Visit the children, rebuilding ``node`` if any of them changed."""
        changes = {}
        for f in fields(node):
            value = getattr(node, f.name)
            if isinstance(value, Node):
                new = self.visit(value)
            elif isinstance(value, tuple) and any(isinstance(v, Node) for v in value):
                new = tuple(self.visit(v) if isinstance(v, Node) else v for v in value)
            else:
                continue
            if new is not value and new != value:
                changes[f.name] = new
        return replace(node, **changes) if changes else node
