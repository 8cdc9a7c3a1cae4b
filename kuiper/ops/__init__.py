"""Built-in operators, registered through the same hook a third-party plugin uses.

Each family module lists its op classes in ``OPS``; add a module here to ship it.
"""

from __future__ import annotations

from ..hookspecs import hookimpl
from . import (
    activation,
    attention,
    bitwise,
    calls,
    compare,
    complex_tensors,
    concat,
    conv,
    conv_deformable,
    conv_transposed,
    creation,
    data_movement,
    detection,
    determinant,
    dimension_size,
    elementwise,
    elementwise_named,
    float_bits,
    fourier,
    gather,
    gating,
    grid_sample,
    inplace,
    io,
    linear,
    norm_batch,
    norm_feature,
    norm_layer,
    norm_magnitude,
    pad,
    plumbing,
    pointwise,
    pooling_adaptive,
    pooling_average,
    pooling_max,
    ragged,
    random_bits,
    recurrent,
    reduce,
    reorder,
    repeat,
    resample,
    resize,
    roi_align,
    scan,
    selection,
    shape,
    slicing,
    sort,
    stochastic_round,
    triangular,
    unique,
    special,
    spectral,
    vector,
    windows,
    window_reduce,
)

FAMILIES = [
    io, conv, conv_transposed, conv_deformable, data_movement, pooling_max, pooling_average, pooling_adaptive, norm_batch,
    norm_layer, norm_magnitude, activation, linear, reduce, compare,
    shape, reorder, repeat, slicing, concat, pad, resize, resample, roi_align, plumbing, elementwise, attention, recurrent,
    pointwise, creation, bitwise, scan, selection, special, vector, inplace, windows, gating,
    grid_sample, complex_tensors, spectral, calls, gather, sort, window_reduce, float_bits, elementwise_named,
    dimension_size, triangular, fourier, norm_feature, random_bits, ragged, stochastic_round,
    unique, detection, determinant,
]


@hookimpl
def kuiper_add_ops():
    return [op for family in FAMILIES for op in family.OPS]
