"""ONNX ScatterND, ScatterElements (and its old name Scatter) -> the canonical Scatter (XLA's scatter); GatherND ->
the canonical Gather with the index vector in the last dim.

ScatterND's index vectors name the leading dims of the slices they replace; ScatterElements names,
for every element of ``updates``, one position along ``axis``, so its full coordinates are built
from that index and the element's own position in the other dims. ``reduction`` (none, add, mul,
max, min) becomes the scatter's combiner.
"""

from __future__ import annotations

import numpy as np

from ..model_ir import OpNode
from .emit import Emit
from .site import Site

COMBINERS = {"none": "replace", "add": "add", "mul": "mul", "max": "max", "min": "min"}


def _combiner(site: Site) -> str:
    reduction = site.string("reduction", "none")
    if reduction not in COMBINERS:
        raise site.error(f"reduction={reduction!r} is not one of {', '.join(COMBINERS)}")
    return COMBINERS[reduction]


def translate_scatter_nd(site: Site) -> list[OpNode]:
    shape = site.static_shape(0)
    index_shape = site.static_shape(1)
    depth, batch = index_shape[-1], len(index_shape) - 1
    emit = Emit(site)
    indices = site.input(1)
    dtype = site.dtype(1)
    negative = emit.compare("lt", indices, emit.const(0, dtype))
    indices = emit.fn("select", [negative, emit.fn("add", [indices, emit.const(np.asarray(shape[:depth]), dtype)]),
                                 indices])
    params = {"update_window_dims": list(range(batch, batch + len(shape) - depth)),
              "inserted_window_dims": list(range(depth)), "scatter_dims_to_operand_dims": list(range(depth)),
              "index_vector_dim": batch, "combiner": _combiner(site)}
    emit.op("Scatter", [site.input(0), indices, site.input(2)], params, dtype=site.dtype(0), out=site.outputs[0])
    return emit.ops


def translate_scatter_elements(site: Site) -> list[OpNode]:
    shape = site.static_shape(0)
    index_shape = site.static_shape(1)
    rank = len(shape)
    axis = site.int_("axis", 0) % rank
    emit = Emit(site)
    indices = emit.convert(site.input(1), "int64")
    negative = emit.compare("lt", indices, emit.const(0, "int64"))
    indices = emit.fn("select", [negative, emit.fn("add", [indices, emit.const(shape[axis], "int64")]), indices])
    coordinates = []
    for dim in range(rank):
        if dim == axis:
            coordinate = indices
        else:
            coordinate = emit.op("Iota", [], {"shape": list(index_shape), "dim": dim, "dtype": "int64"}, dtype="int64")
        coordinates.append(emit.op("Unsqueeze", [coordinate], {"dim": rank}, dtype="int64"))
    vectors = emit.op("Concat", coordinates, {"dim": rank}, dtype="int64")
    params = {"update_window_dims": [], "inserted_window_dims": list(range(rank)),
              "scatter_dims_to_operand_dims": list(range(rank)), "index_vector_dim": rank,
              "combiner": _combiner(site)}
    emit.op("Scatter", [site.input(0), vectors, site.input(2)], params, dtype=site.dtype(0), out=site.outputs[0])
    return emit.ops


def translate_gather_nd(site: Site) -> list[OpNode]:
    """data[indices[..., :]]: the canonical gather with the index vector in the last dim (batch_dims=0)."""
    if site.int_("batch_dims", 0):
        raise site.error("batch_dims other than 0 is not supported")
    shape = site.static_shape(0)
    index_shape = site.static_shape(1)
    depth = index_shape[-1]
    if depth > len(shape):
        raise site.error(f"index vectors of length {depth} for data of rank {len(shape)}")
    emit = Emit(site)
    indices = site.input(1)
    index_dtype = site.dtype(1)
    sizes = emit.const(np.asarray(shape[:depth]), index_dtype)
    negative = emit.compare("lt", indices, emit.const(0, index_dtype))
    indices = emit.fn("select", [negative, emit.fn("add", [indices, sizes]), indices])
    batch = len(index_shape) - 1
    params = {"offset_dims": list(range(batch, batch + len(shape) - depth)), "collapsed_slice_dims": list(range(depth)),
              "start_index_map": list(range(depth)), "index_vector_dim": batch,
              "slice_sizes": [1] * depth + list(shape[depth:])}
    emit.op("Gather", [site.input(0), indices], params, dtype=site.dtype(0), out=site.outputs[0])
    return emit.ops


TRANSLATORS = {"ScatterND": translate_scatter_nd, "ScatterElements": translate_scatter_elements,
               "Scatter": translate_scatter_elements, "GatherND": translate_gather_nd}
