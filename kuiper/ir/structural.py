"""Structural equality for frozen dataclass trees (the expression AST and the tensor IR).

Two nodes are equal when they have the same type and equal fields.  The hash is
computed once, at construction, so comparing and hashing large shared trees
(fusion builds DAGs) stays cheap.
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
        return self._key() == other._key()

    def __hash__(self) -> int:
        return self._hash
