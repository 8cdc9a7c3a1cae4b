"""Built-in operators, registered through the same hook a third-party plugin uses.

Each family module lists its op classes in ``OPS``; add a module here to ship it.
"""

from __future__ import annotations

from ..hookspecs import hookimpl
from . import (
    activation,
    attention,
    compare,
    concat,
    conv,
    creation,
    elementwise,
    expression,
    io,
    linear,
    norm,
    pad,
    plumbing,
    pointwise,
    pooling,
    recurrent,
    reduce,
    resize,
    shape,
    slicing,
)

FAMILIES = [
    io, conv, pooling, norm, activation, linear, reduce, compare,
    shape, slicing, concat, pad, resize, plumbing, expression, elementwise, attention, recurrent,
    pointwise, creation,
]


@hookimpl
def kuiper_add_ops():
    return [op for family in FAMILIES for op in family.OPS]
