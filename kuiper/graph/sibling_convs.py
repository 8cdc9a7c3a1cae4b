"""Two convolutions of one input whose outputs are added become one convolution.

Re-parameterizable networks (RepVGG, MobileOne, FastViT) train each layer as parallel branches,
a k x k and a 1 x 1 convolution of the same input, and add their outputs; timm folds them into
one convolution only when asked to (``reparameterize``), so a plain export keeps both and the add:
three passes over the output where one suffices.  Because a convolution is linear in its weight,
``conv(x, W1) + conv(x, W2)`` is ``conv(x, W1 + W2)`` once the smaller kernel is placed inside the
larger one where its taps read the same input positions (a centred 1 x 1 inside a 3 x 3 with
padding 1): the summed kernel's output is the sum of the branches, up to float32 rounding (each
output is one sum of products instead of two sums added).

The rewrite takes an add whose math is exactly the float32 sum of its two inputs, each the only use
of a convolution's output (not a model output).  Both convolutions read the same single input with
constant float32 weights of the same (out, in per group) channels, the same stride, dilation and
groups, zero padding and no epilogue yet, and along every spatial dim the smaller kernel's taps lie
inside the larger one's: its padding before is the larger one's less ``dilation * offset`` for a
whole offset, and after likewise, so both give the same outputs for every input size.  The larger
convolution, with the summed kernel and bias, then takes the add's output at its place in the
order; the smaller one and the add leave.  Reads only the op set (kuiper.ops.conv's ConvNd and
elementwise math), never a frontend.
"""

from __future__ import annotations

import numpy as np

from ..model_ir import OpNode
from ..ops.conv import ConvNd
from ..plugins import op_registry
from .constant_fold import is_float32_binary
from .conv_crop import conv_pads, int_list
from .fusion import elementwise_maths, producers_and_readers
from .target import Target


def merge_sibling_convs(order: list[OpNode], model_outputs: list[str], target: Target) -> list[OpNode]:
    """The op order with each add of two convolutions of one input made one convolution."""
    maths = elementwise_maths(order, target)
    producer, readers = producers_and_readers(order)
    kept = set(model_outputs)
    merged: dict[str, OpNode] = {}  # the larger conv's name -> the merged conv, producing the add's output
    dropped: set[str] = set()  # the smaller convs and the adds
    for node in order:
        math = maths.get(node.name)
        if math is None or len(node.inputs) != 2 or node.inputs[0] == node.inputs[1]:
            continue
        branches = [producer.get(operand) for operand in node.inputs]
        if any(branch is None or branch.name in merged or branch.name in dropped for branch in branches):
            continue
        if any(operand in kept or readers[operand] != 1 for operand in node.inputs):
            continue
        if not is_float32_binary(math, "add"):
            continue
        found = _merged(*branches, node)
        if found is not None:
            larger, smaller, conv = found
            merged[larger.name] = conv
            dropped.update((smaller.name, node.name))
    return [merged.get(node.name, node) for node in order if node.name not in dropped]


def _merged(first: OpNode, second: OpNode, add: OpNode) -> tuple[OpNode, OpNode, OpNode] | None:
    """(the larger conv, the smaller, the conv with their summed kernel producing the add's output), or
    None where the two do not qualify."""
    if first.type != second.type or not all(_is_plain_conv(conv) for conv in (first, second)):
        return None
    if first.inputs != second.inputs:
        return None
    w1, w2 = first.attrs["weight"], second.attrs["weight"]
    if w1.ndim != w2.ndim or w1.shape[:2] != w2.shape[:2]:
        return None
    spatial = w1.ndim - 2
    layouts = []
    for conv in (first, second):
        params = conv.params
        pads = conv_pads(params, spatial)
        stride, dilation = int_list(params.get("stride", 1), spatial), int_list(params.get("dilation", 1), spatial)
        groups = params.get("groups", 1)
        if pads is None or stride is None or dilation is None:
            return None
        layouts.append((pads, stride, dilation, groups))
    if any(layouts[0][i] != layouts[1][i] for i in (1, 2, 3)):
        return None
    larger, smaller = (first, second) if all(a >= b for a, b in zip(w1.shape[2:], w2.shape[2:])) else (second, first)
    big, small = larger.attrs["weight"], smaller.attrs["weight"]
    if not all(a >= b for a, b in zip(big.shape[2:], small.shape[2:])):
        return None  # neither kernel holds the other (a 1 x 3 and a 3 x 1)
    big_pads, small_pads = (layouts[0][0], layouts[1][0]) if larger is first else (layouts[1][0], layouts[0][0])
    dilation = layouts[0][2]
    offsets = []
    for (big_before, big_after), (small_before, small_after), d, k_big, k_small in zip(
            big_pads, small_pads, dilation, big.shape[2:], small.shape[2:]):
        shift = big_before - small_before
        if shift < 0 or shift % d:
            return None
        offset = shift // d
        if offset + k_small > k_big or big_after - small_after != d * (k_big - k_small - offset):
            return None  # the smaller kernel's taps are not inside the larger one's, or the outputs differ
        offsets.append(offset)
    weight = big.copy()
    window = (slice(None), slice(None)) + tuple(slice(o, o + k) for o, k in zip(offsets, small.shape[2:]))
    weight[window] += small
    biases = [conv.attrs["bias"] for conv in (larger, smaller) if "bias" in conv.attrs]
    attrs = {**larger.attrs, "weight": weight}
    params = dict(larger.params)
    if biases:
        attrs["bias"] = biases[0] if len(biases) == 1 else biases[0] + biases[1]
        params["bias"] = True
    conv = OpNode(type=larger.type, name=larger.name, inputs=list(larger.inputs), outputs=list(add.outputs),
                  params=params, attrs=attrs, input_keys=list(larger.input_keys), source=larger.source)
    return larger, smaller, conv


def _is_plain_conv(node: OpNode) -> bool:
    """A convolution (not transposed) of one input by a constant float32 weight (and bias), with zero
    padding and no epilogue."""
    registered = op_registry().get(node.type)
    if registered is None or not issubclass(registered.obj, ConvNd):
        return False
    weight, bias = node.attrs.get("weight"), node.attrs.get("bias")
    if weight is None or weight.dtype != np.float32 or weight.ndim < 3:
        return False
    if bias is not None and (bias.dtype != np.float32 or bias.shape != (weight.shape[0],)):
        return False
    if bias is None and node.params.get("bias") is True:
        return False  # a bias the file promises but does not give: the op reports it when built
    if len(node.inputs) != 1 or len(node.outputs) != 1 or "epilogue" in node.params:
        return False
    return node.params.get("padding_mode", "zeros") == "zeros"
