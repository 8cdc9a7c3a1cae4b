"""Built-in operators, registered through the same hook a third-party plugin uses.

Each family module lists its op classes in ``OPS``; add a module here to ship it.
"""

from __future__ import annotations

from ..hookspecs import hookimpl
from . import (
    activation,
    attention,
    bitwise,
    compare,
    complex_tensors,
    concat,
    conv,
    conv_transposed,
    creation,
    data_movement,
    elementwise,
    elementwise_named,
    expression,
    float_bits,
    gating,
    grid_sample,
    inplace,
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
    scan,
    selection,
    shape,
    slicing,
    special,
    spectral,
    vector,
    windows,
)

FAMILIES = [
    io, conv, conv_transposed, data_movement, pooling, norm, activation, linear, reduce, compare,
    shape, slicing, concat, pad, resize, plumbing, expression, elementwise, attention, recurrent,
    pointwise, creation, bitwise, scan, selection, special, vector, inplace, windows, gating,
    grid_sample, complex_tensors, spectral, float_bits, elementwise_named,
]


@hookimpl
def kuiper_add_ops():
    return [op for family in FAMILIES for op in family.OPS]
