"""ONNX's shape family -> canonical Reshape, Transpose, Squeeze/Unsqueeze, Concat, Split, Slice, Broadcast, Tile,
Gather, TakeAlongAxis, and Constant where the value is fixed at load time (``Shape`` of a static shape).

ONNX passes shapes, axes, starts and sizes as inputs (since opsets 5 to 13); kuiper's ops take them as
params, so they must be known when the model is loaded (``site.constant``).
"""

from __future__ import annotations

import numpy as np

from ..model_ir import OpNode, OperandInfo
from .emit import NARROW_FLOATS, Emit
from .partial_shapes import FreeDim, free_dim, partial_value
from .values import KnownInputError
from .site import Site


def _axis(site: Site, axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise site.error(f"axis {axis} is out of range for rank {rank}")
    return axis % rank


def _axes_input_or_attribute(site: Site, index: int, default=None) -> list[int] | None:
    """Axes given as input ``index`` (newer opsets) or the ``axes`` attribute (older ones)."""
    if site.has_input(index):
        return site.constant_ints(index, "axes")
    return site.ints("axes", default)


def translate_shape(site: Site) -> list[OpNode]:
    """A constant when the dims are known at load; else computed at run time, the free dims read by
    DimensionSize (a value that then decides no shape at load: see translate_reshape)."""
    rank = site.rank(0)
    shape = site.shape(0)
    start, end = site.int_("start", 0), site.int_("end", rank)
    start, end = (min(max(v + rank if v < 0 else v, 0), rank) for v in (start, end))
    if all(d is not None for d in shape[start:end]):
        value = np.asarray(shape[start:end], dtype=np.int64)
        site.values.know(site.outputs[0], value)
        return [site.op("Constant", [], site.outputs, {}, {"data": value})]
    emit = Emit(site)
    parts = [emit.const([size], "int64") if size is not None else
             emit.op("Reshape", [emit.op("DimensionSize", [site.input(0)], {"dim": dim, "dtype": "int64"},
                                         dtype="int64")], {"shape": [1]}, dtype="int64")
             for dim, size in enumerate(shape[start:end], start=start)]
    emit.op("Concat", parts, {"dim": 0}, dtype="int64", out=site.outputs[0])
    return emit.ops


def translate_size(site: Site) -> list[OpNode]:
    value = np.asarray(int(np.prod(site.static_shape(0), dtype=np.int64)), dtype=np.int64)
    site.values.know(site.outputs[0], value)
    return [site.op("Constant", [], site.outputs, {}, {"data": value})]


def translate_reshape(site: Site) -> list[OpNode]:
    """The canonical Reshape to the target, which must be known at load, or computed at run time from the
    Shape of a tensor with a free dim (partial_shapes.py) with at most one entry unknown at load."""
    allow_zero = site.int_("allowzero", 0)
    partial = partial_value(site.values, site.input(1)) if site.opset >= 5 and not site.is_known(1) else None
    if partial is not None:
        target = _from_free_dims(site, partial, allow_zero)
        if not allow_zero and 0 in target:
            target = _copied_dims(site, target)
        return _reshaped(site, target)
    target = site.constant_ints(1, "shape") if site.opset >= 5 else site.ints("shape")
    if not allow_zero and 0 in target:
        target = _copied_dims(site, target)
    return _reshaped(site, target)


def _reshaped(site: Site, target: list[int]) -> list[OpNode]:
    """The canonical Reshape; the output's dims that the target gives are declared (inference may have
    lost them where a free dim stood in the way)."""
    known = site.values.shape(site.outputs[0])
    if target.count(-1) <= 1 and (known is None or len(known) == len(target)):
        shape = tuple(None if size == -1 else size for size in target)
        if known is not None:
            shape = tuple(k if k is not None else d for k, d in zip(known, shape))
        site.values.declare(OperandInfo(site.outputs[0], shape, site.values.infos[site.outputs[0]].dtype
                                        if site.outputs[0] in site.values.infos else site.dtype(0)))
    return [site.op("Reshape", [site.input(0)], site.outputs, {"shape": target})]


def _from_free_dims(site: Site, partial: list, allow_zero: int) -> list[int]:
    """A target with free dims: the reshaped tensor's own dim i at position i is a copy (ONNX's 0); one
    other free dim, with no -1 beside it, is the -1 the element count decides."""
    target: list = [0 if isinstance(entry, FreeDim) and entry == free_dim(site.values, site.input(0), i)
                    and not allow_zero else entry for i, entry in enumerate(partial)]
    free = [i for i, entry in enumerate(target) if isinstance(entry, FreeDim)]
    if len(free) > 1 or (free and -1 in target):
        raise site.error(f"its shape ('{site.input(1)}') is computed at run time and leaves more than one dim "
                         f"unknown at load ({['?' if isinstance(e, FreeDim) else e for e in partial]})")
    if free:
        target[free[0]] = -1
        site.values.same_free_dim[(site.outputs[0], free[0])] = partial[free[0]]
    for i, entry in enumerate(target):
        if entry == 0 and isinstance(partial[i], FreeDim):  # a copy: the output's dim i is the input's
            site.values.same_free_dim[(site.outputs[0], i)] = partial[i]
    return target


def _copied_dims(site: Site, target: list[int]) -> list[int]:
    """A Reshape target whose 0s (copy the input's dim) are replaced by sizes. A free dim copied this way
    (an exporter's batch: ``[0, 2, -1]``) becomes the one -1, the canonical Reshape then finding it; any
    other -1 is computed here, the free dim being on both sides. Refused when that cannot be done."""
    shape = site.shape(0)
    target = list(target)
    free = []
    for i, size in enumerate(target):
        if size == 0:
            if shape is None or i >= len(shape):
                raise site.error(f"shape {target} copies dim {i} of an input of unknown rank or fewer dims")
            if shape[i] is None:
                free.append(i)
            else:
                target[i] = shape[i]
    if not free:
        return target
    others_known = all(d is not None for i, d in enumerate(shape) if i not in free)
    if len(free) > 1 or not others_known or target.count(-1) > 1:
        raise site.error(f"shape {target} copies dim(s) {free} of the input {list(shape)}, whose size is not known "
                         "when the model is loaded")
    if -1 in target:  # the free dim is on both sides: the -1 takes the rest of the known dims
        rest = 1
        for i, size in enumerate(shape):
            rest *= 1 if i == free[0] else size
        kept = 1
        for i, size in enumerate(target):
            kept *= 1 if i == free[0] or size == -1 else size
        if kept == 0 or rest % kept:
            raise site.error(f"shape {target} does not fit the input {list(shape)}")
        target[target.index(-1)] = rest // kept
    target[free[0]] = -1
    return target


def translate_flatten(site: Site) -> list[OpNode]:
    """To 2-D: the dims before ``axis`` multiplied into the first, the rest into the second (free dims too)."""
    rank = site.rank(0)
    axis = site.int_("axis", 1)
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis <= rank:
        raise site.error(f"axis {axis} is out of range for rank {rank}")
    emit = Emit(site)
    dtype, out = site.dtype(0), site.outputs[0]
    if axis == 0:
        whole = emit.op("Flatten", [site.input(0)], {"start_dim": 0, "end_dim": -1}, dtype=dtype)
        emit.op("Unsqueeze", [whole], {"dim": 0}, dtype=dtype, out=out)
    elif axis == rank:
        whole = emit.op("Flatten", [site.input(0)], {"start_dim": 0, "end_dim": -1}, dtype=dtype)
        emit.op("Unsqueeze", [whole], {"dim": 1}, dtype=dtype, out=out)
    elif axis == 1:  # (N, ...) -> (N, rest): one flatten, as exporters write a classifier's head
        emit.op("Flatten", [site.input(0)], {"start_dim": 1, "end_dim": -1}, dtype=dtype, out=out)
    else:
        inner = emit.op("Flatten", [site.input(0)], {"start_dim": axis, "end_dim": -1}, dtype=dtype)
        emit.op("Flatten", [inner], {"start_dim": 0, "end_dim": axis - 1}, dtype=dtype, out=out)
    return emit.ops


def translate_transpose(site: Site) -> list[OpNode]:
    rank = site.rank(0)
    permutation = site.ints("perm", list(reversed(range(rank))))
    if sorted(permutation) != list(range(rank)):
        raise site.error(f"perm {permutation} is not a permutation of {rank} dims")
    return [site.op("Transpose", [site.input(0)], site.outputs, {"dims": permutation})]


def translate_squeeze(site: Site) -> list[OpNode]:
    axes = _axes_input_or_attribute(site, 1)
    params = {} if axes is None else {"dim": [_axis(site, a, site.rank(0)) for a in axes]}
    if axes is not None:
        shape = site.shape(0)
        for axis in params["dim"]:
            if shape is not None and shape[axis] not in (None, 1):
                raise site.error(f"cannot squeeze axis {axis} of size {shape[axis]}")
    return [site.op("Squeeze", [site.input(0)], site.outputs, params)]


def translate_unsqueeze(site: Site) -> list[OpNode]:
    axes = _axes_input_or_attribute(site, 1)
    if not axes:
        raise site.error("needs the axes to insert")
    rank = site.rank(0) + len(axes)
    axes = sorted(_axis(site, a, rank) for a in axes)
    if len(set(axes)) != len(axes):
        raise site.error(f"axes {axes} repeat an axis")
    emit = Emit(site)
    value = site.input(0)
    for position, axis in enumerate(axes):
        last = position == len(axes) - 1
        value = emit.op("Unsqueeze", [value], {"dim": axis}, dtype=site.dtype(0), out=site.outputs[0] if last else None)
    return emit.ops


def translate_concat(site: Site) -> list[OpNode]:
    inputs = [name for name in site.inputs if name]
    rank = site.rank(0)
    return [site.op("Concat", inputs, site.outputs, {"dim": _axis(site, site.int_("axis"), rank)})]


def translate_split(site: Site) -> list[OpNode]:
    """The canonical Split; only the split dim must be known at load (a free batch elsewhere is fine)."""
    axis = _axis(site, site.int_("axis", 0), site.rank(0))
    size = site.shape(0)[axis]
    if size is None:
        size = site.static_shape(0)[axis]  # the error naming the input and its shape
    count = len(site.outputs)
    if site.has_input(1):
        sections = site.constant_ints(1, "split")
    elif site.attribute("split") is not None:
        sections = site.ints("split")
    else:
        pieces = site.int_("num_outputs", count)
        step = -(-size // pieces)  # ceil: the last piece is smaller (opset 18)
        sections = [min(step, size - i * step) for i in range(pieces)]
    if len(sections) != count or sum(sections) != size:
        raise site.error(f"split sizes {sections} do not cut a dim of {size} into {count} outputs")
    return [site.op("Split", [site.input(0)], site.outputs, {"dim": axis, "split_size_or_sections": sections})]


def translate_slice(site: Site) -> list[OpNode]:
    shape = site.static_shape(0)
    rank = len(shape)
    if site.opset >= 10:
        try:
            starts, ends = site.constant_ints(1, "starts"), site.constant_ints(2, "ends")
        except KnownInputError as error:
            if error.input_name not in site.values.step_inputs:
                raise
            return _slice_at_run_time(site, shape)
        axes = site.constant_ints(3, "axes") if site.has_input(3) else list(range(len(starts)))
        steps = site.constant_ints(4, "steps") if site.has_input(4) else [1] * len(starts)
    else:
        starts, ends = site.ints("starts"), site.ints("ends")
        axes, steps = site.ints("axes", list(range(len(starts)))), [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise site.error("starts, ends, axes and steps differ in length")
    lows, highs, strides, flipped = [0] * rank, list(shape), [1] * rank, []
    for start, end, axis, step in zip(starts, ends, axes, steps):
        axis = _axis(site, axis, rank)
        if step == 0:
            raise site.error("a step of 0")
        first, stop, step = slice(start, end, step).indices(shape[axis])
        if step < 0:  # walk the reversed dim forwards
            flipped.append(axis)
            first, stop, step = shape[axis] - 1 - first, shape[axis] - 1 - stop, -step
        count = max(0, -(-(stop - first) // step))
        lows[axis], highs[axis], strides[axis] = first, first + max(count - 1, 0) * step + (1 if count else 0), step
    emit = Emit(site)
    value = site.input(0)
    if flipped:
        value = emit.op("Reverse", [value], {"dims": sorted(flipped)}, dtype=site.dtype(0))
    emit.op("Slice", [value], {"starts": lows, "limits": highs, "strides": strides}, dtype=site.dtype(0),
            out=site.outputs[0])
    return emit.ops


def _slice_at_run_time(site: Site, shape: tuple[int, ...]) -> list[OpNode]:
    """A Slice whose starts or ends change on every step of a loop (they come from the body's own inputs): on
    one axis with step 1, the positions from start to end (ONNX's clamping) picked by a mask at run time,
    so the length may change too (MaskedSelect, then IndexSelect)."""
    axes = site.constant_ints(3, "axes") if site.has_input(3) else [0]
    steps = site.constant_ints(4, "steps") if site.has_input(4) else [1]
    if len(axes) != 1 or steps != [1]:
        raise site.error("starts or ends that change inside a loop are supported on one axis with step 1, found "
                         f"axes {axes} and steps {steps}")
    axis = _axis(site, axes[0], len(shape))
    size = shape[axis]
    emit = Emit(site)

    def bound(index: int) -> str:  # negative counts from the end; then clamped to [0, size]
        value = emit.op("Reshape", [emit.convert(site.input(index), "int64")], {"shape": []}, dtype="int64")
        wrapped = emit.fn("select", [emit.compare("lt", value, emit.const(0, "int64")),
                                     emit.fn("add", [value, emit.const(size, "int64")]), value])
        return emit.fn("clamp", [emit.const(0, "int64"), wrapped, emit.const(size, "int64")])

    start, end = bound(1), bound(2)
    positions = emit.op("Iota", [], {"shape": [size], "dim": 0, "dtype": "int64"}, dtype="int64")
    inside = emit.fn("and", [emit.compare("ge", positions, start), emit.compare("lt", positions, end)])
    picked = emit.op("MaskedSelect", [positions, inside], dtype="int64")
    emit.op("IndexSelect", [site.input(0), picked], {"dim": axis}, dtype=site.dtype(0), out=site.outputs[0])
    return emit.ops


def translate_expand(site: Site) -> list[OpNode]:
    partial = partial_value(site.values, site.input(1)) if not site.is_known(1) else None
    if partial is not None and any(isinstance(entry, FreeDim) for entry in partial):
        return _expand_to_free_dims(site, partial)
    shape = site.static_shape(0)
    target = tuple(np.broadcast_shapes(shape, tuple(site.constant_ints(1, "shape"))))
    lead = len(target) - len(shape)
    return [site.op("Broadcast", [site.input(0)], site.outputs,
                    {"shape": list(target), "dims": list(range(lead, len(target)))})]


def _expand_to_free_dims(site: Site, partial: list) -> list[OpNode]:
    """Expand to a target computed at run time with free dims (torch's ``cls.expand(batch, -1, -1)``): the
    canonical Expand takes the run-time vector as its sizes (``$sizes``), PyTorch's meaning, so every entry
    whose ONNX meaning differs is fixed at load: where the input's dim is not 1, the entry must be 1 or
    that dim and becomes -1 (keep it). A free entry must meet an input dim of 1 (or be that dim itself)."""
    shape = site.static_shape(0)
    if len(partial) < len(shape):
        raise site.error(f"its shape has {len(partial)} entries, fewer than the input's {len(shape)} dims")
    lead = len(partial) - len(shape)
    keep, declared = [], []
    for i, entry in enumerate(partial):
        size = shape[i - lead] if i >= lead else 1
        if isinstance(entry, FreeDim):
            if size != 1:
                raise site.error(f"its shape's entry {i} is a dim unknown at load, against an input dim of {size}")
            keep.append(False)
            declared.append(None)
        elif size != 1:
            if entry not in (1, size):
                raise site.error(f"cannot expand dim {i - lead} of size {size} to {entry}")
            keep.append(True)
            declared.append(size)
        else:
            keep.append(False)
            declared.append(entry)
    emit = Emit(site)
    sizes = emit.convert(site.input(1), "int64")
    if any(keep):
        sizes = emit.fn("select", [emit.const(np.asarray(keep), "bool"), emit.const(np.full(len(keep), -1), "int64"),
                                   sizes])
    site.values.declare(OperandInfo(site.outputs[0], tuple(declared), site.dtype(0)))
    emit.op("Expand", [site.input(0), sizes], dtype=site.dtype(0), out=site.outputs[0])
    emit.ops[-1].input_keys = ["input", "sizes"]
    return emit.ops


def translate_tile(site: Site) -> list[OpNode]:
    return [site.op("Tile", [site.input(0)], site.outputs, {"dims": site.constant_ints(1, "repeats")})]


def translate_constant_of_shape(site: Site) -> list[OpNode]:
    shape = site.constant_ints(0, "shape") if site.has_input(0) else []
    fill = site.tensor("value", np.zeros(1, dtype=np.float32)).reshape(-1)
    if fill.size != 1:
        raise site.error(f"value must hold one element, found {fill.size}")
    emit = Emit(site)
    scalar = emit.const(fill[0], str(fill.dtype))
    emit.op("Broadcast", [scalar], {"shape": shape, "dims": []}, dtype=str(fill.dtype), out=site.outputs[0])
    return emit.ops


def translate_range(site: Site) -> list[OpNode]:
    """The canonical Arange; bfloat16 and float8 (storage-only types) count in float32 and round back. ONNX
    asks for scalars; a 1-element tensor (what AffineGrid's function body passes, and ONNX's reference
    takes) is read as its one value."""
    dtype = site.dtype(0)
    emit = Emit(site)
    bounds = []
    for index in range(3):
        value = site.input(index)
        if site.shape(index) == (1,):
            value = emit.op("Reshape", [value], {"shape": []}, dtype=site.dtype(index))
        bounds.append(value)
    if dtype not in NARROW_FLOATS:
        emit.op("Arange", bounds, {"dtype": dtype}, dtype=dtype, out=site.outputs[0])
        return emit.ops
    wide = [emit.convert(value, "float32") for value in bounds]
    emit.convert(emit.op("Arange", wide, {"dtype": "float32"}, dtype="float32"), dtype, out=site.outputs[0])
    return emit.ops


def _wrapped_indices(emit: Emit, site: Site, indices: str, size: int) -> str:
    """Indices with negative ones counted from the end (ONNX allows -size .. size-1)."""
    dtype = emit.dtype(indices)
    negative = emit.compare("lt", indices, emit.const(0, dtype))
    return emit.fn("select", [negative, emit.fn("add", [indices, emit.const(size, dtype)]), indices])


def translate_gather(site: Site) -> list[OpNode]:
    rank = site.rank(0)
    axis = _axis(site, site.int_("axis", 0), rank)
    index_rank = site.rank(1)
    partly = site.shape(0)
    if index_rank <= 1 and partly[axis] is not None and None in partly:
        return _gather_with_free_dims(site, axis, partly[axis], index_rank)
    shape = site.static_shape(0)
    emit = Emit(site)
    indices = _wrapped_indices(emit, site, site.input(1), shape[axis])
    sizes = list(shape)
    sizes[axis] = 1
    params = {
        "offset_dims": [*range(axis), *range(axis + index_rank, rank - 1 + index_rank)],
        "collapsed_slice_dims": [axis], "start_index_map": [axis], "index_vector_dim": index_rank,
        "slice_sizes": sizes,
    }
    emit.op("Gather", [site.input(0), indices], params, dtype=site.dtype(0), out=site.outputs[0])
    return emit.ops


def _gather_with_free_dims(site: Site, axis: int, size: int, index_rank: int) -> list[OpNode]:
    """Gather along a known dim of data with free dims elsewhere (a free batch), by 0-D or 1-D indices:
    IndexSelect, which needs no static slice sizes; a 0-D index then drops the dim."""
    emit = Emit(site)
    indices = _wrapped_indices(emit, site, site.input(1), size)
    dtype = site.dtype(0)
    if index_rank == 1:
        emit.op("IndexSelect", [site.input(0), indices], {"dim": axis}, dtype=dtype, out=site.outputs[0])
        return emit.ops
    picked = emit.op("IndexSelect", [site.input(0), indices], {"dim": axis}, dtype=dtype)
    emit.op("Squeeze", [picked], {"dim": [axis]}, dtype=dtype, out=site.outputs[0])
    return emit.ops


def translate_gather_elements(site: Site) -> list[OpNode]:
    shape = site.static_shape(0)
    axis = _axis(site, site.int_("axis", 0), len(shape))
    emit = Emit(site)
    indices = _wrapped_indices(emit, site, site.input(1), shape[axis])
    emit.op("TakeAlongAxis", [site.input(0), indices], {"dim": axis}, dtype=site.dtype(0), out=site.outputs[0])
    return emit.ops


def translate_dropout(site: Site) -> list[OpNode]:
    """The input unchanged, and a mask of ones: in inference (training_mode off), and in training with a ratio
    of 0, which drops nothing. Training with a positive ratio drops at random, which kuiper does not do."""
    if site.has_input(2) and bool(site.constant(2, "training_mode").reshape(-1)[0]):
        ratio = float(site.constant(1, "ratio").reshape(-1)[0]) if site.has_input(1) else 0.5
        if ratio != 0.0:
            raise site.error(f"training_mode=True with ratio={ratio} drops at random, which inference does not")
    emit = Emit(site)
    emit.op("Identity", [site.input(0)], dtype=site.dtype(0), out=site.outputs[0])
    if site.has_output(1):
        ones = emit.const(True, "bool")
        emit.op("Broadcast", [ones], {"shape": list(site.static_shape(0)), "dims": []}, dtype="bool",
                out=site.outputs[1])
    return emit.ops


TRANSLATORS = {
    "Shape": translate_shape, "Size": translate_size, "Reshape": translate_reshape, "Flatten": translate_flatten,
    "Transpose": translate_transpose, "Squeeze": translate_squeeze, "Unsqueeze": translate_unsqueeze,
    "Concat": translate_concat, "Split": translate_split, "Slice": translate_slice, "Expand": translate_expand,
    "Tile": translate_tile, "ConstantOfShape": translate_constant_of_shape, "Range": translate_range,
    "Gather": translate_gather, "GatherElements": translate_gather_elements, "Dropout": translate_dropout,
}
