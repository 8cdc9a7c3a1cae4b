"""Buffers: tensor parameters that know their static shape.

A ``Buffer`` is a ``Var`` (it prints as its name, indexes with ``A[i, j]`` and
passes through every visitor unchanged) that also carries ``shape``, so that
loop nests can be bounded by it and code generators can declare it
(``float (&A)[4][16]`` in C++).
"""

from __future__ import annotations

from dataclasses import dataclass

from kuiper.ir.nodes import Var


@dataclass(frozen=True, eq=False)
class Buffer(Var):
    shape: tuple[int, ...] = ()

    @property
    def size(self) -> int:
        total = 1
        for extent in self.shape:
            total *= extent
        return total


def buffer(name: str, shape, dtype: str) -> Buffer:
    return Buffer(name, dtype, tuple(int(extent) for extent in shape))
