"""HLO data movement -> canonical ops: constant, iota, broadcast, reshape, transpose, bitcast, slices,
pad, concatenate, reverse, and the instructions that pass data through on one device.

Each attribute is read and checked here, once; the ops get plain, typed params.
"""

from __future__ import annotations

import numpy as np

from ..model_ir import OpNode
from .literals import literal_array
from .module import Slice
from .shapes import ArrayShape
from .site import Site
from .translate_common import (
    attribute,
    integer,
    ints,
    operand,
    reshape,
    result,
    transpose,
)


def translate_constant(site: Site) -> list[OpNode]:
    return [site.op("Constant", [], site.outputs, attrs={"data": literal_array(site.instruction)})]


def translate_iota(site: Site) -> list[OpNode]:
    shape = result(site)
    dim = integer(site, "iota_dimension")
    if not 0 <= dim < shape.rank:
        raise site.error(f"iota_dimension={dim} is out of range for {shape}")
    return [site.op("Iota", [], site.outputs, {"shape": list(shape.dims), "dim": dim, "dtype": shape.dtype})]


def translate_broadcast(site: Site) -> list[OpNode]:
    shape, dims = result(site), ints(site, "dimensions", ())
    if len(set(dims)) != len(dims) or any(not 0 <= d < shape.rank for d in dims):
        raise site.error(f"dimensions={list(dims)} do not fit the result {shape}")
    return [site.op("Broadcast", site.inputs, site.outputs, {"shape": list(shape.dims), "dims": list(dims)})]


def translate_reshape(site: Site) -> list[OpNode]:
    return [site.op("Reshape", site.inputs, site.outputs, {"shape": list(result(site).dims)})]


def translate_transpose(site: Site) -> list[OpNode]:
    permutation = ints(site, "dimensions")
    if sorted(permutation) != list(range(result(site).rank)):
        raise site.error(f"dimensions={list(permutation)} is not a permutation of {result(site).rank} dims")
    return [site.op("Transpose", site.inputs, site.outputs, {"dims": list(permutation)})]


def _major_to_minor(shape: ArrayShape) -> list[int]:
    if shape.layout is None or len(shape.layout.minor_to_major) != shape.rank:
        return list(range(shape.rank))
    return list(reversed(shape.layout.minor_to_major))


def translate_bitcast(site: Site) -> list[OpNode]:
    """Reinterpret the operand's memory as the result shape: layouts say how dims lie in memory.

    The operand's logical array is put in its physical (major-to-minor) order, read as the
    result's physical dims, and put back in the result's logical order. A change of element
    type reinterprets the bits as well.
    """
    source, target = operand(site, 0), result(site)
    source_order, target_order = _major_to_minor(source), _major_to_minor(target)
    retype = source.element_type != target.element_type
    if source.dims == target.dims and source_order == target_order:
        # Only the element type changes (this holds too when a scalar comparator runs on whole arrays).
        if retype:
            return [site.op("BitcastConvert", site.inputs, site.outputs, {"dtype": target.dtype})]
        return [site.op("Identity", site.inputs, site.outputs)]
    ops: list[OpNode] = []
    value, shape, emitted = transpose(site, site.inputs[0], source, source_order, "physical")
    ops += emitted
    if retype:
        retyped = ArrayShape(target.element_type, shape.dims)  # same itemsize: a bitcast keeps the byte count
        name = site.temporary("retyped", retyped)
        ops.append(site.op("BitcastConvert", [value], [name], {"dtype": target.dtype}, suffix="retyped"))
        value, shape = name, retyped
    physical = [target.dims[d] for d in target_order]
    inverse = sorted(range(target.rank), key=lambda i: target_order[i])
    in_order = inverse == list(range(target.rank))  # the result's layout is row-major: no transpose after
    value, shape, emitted = reshape(site, value, shape, physical, "reshaped",
                                    target=site.outputs[0] if in_order else None)
    ops += emitted
    if not in_order:
        ops += transpose(site, value, shape, inverse, "logical", target=site.outputs[0])[2]
    return ops


def translate_slice(site: Site) -> list[OpNode]:
    spec = attribute(site, "slice")
    if not isinstance(spec, list) or not all(isinstance(s, Slice) for s in spec) or len(spec) != operand(site, 0).rank:
        raise site.error(f"slice={spec!r} must be one [start:limit:stride] per dim of {operand(site, 0)}")
    for axis, (s, dim) in enumerate(zip(spec, operand(site, 0).dims)):
        if s.stride < 1 or not 0 <= s.start <= s.limit or (dim >= 0 and s.limit > dim):
            raise site.error(f"slice dim {axis} [{s.start}:{s.limit}:{s.stride}] must have a positive stride "
                             f"and 0 <= start <= limit <= {dim}")
    params = {"starts": [s.start for s in spec], "limits": [s.limit for s in spec], "strides": [s.stride for s in spec]}
    return [site.op("Slice", site.inputs, site.outputs, params)]


