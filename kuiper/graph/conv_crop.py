"""A crop of a convolution's output folded into the convolution's padding.

A causal convolution (TCNs, WaveNet) is written ``conv(x, padding=p)[..., :-p]``: PyTorch pads
both sides and the model slices the right side's outputs away.  Those dropped outputs are exactly
the ones the right padding made, so the same values come from the convolution with that padding
removed: ``conv(x, pads=(p, 0))``.  The rewrite saves the slice (a copy) and the outputs computed
only to be dropped, and, more important, leaves the activation after the slice reading the
convolution itself, so fusion makes it the convolution's epilogue (a oneDNN post-op).

In general a slice ``[start:-end]`` (step 1) along a spatial dim of a convolution's output drops
``start`` outputs at the front and ``end`` at the back; with stride ``s`` along that dim they are
the outputs of the first ``start * s`` and the last ``end * s`` padded positions, so the padding
shrinks by those counts where it is at least that wide.  Only zero padding, a constant weight, a
slice with constant bounds and a convolution output that nothing else reads are rewritten.  (An
input so short that the crop leaves nothing then meets the conv's shape error instead of giving
an empty tensor.)  The
rewrite reads only the op set (kuiper.ops.conv's ConvNd and the SliceDim op), never a frontend.
"""

from __future__ import annotations

from ..model_ir import OperandInfo, OpNode
from ..ops.base import is_to_the_end
from ..ops.conv import ConvNd
from ..ops.slicing import INT_MAX
from ..plugins import op_registry
from .fusion import producers_and_readers

SLICE_TYPE = "SliceDim"


def fold_crops_into_convs(order: list[OpNode], operands: dict[str, OperandInfo],
                          model_outputs: list[str]) -> list[OpNode]:
    """The op order with each crop of a convolution's output made part of the convolution's padding."""
    producer, readers = producers_and_readers(order)
    kept = set(model_outputs)
    cropped: dict[str, OpNode] = {}  # conv name -> the conv with less padding, producing the slice's output
    folded: set[str] = set()  # the slices
    for node in order:
        if node.type != SLICE_TYPE or len(node.inputs) != 1 or len(node.outputs) != 1:
            continue
        conv = producer.get(node.inputs[0])
        if conv is None or conv.name in cropped or node.inputs[0] in kept or readers[node.inputs[0]] != 1:
            continue
        rewritten = _cropped_conv(conv, node, operands)
        if rewritten is not None:
            cropped[conv.name] = rewritten
            folded.add(node.name)
    return [cropped.get(node.name, node) for node in order if node.name not in folded]


def _cropped_conv(conv: OpNode, crop: OpNode, operands: dict[str, OperandInfo]) -> OpNode | None:
    """``conv`` with the padding ``crop`` removes taken off, producing the crop's output; None where
    the pair does not qualify."""
    registered = op_registry().get(conv.type)
    if registered is None or not issubclass(registered.obj, ConvNd):
        return None
    weight = conv.attrs.get("weight")
    if weight is None or len(conv.inputs) != 1 or len(conv.outputs) != 1 or "epilogue" in conv.params:
        return None
    if conv.params.get("padding_mode", "zeros") != "zeros":
        return None
    spatial = weight.ndim - 2
    info = operands.get(conv.inputs[0])
    if spatial < 1 or info is None or info.shape is None or len(info.shape) != spatial + 2:
        return None  # batched inputs only: a slice's dims count from the batch dim
    pads, stride = conv_pads(conv.params, spatial), int_list(conv.params.get("stride", 1), spatial)
    drops = _drops(crop, spatial)
    if pads is None or stride is None or drops is None:
        return None
    new_pads = []
    for (before, after), s, (front, back) in zip(pads, stride, drops):
        if front * s > before or back * s > after:
            return None  # the crop reaches outputs that read the input itself
        new_pads.append([before - front * s, after - back * s])
    params = {key: value for key, value in conv.params.items() if key != "padding"}
    params["pads"] = new_pads
    return OpNode(type=conv.type, name=conv.name, inputs=list(conv.inputs), outputs=list(crop.outputs),
                  params=params, attrs=dict(conv.attrs), input_keys=list(conv.input_keys), source=conv.source)


def _drops(crop: OpNode, spatial: int) -> list[tuple[int, int]] | None:
    """(outputs dropped at the front, at the back) per spatial dim for a SliceDim of constant bounds,
    step 1 and no selects over a rank ``spatial + 2`` tensor's spatial dims; else None."""
    rows = _slice_rows(crop.params)
    if rows is None:
        return None
    drops = [(0, 0)] * spatial
    seen = set()
    for dim, start, end, step, select in rows:
        axis = dim + spatial + 2 if dim < 0 else dim
        if step != 1 or not is_to_the_end(select) or start < 0 or not 2 <= axis < spatial + 2 or axis in seen:
            return None
        if not (end < 0 or is_to_the_end(end)):
            return None  # a bound counted from the start: what it drops depends on the input's size
        seen.add(axis)
        drops[axis - 2] = (start, 0 if is_to_the_end(end) else -end)
    return drops


def _slice_rows(params: dict) -> list[tuple[int, ...]] | None:
    """(dim, start, end, step, select) per sliced dim, from either spelling of the SliceDim op's params
    (lists ``dims/starts/...`` or scalars ``dim/start/...``; kuiper/ops/slicing.py), all integers."""
    names = ("dims", "starts", "ends", "steps", "selects") if "dims" in params else ("dim", "start", "end", "step",
                                                                                   "select")
    dims = params.get(names[0])
    count = len(dims) if isinstance(dims, list) else 1
    columns = []
    for name, default in zip(names, (None, 0, INT_MAX, 1, INT_MAX)):
        value = params.get(name, [default] * count)
        value = value if isinstance(value, list) else [value]
        if len(value) != count or not all(_is_int(v) for v in value):
            return None
        columns.append(value)
    return list(zip(*columns))


def conv_pads(params: dict, spatial: int) -> list[tuple[int, int]] | None:
    """(before, after) per spatial dim from ``pads`` or an integer ``padding``; None for 'same', 'valid'
    or anything else (left as it is)."""
    if "pads" in params:
        pads = params["pads"]
        if (isinstance(pads, list) and len(pads) == spatial
                and all(isinstance(pair, list) and len(pair) == 2 and all(_is_int(v) and v >= 0 for v in pair)
                        for pair in pads)):
            return [tuple(pair) for pair in pads]
        return None
    padding = int_list(params.get("padding", 0), spatial)
    if padding is None or any(p < 0 for p in padding):
        return None
    return [(p, p) for p in padding]


def int_list(value, count: int) -> list[int] | None:
    """An int, or a list of ``count`` ints (one repeated ``count`` times), as a list; else None."""
    values = value if isinstance(value, list) else [value]
    if len(values) == 1:
        values = values * count
    return list(values) if len(values) == count and all(_is_int(v) for v in values) else None


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
