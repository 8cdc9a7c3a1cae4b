"""Rewrite expressions: the helpers the graph's fusion pass composes with.

Fusing ``relu(@0)`` into the ``@1`` of ``add(@0,@1)`` is::

    substitute(parse("add(@0,@1)"), {1: parse("relu(@2)")})

after renumbering the producer's inputs into the consumer's numbering.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kuiper.pnnx_expr.nodes import Call, Expr, Input, ListExpr, Literal, Size
from kuiper.ir.recursion import deep_recursion


def input_indices(expr: Expr) -> tuple[int, ...]:
    """The input numbers the expression uses, sorted."""
    return tuple(sorted(set(_inputs_in_order(expr))))


def first_appearance_order(expr: Expr) -> tuple[int, ...]:
    """The input numbers in order of first appearance (left to right), no repeats."""
    return tuple(dict.fromkeys(_inputs_in_order(expr)))


def uses_size_of(expr: Expr, index: int) -> bool:
    """Whether ``size(@index, ...)`` occurs: such an input cannot be replaced by a computed value."""
    return any(isinstance(node, Size) and node.input.index == index for node in _walk(expr))


def depth(expr: Expr) -> int:
    """Nesting depth: 1 for an atom, 1 + the deepest argument for a call."""
    known: dict[int, int] = {}

    def measure(node: Expr) -> int:
        if id(node) not in known:
            known[id(node)] = 1 + max((measure(child) for child in node.children()), default=0)
        return known[id(node)]

    with deep_recursion():
        return measure(expr)


def substitute(expr: Expr, replacements: Mapping[int, Expr]) -> Expr:
    """Replace ``@i`` by ``replacements[i]``; other inputs stay as they are.

    ``size(@i,d)`` keeps working when ``@i`` is replaced by another input; an
    input whose shape is asked for cannot be replaced by a computed value.
    """

    for index, replacement in replacements.items():
        if isinstance(replacement, ListExpr) or (isinstance(replacement, Size) and replacement.dim is None):
            raise ValueError(f"cannot substitute @{index} by {replacement}: lists and shapes are not values")

    def replace_input(node: Input) -> Expr:
        return replacements.get(node.index, node)

    def replace_size(node: Size) -> Expr:
        replacement = replacements.get(node.input.index, node.input)
        if not isinstance(replacement, Input):
            raise ValueError(
                f"cannot substitute @{node.input.index}: the expression asks for its size "
                f"({node}), which a computed value does not have; check uses_size_of() first"
            )
        return Size(replacement, node.dim)

    with deep_recursion():
        return _map_leaves(expr, replace_input, replace_size)


def renumber(expr: Expr, mapping: Mapping[int, int]) -> Expr:
    """Rename inputs: ``@i`` becomes ``@mapping[i]``; every used input must be mapped."""
    missing = [i for i in input_indices(expr) if i not in mapping]
    if missing:
        raise ValueError(f"renumber: no new number for input(s) {missing} of {expr}")
    return substitute(expr, {old: Input(new) for old, new in mapping.items()})


def shift_inputs(expr: Expr, offset: int) -> Expr:
    """Add ``offset`` to every input number (to append one op's inputs after another's)."""
    return renumber(expr, {i: i + offset for i in input_indices(expr)})


def canonicalize_inputs(expr: Expr) -> tuple[Expr, tuple[int, ...]]:
    """Renumber inputs 0, 1, ... in order of first appearance, as PNNX does.

    Returns the new expression and ``order``, where new input k was old input ``order[k]``.
    """
    order = first_appearance_order(expr)
    return renumber(expr, {old: new for new, old in enumerate(order)}), order


def hoist_sizes(expr: Expr, num_inputs: int) -> tuple[Expr, tuple[tuple[int, int], ...]]:
    """Turn every ``size(@i,d)`` into a new scalar input ``@num_inputs + k``.

    Returns the new expression and, for each new input k, the ``(input, dim)``
    whose size the caller must pass.  A GPU kernel needs sizes as arguments.
    """
    hoisted: dict[tuple[int, int], int] = {}

    def replace_size(node: Size) -> Expr:
        if node.dim is None:
            raise ValueError("size(@N) (the whole shape) cannot be passed to a kernel as a scalar")
        key = (node.input.index, node.dim)
        if key not in hoisted:
            hoisted[key] = num_inputs + len(hoisted)
        return Input(hoisted[key])

    with deep_recursion():
        new_expr = _map_leaves(expr, lambda node: node, replace_size)
    return new_expr, tuple(hoisted)


def _map_leaves(expr: Expr, on_input: Callable[[Input], Expr], on_size: Callable[[Size], Expr]) -> Expr:
    """Rebuild expr with its inputs and sizes replaced; a shared subtree is rebuilt once."""
    done: dict[int, Expr] = {}

    def rebuild(node: Expr) -> Expr:
        if id(node) in done:
            return done[id(node)]
        if isinstance(node, Input):
            new = on_input(node)
        elif isinstance(node, Size):
            new = on_size(node)
        elif isinstance(node, Literal):
            new = node
        elif isinstance(node, Call):
            new = Call(node.name, tuple(rebuild(arg) for arg in node.args))
        elif isinstance(node, ListExpr):
            new = ListExpr(tuple(rebuild(item) for item in node.items))
        else:
            raise TypeError(f"not an expression node: {node!r}")
        done[id(node)] = new
        return new

    return rebuild(expr)


def _walk(expr: Expr):
    """Every distinct node once, pre-order, left to right (iterative: safe on any depth)."""
    pending = [expr]
    seen: set[int] = set()
    while pending:
        node = pending.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        pending.extend(reversed(node.children()))


def _inputs_in_order(expr: Expr) -> list[int]:
    return [node.index for node in _walk(expr) if isinstance(node, Input)]
