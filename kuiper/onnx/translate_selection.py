"""ONNX Compress, NonZero and ReverseSequence -> position counters (Iota) with the canonical MaskedSelect,
IndexSelect and TakeAlongAxis; TopK -> TopKDim; Unique -> Unique.

Compress's and NonZero's output lengths depend on the data; the canonical ops compute them at run
time. The positions a mask selects are MaskedSelect of an Iota: Compress then takes those slices,
NonZero stacks them. ReverseSequence reads each step from its mirrored position within the entry's length.
"""

from __future__ import annotations

from ..model_ir import OpNode
from .emit import Emit
from .site import Site


def _selected_positions(emit: Emit, mask: str, shape: list[int], dim: int) -> str:
    """The positions along ``dim`` of the true elements of ``mask`` (of ``shape``), in row-major order."""
    counter = emit.op("Iota", [], {"shape": shape, "dim": dim, "dtype": "int64"}, dtype="int64")
    return emit.op("MaskedSelect", [counter, mask], dtype="int64")


def translate_compress(site: Site) -> list[OpNode]:
    condition_length = site.static_shape(1)
    if len(condition_length) != 1:
        raise site.error(f"condition must be 1-D, found shape {list(condition_length)}")
    emit = Emit(site)
    dtype = site.dtype(0)
    mask = emit.convert(site.input(1), "bool")
    positions = _selected_positions(emit, mask, list(condition_length), 0)
    data, axis = site.input(0), site.int_("axis", None)
    if axis is None:
        data, axis = emit.op("Reshape", [data], {"shape": [-1]}, dtype=dtype), 0
    else:
        axis %= site.rank(0)
    emit.op("IndexSelect", [data, positions], {"dim": axis}, dtype=dtype, out=site.outputs[0])
    return emit.ops


def translate_non_zero(site: Site) -> list[OpNode]:
    shape = list(site.static_shape(0))
    emit = Emit(site)
    mask = emit.convert(site.input(0), "bool")
    rows = [emit.op("Unsqueeze", [_selected_positions(emit, mask, shape, dim)], {"dim": 0}, dtype="int64")
            for dim in range(len(shape))]
    emit.op("Concat", rows, {"dim": 0}, dtype="int64", out=site.outputs[0])
    return emit.ops


def translate_reverse_sequence(site: Site) -> list[OpNode]:
    """Each batch entry's first ``length`` steps reversed: position t reads length-1-t while t < length."""
    shape = list(site.static_shape(0))
    rank = len(shape)
    time_axis, batch_axis = site.int_("time_axis", 0) % rank, site.int_("batch_axis", 1) % rank
    if {time_axis, batch_axis} != {0, 1}:
        raise site.error(f"time_axis and batch_axis must be 0 and 1, found {time_axis} and {batch_axis}")
    emit = Emit(site)
    step = emit.op("Iota", [], {"shape": shape, "dim": time_axis, "dtype": "int64"}, dtype="int64")
    lengths_shape = [1] * rank
    lengths_shape[batch_axis] = -1
    lengths = emit.op("Reshape", [emit.convert(site.input(1), "int64")], {"shape": lengths_shape}, dtype="int64")
    mirrored = emit.fn("subtract", [emit.fn("subtract", [lengths, emit.const(1, "int64")]), step])
    source = emit.fn("select", [emit.compare("lt", step, lengths), mirrored, step])
    emit.op("TakeAlongAxis", [site.input(0), source], {"dim": time_axis}, dtype=site.dtype(0), out=site.outputs[0])
    return emit.ops


def translate_top_k(site: Site) -> list[OpNode]:
    k = site.constant_ints(1, "k")[0] if site.opset >= 10 else site.int_("k")
    params = {"k": k, "dim": site.int_("axis", -1), "largest": bool(site.int_("largest", 1)),
              "sorted": bool(site.int_("sorted", 1))}
    return [site.op("TopKDim", [site.input(0)], site.outputs, params)]


def translate_unique(site: Site) -> list[OpNode]:
    """The canonical Unique, whose outputs are ONNX's: values, first indices, inverse indices, counts."""
    params = {"dim": site.int_("axis", None), "sorted": bool(site.int_("sorted", 1))}
    if params["dim"] is not None and not -site.rank(0) <= params["dim"] < site.rank(0):
        raise site.error(f"axis {params['dim']} is out of range for rank {site.rank(0)}")
    outputs = site.outputs
    while outputs and outputs[-1] == "":  # trailing outputs the model leaves out
        outputs.pop()
    if "" in outputs:  # an output left out in the middle: the canonical op still computes it
        outputs = [name or site.temporary(f"unused{i}", "int64") for i, name in enumerate(outputs)]
    return [site.op("Unique", [site.input(0)], outputs, params)]


TRANSLATORS = {"Unique": translate_unique, "Compress": translate_compress, "NonZero": translate_non_zero,
               "ReverseSequence": translate_reverse_sequence, "TopK": translate_top_k}
