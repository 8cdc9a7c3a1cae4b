"""ONNX ScatterND, ScatterElements (and its old name Scatter), TensorScatter -> the canonical Scatter (XLA's
scatter); GatherND -> the canonical Gather with the index vector in the last dim.

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
    """data[indices[..., :]]: the canonical gather with the index vector in the last dim. With ``batch_dims``
    b, the first b dims of data and indices pair up: each index vector gets its own position in those
    dims put in front, which makes it an ordinary gather of depth b + its length."""
    shape = site.static_shape(0)
    index_shape = site.static_shape(1)
    batch_dims = site.int_("batch_dims", 0)
    if not 0 <= batch_dims < min(len(shape), len(index_shape)) or shape[:batch_dims] != index_shape[:batch_dims]:
        raise site.error(f"batch_dims={batch_dims} must name leading dims that data {list(shape)} and indices "
                         f"{list(index_shape)} share")
    depth = index_shape[-1]
    if batch_dims + depth > len(shape):
        raise site.error(f"index vectors of length {depth} after {batch_dims} batch dims for data of rank {len(shape)}")
    emit = Emit(site)
    indices = site.input(1)
    index_dtype = site.dtype(1)
    sizes = emit.const(np.asarray(shape[batch_dims:batch_dims + depth]), index_dtype)
    negative = emit.compare("lt", indices, emit.const(0, index_dtype))
    indices = emit.fn("select", [negative, emit.fn("add", [indices, sizes]), indices])
    if batch_dims:
        last = len(index_shape) - 1
        positions = [emit.op("Iota", [], {"shape": list(index_shape[:-1]) + [1], "dim": dim, "dtype": index_dtype},
                             dtype=index_dtype) for dim in range(batch_dims)]
        indices = emit.op("Concat", [*positions, indices], {"dim": last}, dtype=index_dtype)
        depth += batch_dims
    batch = len(index_shape) - 1
    params = {"offset_dims": list(range(batch, batch + len(shape) - depth)), "collapsed_slice_dims": list(range(depth)),
              "start_index_map": list(range(depth)), "index_vector_dim": batch,
              "slice_sizes": [1] * depth + list(shape[depth:])}
    emit.op("Gather", [site.input(0), indices], params, dtype=site.dtype(0), out=site.outputs[0])
    return emit.ops


def translate_tensor_scatter(site: Site) -> list[OpNode]:
    """A copy of the cache (input 0) with ``update`` written along ``axis`` from each batch entry's write
    index on (input 2, else 0); ``mode='circular'`` wraps positions past the cache's length around.
    Every element of ``update`` gets its full coordinates (its own, the axis one moved by the write
    index), and the canonical Scatter replaces those."""
    shape, update_shape = site.static_shape(0), site.static_shape(1)
    rank = len(shape)
    axis = site.int_("axis", -2)
    if not -rank <= axis < rank or axis % rank == 0:
        raise site.error(f"axis {axis} must be a dim of the rank-{rank} cache other than the batch dim")
    axis %= rank
    mode = site.string("mode", "linear")
    if mode not in ("linear", "circular"):
        raise site.error(f"mode must be 'linear' or 'circular', found {mode!r}")
    if len(update_shape) != rank or any(u != c for d, (u, c) in enumerate(zip(update_shape, shape)) if d != axis) \
            or update_shape[axis] > shape[axis]:
        raise site.error(f"update {list(update_shape)} must match the cache {list(shape)} except along axis {axis}, "
                         "where it may be shorter")
    emit = Emit(site)
    coordinates = []
    for dim in range(rank):
        coordinate = emit.op("Iota", [], {"shape": list(update_shape), "dim": dim, "dtype": "int64"}, dtype="int64")
        if dim == axis and site.has_input(2):
            starts = emit.op("Reshape", [emit.convert(site.input(2), "int64")], {"shape": [-1] + [1] * (rank - 1)},
                             dtype="int64")
            coordinate = emit.fn("add", [coordinate, starts])
            if mode == "circular":
                coordinate = emit.fn("remainder", [coordinate, emit.const(shape[axis], "int64")])
        coordinates.append(emit.op("Unsqueeze", [coordinate], {"dim": rank}, dtype="int64"))
    vectors = emit.op("Concat", coordinates, {"dim": rank}, dtype="int64")
    params = {"update_window_dims": [], "inserted_window_dims": list(range(rank)),
              "scatter_dims_to_operand_dims": list(range(rank)), "index_vector_dim": rank, "combiner": "replace"}
    emit.op("Scatter", [site.input(0), vectors, site.input(1)], params, dtype=site.dtype(0), out=site.outputs[0])
    return emit.ops


TRANSLATORS = {"TensorScatter": translate_tensor_scatter, "ScatterND": translate_scatter_nd,
               "ScatterElements": translate_scatter_elements,
               "Scatter": translate_scatter_elements, "GatherND": translate_gather_nd}
