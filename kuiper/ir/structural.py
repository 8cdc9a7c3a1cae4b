"""Structural equality for frozen dataclass trees (the expression AST and the tensor IR).

Two nodes are equal when they have the same type and equal fields.  The hash is
computed once, at construction, so comparing and hashing large shared trees
(fusion builds DAGs) stays cheap.  A comparison remembers the pairs of subtrees it
has found equal: two equal copies of a DAG whose values are each read twice
(``v = v * v + v``, 40 times) are compared in one visit per node pair, not one per
path (3^40).
"""

from __future__ import annotations

from dataclasses import fields


class Structural:
    def __post_init__(self):
        object.__setattr__(self, "_hash", hash((type(self).__name__, *self._key())))

    def _key(self) -> tuple:
        return tuple(getattr(self, f.name) for f in fields(self))

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if type(self) is not type(other) or self._hash != other._hash:
            return False
        return _same_fields(self, other, set())

    def __hash__(self) -> int:
        return self._hash


def _same_fields(a: Structural, b: Structural, known: set) -> bool:
    """Whether nodes ``a`` and ``b``, of one type and hash, have equal fields; ``known`` holds the
    (id, id) pairs of nodes this comparison has found equal already."""
    return all(_same(x, y, known) for x, y in zip(a._key(), b._key()))


def _same(x, y, known: set) -> bool:
    if x is y:
        return True
    if isinstance(x, Structural):
        if type(x) is not type(y) or x._hash != y._hash:
            return False
        pair = (id(x), id(y))
        if pair not in known:
            if not _same_fields(x, y, known):
                return False
            known.add(pair)
        return True
    if isinstance(x, tuple):
        return isinstance(y, tuple) and len(x) == len(y) and all(_same(p, q, known) for p, q in zip(x, y))
    return x == y