def translate_pad(site: Site) -> list[OpNode]:
    """``padding=lo_hi[_interior]x...`` per dim; negative lo/hi crop; the value is the second operand."""
    text = str(attribute(site, "padding"))
    try:
        config = [tuple(int(v) for v in dim.split("_")) for dim in text.split("x")] if text else []
    except ValueError:
        raise site.error(f"padding={text!r} is not lo_hi[_interior]x...") from None
    config = [c + (0,) if len(c) == 2 else c for c in config]
    if len(config) != operand(site, 0).rank or any(len(c) != 3 or c[2] < 0 for c in config):
        raise site.error(f"padding={text!r} does not fit the operand {operand(site, 0)}")
    for axis, (dim, (low, high, interior)) in enumerate(zip(operand(site, 0).dims, config)):
        if dim >= 0 and dim + max(dim - 1, 0) * interior + low + high < 0:
            raise site.error(f"padding {low}_{high}_{interior} of dim {axis} crops more than its {dim} element(s)")
    params = {"low": [c[0] for c in config], "high": [c[1] for c in config], "interior": [c[2] for c in config]}
    return [site.op("Pad", site.inputs, site.outputs, params)]


def translate_concatenate(site: Site) -> list[OpNode]:
    dims = ints(site, "dimensions")
    if len(dims) != 1 or not 0 <= dims[0] < result(site).rank:
        raise site.error(f"dimensions={list(dims)} must name one dim of the result {result(site)}")
    return [site.op("Concat", site.inputs, site.outputs, {"dim": dims[0]})]


def translate_reverse(site: Site) -> list[OpNode]:
    return [site.op("Reverse", site.inputs, site.outputs, {"dims": list(ints(site, "dimensions"))})]


def translate_dynamic_slice(site: Site) -> list[OpNode]:
    inputs, ops = _scalar_start_indices(site, 1)
    sizes = list(ints(site, "dynamic_slice_sizes"))
    return ops + [site.op("DynamicSlice", inputs, site.outputs, {"sizes": sizes})]


def translate_dynamic_update_slice(site: Site) -> list[OpNode]:
    inputs, ops = _scalar_start_indices(site, 2)
    return ops + [site.op("DynamicUpdateSlice", inputs, site.outputs)]


def _scalar_start_indices(site: Site, first: int) -> tuple[list[str], list[OpNode]]:
    """The operands with start indices as scalars, one per dim of operand 0.

    XLA's parser still reads the old form, all start indices in one rank-1 operand
    (``dynamic-slice(f32[20,20] p, s32[2] starts)``): it is split here into scalars.
    """
    if len(site.inputs) != first + 1 or operand(site, first).rank != 1:
        return site.inputs, []
    vector = operand(site, first)
    if vector.dims[0] != operand(site, 0).rank:
        raise site.error(f"start indices {vector} must hold one index per dim of {operand(site, 0)}")
    scalars, ops = [], []
    for dim in range(vector.dims[0]):
        piece = site.temporary(f"start{dim}_slice", ArrayShape(vector.element_type, (1,)))
        scalar = site.temporary(f"start{dim}", ArrayShape(vector.element_type, ()))
        ops.append(site.op("Slice", [site.inputs[first]], [piece],
                           {"starts": [dim], "limits": [dim + 1], "strides": [1]}, suffix=f"start{dim}_slice"))
        ops.append(site.op("Reshape", [piece], [scalar], {"shape": []}, suffix=f"start{dim}"))
        scalars.append(scalar)
    return [*site.inputs[:first], *scalars], ops


def translate_pass_through(site: Site) -> list[OpNode]:
    """Copies and barriers: leaf i to leaf i.

    ``copy-start`` returns (operand, its copy, a context): results past the operand's leaves are
    the copy again, and a zero context.
    """
    ops = []
    for index, output in enumerate(site.outputs):
        suffix = f"leaf{index}" if len(site.outputs) > 1 else ""
        if site.inputs:
            ops.append(site.op("Identity", [site.inputs[index % len(site.inputs)]], [output], suffix=suffix))
        else:
            raise site.error("passes no operand through")
    if site.instruction.opcode == "copy-start" and len(site.outputs) == 2 * len(site.inputs) + 1:
        context = site.instruction.shape.leaves()[-1]
        ops[-1] = site.op("Constant", [], [site.outputs[-1]], attrs={"data": np.zeros(context.dims, context.dtype)},
                          suffix=f"leaf{len(site.outputs) - 1}")
    return ops


def translate_device_id(site: Site) -> list[OpNode]:
    """replica-id and partition-id: one device, so 0."""
    shape = result(site)
    return [site.op("Constant", [], site.outputs, attrs={"data": np.zeros(shape.dims, shape.dtype)})]


PASS_THROUGH = ("opt-barrier", "copy-start", "copy-done", "copy")  # collectives: translate_collectives.py
TRANSLATORS = {
    "constant": translate_constant, "iota": translate_iota, "broadcast": translate_broadcast,
    "reshape": translate_reshape, "transpose": translate_transpose, "bitcast": translate_bitcast,
    "slice": translate_slice, "pad": translate_pad, "concatenate": translate_concatenate,
    "reverse": translate_reverse, "dynamic-slice": translate_dynamic_slice,
    "dynamic-update-slice": translate_dynamic_update_slice,
    "replica-id": translate_device_id, "partition-id": translate_device_id,
    **{opcode: translate_pass_through for opcode in PASS_THROUGH},
}
