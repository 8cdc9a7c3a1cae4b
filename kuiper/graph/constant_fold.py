"""Constants folded where the kernels can use them: a per-channel addend into its conv's or Linear's
bias, a per-channel factor or a batch norm into its weight, a single value into the elementwise math
that reads it.

Rewrites of OpNodes before fusion (fusion.py). They read only the op set, never a frontend:

1. ``add(conv(x), c)``, where the conv has a constant float32 weight and ``c`` is a float32
   constant that varies only along the conv's channel dim, becomes the conv with bias
   ``bias + c`` (``c`` alone when it had none), the bias a conv op adds to its output; likewise
   ``add(linear(x), c)`` with ``c`` varying only along the Linear's last (feature) dim.
   ``c`` is a Constant op, or Broadcast and Reshape ops over one (how XLA spells a bias).  The
   op's result must have no other reader and not be a model output.
2. An input of an elementwise op that a Constant op holding one finite value makes becomes an
   IR constant of that value and dtype in the op's math, when the constant's shape cannot
   change the result's: ``max(x, 0)`` is then ReLU, ``clamp(0, x, 6)`` ReLU6.
3. ``mul(conv(x), c)`` (or ``mul(linear(x), c)``), ``c`` as in 1. (a layer scale: ConvNeXt's and
   EdgeNeXt's ``gamma``), becomes the op with weight and bias times ``c``.  Inside larger math too
   (PoolFormer's ``x + fc2(y) * gamma``, one PNNX expression of three inputs), where the op's result
   and ``c`` appear only as that product: the op's weight and bias take ``c``, and the math reads 1
   in its place.
4. A BatchNorm (running statistics, its own constants) of a Linear's output, read as (rows,
   features) directly or through ``flatten`` (and given back its shape by ``reshape_as`` the
   Linear's output, as LeViT writes its Linear + BatchNorm1d), becomes the Linear with the
   batch norm's per-feature scale in its weight and its shift in its bias: one GEMM instead of
   a GEMM, a pass over the output and two reshapes, and the op after it (LeViT's Hardswish)
   then reads the Linear directly and can become its epilogue.

Why: a conv or Linear runs its epilogue as oneDNN post-ops only when all of it maps to them (an
activation of its result, a residual sum), and a bias as a broadcast input or 0 as a constant
input are neither, so such convs stayed on slower paths (docs/performance.md).  Ops left with no reader
(the constants and broadcasts folded away) are dropped.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..backends import get_backend
from ..errors import KuiperError
from ..ir import dtypes, make
from ..ir.nodes import Binary, Var
from ..ir.visitors import Visitor
from ..model_ir import OperandInfo, OpNode
from ..ops.conv import ConvNd
from ..ops.elementwise import FUSED_TYPE, ElementwiseMath, function_for
from ..ops.linear import Linear
from ..plugins import op_registry
from .fusion import elementwise_maths, producers_and_readers
from .target import Target

FLOAT32 = "float32"
SHAPE_ONLY_TYPES = ("Broadcast", "Reshape")  # ops that lay a constant's values out anew, computing nothing
CONV_CHANNEL_AXIS = 1  # a conv's output is (N, C, *spatial); a Linear's features are its last dim


def fold_constants(order: list[OpNode], operands: dict[str, OperandInfo], model_outputs: list[str],
                   target: Target) -> list[OpNode]:
    """The op order with both rewrites made and the ops they left unread dropped."""
    order = fold_batch_norms_into_linears(order, operands, set(model_outputs))
    order = fold_channel_scales_into_weights(order, operands, set(model_outputs), target)
    order = fold_channel_scales_inside_math(order, operands, set(model_outputs), target)
    order = fold_channel_adds_into_biases(order, operands, set(model_outputs), target)
    order = inline_single_values(order, operands, target)
    return _without_unread_ops(order, model_outputs)


def fold_channel_adds_into_biases(order: list[OpNode], operands: dict[str, OperandInfo], kept: set[str],
                                  target: Target) -> list[OpNode]:
    """Each float32 ``conv + per-channel constant`` (or Linear + per-feature constant) as the op with
    that constant in its bias."""
    return _fold_per_channel(order, operands, kept, target, "add", _with_bias)


def fold_channel_scales_into_weights(order: list[OpNode], operands: dict[str, OperandInfo], kept: set[str],
                                     target: Target) -> list[OpNode]:
    """Each float32 ``conv * per-channel constant`` (or Linear * per-feature constant: a layer scale) as the
    op with its weight and bias scaled."""
    return _fold_per_channel(order, operands, kept, target, "mul", _with_scale)


def fold_channel_scales_inside_math(order: list[OpNode], operands: dict[str, OperandInfo], kept: set[str],
                                    target: Target) -> list[OpNode]:
    """Each elementwise op of three or more float32 inputs whose math reads a conv's (or Linear's) result
    only as its product with a per-channel constant, and the constant only there: the op's weight and
    bias take the constant, and the math reads 1 for it (``x + conv(y) * gamma`` becomes ``x + conv'(y)``,
    a residual sum that oneDNN runs as a post-op)."""
    maths = elementwise_maths(order, target)
    producer, readers = producers_and_readers(order)
    rewritten: dict[str, OpNode] = {}  # layers with their scale, and the ops reading them with 1 for it
    for node in order:
        math_of_node = maths.get(node.name)
        if math_of_node is None or len(node.inputs) < 3 or node.name in rewritten:
            continue
        try:
            function = function_for(math_of_node, (FLOAT32,) * len(node.inputs))
        except KuiperError:
            continue
        statements = function.body.stmts
        if len(statements) != 1 or len(function.results) != 1:
            continue
        for position, operand in enumerate(node.inputs):
            layer = producer.get(operand)
            if (layer is None or layer.name in rewritten or operand in kept or readers[operand] != 1
                    or position in math_of_node.whole_inputs):
                continue
            axis = _bias_axis(layer, operands)
            if axis is None:
                continue
            scale = _channel_scale(node, position, function, producer, operands, layer.attrs["weight"].shape[0], axis)
            if scale is not None:
                factor, channels = scale
                rewritten[layer.name] = _with_scale(layer, channels, layer.outputs)
                rewritten[node.name] = _with_constants(node, math_of_node, {factor: np.ones((), np.float32)})
                break
    return [rewritten.get(node.name, node) for node in order]


def _channel_scale(node: OpNode, position: int, function, producer, operands, channels: int,
                   axis: int) -> tuple[int, np.ndarray] | None:
    """(the input position of a per-channel constant that the math multiplies input ``position`` by, its
    vector) where both inputs appear only in that product; else None."""
    value, params = function.body.stmts[0].value, function.params
    for factor, operand in enumerate(node.inputs):
        if factor == position:
            continue
        vector = _per_channel(_constant_value(operand, producer), operands[node.inputs[position]].shape, channels, axis)
        if vector is not None and _only_as_product(value, params[position], params[factor]):
            return factor, vector
    return None


def _only_as_product(value, first: Var, second: Var) -> bool:
    """Whether ``first`` and ``second`` appear in ``value`` only as the float32 product of the two."""
    finder = _ProductFinder((Binary("mul", first, second, FLOAT32), Binary("mul", second, first, FLOAT32)),
                            (first, second))
    finder(value)
    return finder.products > 0 and not finder.alone


class _ProductFinder(Visitor):
    """Counts the occurrences of ``product`` (either order) and notes any of its factors outside one."""

    def __init__(self, product: tuple, factors: tuple):
        self.product, self.factors = product, factors
        self.products, self.alone = 0, False

    def visit(self, node):
        if node in self.product:
            self.products += 1
        elif node in self.factors:
            self.alone = True
        else:
            self.generic_visit(node)


def _fold_per_channel(order, operands, kept, target: Target, operation: str, rewrite) -> list[OpNode]:
    """Each float32 ``operation(layer(x), c)``, c a per-channel constant, as ``rewrite(layer, c, outputs)``."""
    maths = elementwise_maths(order, target)
    producer, readers = producers_and_readers(order)
    rewritten: dict[str, OpNode] = {}  # conv or Linear name -> it with c folded in, producing the op's output
    folded: set[str] = set()  # the adds or multiplies
    for node in order:
        math_of_node = maths.get(node.name)
        if math_of_node is None or len(node.inputs) != 2 or not is_float32_binary(math_of_node, operation):
            continue
        for position, operand in enumerate(node.inputs):
            layer = producer.get(operand)
            if layer is None or layer.name in rewritten or operand in kept or readers[operand] != 1:
                continue
            axis = _bias_axis(layer, operands)
            if axis is None:
                continue
            weight = layer.attrs["weight"]
            constant = _constant_value(node.inputs[1 - position], producer)
            channels = _per_channel(constant, operands[operand].shape, weight.shape[0], axis)
            if channels is not None:
                rewritten[layer.name] = rewrite(layer, channels, node.outputs)
                folded.add(node.name)
                break
    return [rewritten.get(node.name, node) for node in order if node.name not in folded]


def fold_batch_norms_into_linears(order: list[OpNode], operands: dict[str, OperandInfo], kept: set[str]) -> list[OpNode]:
    """Each BatchNorm of a Linear's (rows, features) output, directly or through ``flatten`` (and back
    through ``reshape_as`` the Linear's output), as the Linear with the batch norm folded in."""
    producer, readers = producers_and_readers(order)
    reshaped_as = {node.inputs[0]: node for node in order if node.type == "ReshapeAs" and len(node.inputs) == 2}
    replaced: dict[str, OpNode] = {}  # the node whose place the folded Linear (or the kept flatten) takes
    dropped: set[str] = set()
    for norm in order:
        if norm.type != "BatchNorm" or len(norm.inputs) != 1 or len(norm.outputs) != 1:
            continue
        source = producer.get(norm.inputs[0])
        flatten = source if source is not None and source.type == "Flatten" and len(source.inputs) == 1 else None
        linear = producer.get(flatten.inputs[0]) if flatten is not None else source
        if linear is None or linear.name in dropped or not _is_linear(linear) or _bias_axis(linear, operands) is None:
            continue
        rows = operands.get(norm.inputs[0])
        if rows is None or rows.shape is None or len(rows.shape) != 2:
            continue  # the batch norm's channels must be the Linear's features: (rows, features)
        linear_out, norm_out = linear.outputs[0], norm.outputs[0]
        back = reshaped_as.get(norm_out)
        if back is None or back.inputs[1] != linear_out or readers[norm_out] != 1:
            back = None
        readers_of_linear = 1 + (back is not None)  # the flatten or the norm, and reshape_as reading its shape
        if (readers[linear_out] != readers_of_linear or linear_out in kept or norm.inputs[0] in kept
                or (flatten is not None and readers[flatten.outputs[0]] != 1)):
            continue
        folded = _with_batch_norm(linear, norm)
        if folded is None:
            continue
        if back is not None:  # flatten, norm and reshape_as go: the Linear makes reshape_as's output
            replaced[back.name] = dataclasses.replace(folded, outputs=list(back.outputs))
            dropped.update(node.name for node in (linear, flatten, norm) if node is not None)
        elif flatten is not None:  # the flatten stays, now making the norm's output
            replaced[linear.name] = folded
            replaced[norm.name] = dataclasses.replace(flatten, outputs=list(norm.outputs))
            dropped.add(flatten.name)
        else:
            replaced[norm.name] = dataclasses.replace(folded, outputs=list(norm.outputs))
            dropped.add(linear.name)
    return [replaced.get(node.name, node) for node in order if node.name not in dropped]


def _is_linear(node: OpNode) -> bool:
    """Whether the node is an op of the Linear family, whose features are its output's last dim (a conv's
    channels are dim 1: a batch norm of its flattened output normalises something else)."""
    registered = op_registry().get(node.type)
    return registered is not None and issubclass(registered.obj, Linear)


def _with_batch_norm(linear: OpNode, norm: OpNode) -> OpNode | None:
    """The Linear computing ``norm(linear(x))``: the norm's per-channel scale and shift (the norm op's
    own folding of its statistics and affine weights) in the weight and bias; None unless the norm's
    statistics are constants with one value per feature of the Linear."""
    host = get_backend("numpy")
    try:
        batch_norm = op_registry()["BatchNorm"].obj(norm, host)
    except KuiperError:
        return None  # bad params: the op reports them when it is built
    weight = linear.attrs["weight"]
    if not batch_norm.static or batch_norm.scale.shape != weight.shape[:1] or batch_norm.scale.dtype != np.float32:
        return None
    scale, shift = batch_norm.scale.astype(np.float64), batch_norm.shift.astype(np.float64)
    bias = linear.attrs.get("bias")
    bias = shift if bias is None else bias.astype(np.float64) * scale + shift
    attrs = {**linear.attrs, "weight": (weight.astype(np.float64) * scale[:, None]).astype(np.float32),
             "bias": bias.astype(np.float32)}
    return dataclasses.replace(linear, params={**linear.params, "bias": True}, attrs=attrs)


def is_float32_binary(math_of_node: ElementwiseMath, operation: str) -> bool:
    """Whether the math on two float32 inputs is exactly their float32 sum (``add``) or product (``mul``)."""
    try:
        function = function_for(math_of_node, (FLOAT32, FLOAT32))
    except KuiperError:
        return False  # math that takes no float32 inputs (a bitwise and)
    statements = function.body.stmts
    if len(statements) != 1 or len(function.results) != 1:
        return False
    first, second = function.params
    return statements[0].value in (Binary(operation, first, second, FLOAT32), Binary(operation, second, first, FLOAT32))


def _bias_axis(node: OpNode, operands: dict[str, OperandInfo]) -> int | None:
    """The axis of the output its bias runs along, for a convolution (not transposed; batched: axis 1)
    or a Linear with a constant float32 weight (its last axis), a float32 output of known rank and no
    bias or a float32 one per output channel; else None."""
    registered = op_registry().get(node.type)
    is_conv = registered is not None and issubclass(registered.obj, ConvNd)
    if registered is None or not (is_conv or issubclass(registered.obj, Linear)):
        return None
    weight, bias = node.attrs.get("weight"), node.attrs.get("bias")
    if weight is None or weight.dtype != np.float32 or not (weight.ndim >= 3 if is_conv else weight.ndim == 2):
        return None
    if len(node.inputs) != 1 or len(node.outputs) != 1 or "epilogue" in node.params:
        return None
    if bias is not None and (bias.dtype != np.float32 or tuple(bias.shape) != weight.shape[:1]):
        return None  # the op reports a bad bias when it is built
    info = operands.get(node.outputs[0])
    if info is None or info.dtype != FLOAT32 or info.shape is None or not info.shape:
        return None
    if is_conv:
        return CONV_CHANNEL_AXIS if len(info.shape) == weight.ndim else None
    return len(info.shape) - 1


def _constant_value(operand: str, producer: dict[str, OpNode]) -> np.ndarray | None:
    """The value of ``operand`` when a Constant op makes it, through shape-only ops; else None."""
    chain: list[OpNode] = []
    node = producer.get(operand)
    while node is not None and node.type in SHAPE_ONLY_TYPES and len(node.inputs) == 1:
        chain.append(node)
        node = producer.get(node.inputs[0])
    value = _constant_data(node)
    if value is None:
        return None
    # The shape-only ops themselves, on the host: their own semantics, nothing restated here.
    host = get_backend("numpy")
    registry = op_registry()
    try:
        for step in reversed(chain):
            value = registry[step.type].obj(step, host).forward(value)
    except (KuiperError, ValueError):
        return None  # bad params or shapes (NumPy's broadcast raises ValueError): the op reports them when run
    return np.asarray(value)


def _constant_data(node: OpNode | None) -> np.ndarray | None:
    """The tensor a Constant op holds (``@data``, or its one attr, as the op takes it)."""
    if node is None or node.type != "Constant" or node.inputs:
        return None
    if "data" in node.attrs:
        return node.attrs["data"]
    return next(iter(node.attrs.values())) if len(node.attrs) == 1 else None


def _per_channel(value: np.ndarray | None, out_shape: tuple, channels: int, channel_axis: int) -> np.ndarray | None:
    """The (channels,) float32 vector ``value`` holds when, added to an output of ``out_shape``, it
    varies only along ``channel_axis`` and leaves the output's shape as it is; else None."""
    if value is None or value.dtype != np.float32 or value.ndim > len(out_shape):
        return None
    value = np.reshape(value, (1,) * (len(out_shape) - value.ndim) + tuple(value.shape))
    for axis, size in enumerate(value.shape):
        if size == 1:
            continue
        if axis == channel_axis:
            if size != channels:
                return None
            continue
        if out_shape[axis] != size:
            return None  # the sum would be larger than the conv's output (or its size is unknown)
        first = value[(slice(None),) * axis + (slice(0, 1),)]
        if not np.array_equal(value, np.broadcast_to(first, value.shape)):
            return None  # varies along this axis
        value = first
    return np.broadcast_to(np.reshape(value, -1), (channels,)).astype(np.float32)


def _with_bias(layer: OpNode, channels: np.ndarray, outputs: list[str]) -> OpNode:
    """The conv or Linear adding ``channels`` to its bias (float32, as the add did), producing ``outputs``."""
    bias = layer.attrs.get("bias")
    bias = channels if bias is None else (bias + channels).astype(np.float32)
    return OpNode(
        type=layer.type,
        name=layer.name,
        inputs=list(layer.inputs),
        outputs=list(outputs),
        params={**layer.params, "bias": True},
        attrs={**layer.attrs, "bias": bias},
        input_keys=list(layer.input_keys),
        source=layer.source,
    )


def _with_scale(layer: OpNode, channels: np.ndarray, outputs: list[str]) -> OpNode:
    """The conv or Linear with its weight and bias multiplied by ``channels`` (one per output channel,
    the weight's first axis), producing ``outputs``: rounded once, where the product rounded twice."""
    weight = layer.attrs["weight"]
    scale = channels.astype(np.float64)
    attrs = {**layer.attrs, "weight": (weight * scale.reshape((-1,) + (1,) * (weight.ndim - 1))).astype(np.float32)}
    if layer.attrs.get("bias") is not None:
        attrs["bias"] = (layer.attrs["bias"] * scale).astype(np.float32)
    return dataclasses.replace(layer, outputs=list(outputs), attrs=attrs)


def inline_single_values(order: list[OpNode], operands: dict[str, OperandInfo], target: Target) -> list[OpNode]:
    """Each elementwise op with single-value constant inputs as one computing them as IR constants."""
    maths = elementwise_maths(order, target)
    producer, _ = producers_and_readers(order)
    rewritten = []
    for node in order:
        math_of_node = maths.get(node.name)
        constants = {} if math_of_node is None else _single_values(node, math_of_node, producer, operands)
        rewritten.append(_with_constants(node, math_of_node, constants) if constants else node)
    return rewritten


def _single_values(node: OpNode, math_of_node: ElementwiseMath, producer: dict[str, OpNode],
                   operands: dict[str, OperandInfo]) -> dict[int, np.ndarray]:
    """{input position: the one-value array there} for the inputs that can become IR constants."""
    found = {}
    for position, operand in enumerate(node.inputs):
        data = _constant_data(producer.get(operand))
        if position in math_of_node.whole_inputs or data is None or data.size != 1:
            continue
        if data.dtype.name not in dtypes.TENSOR_DTYPES or dtypes.category(data.dtype.name) == dtypes.COMPLEX:
            continue
        if not math.isfinite(float(data.reshape(()))):
            continue  # inf and NaN stay inputs: not every code generator spells them as constants
        found[position] = data
    others = [operand for position, operand in enumerate(node.inputs) if position not in found]
    if not others:
        return {}  # all constants: the op keeps its inputs (its result's shape is theirs)
    # A constant of rank r must not widen the result: some other input must have rank >= r.
    ranks = [len(info.shape) for info in map(operands.get, others) if info is not None and info.shape is not None]
    widest = max(ranks, default=0)
    return {position: data for position, data in found.items() if data.ndim <= widest}


def _with_constants(node: OpNode, math_of_node: ElementwiseMath, constants: dict[int, np.ndarray]) -> OpNode:
    """An elementwise op computing ``node``'s math with ``constants`` as IR constants, on its other inputs."""
    values = {position: make.const(data.reshape(()).item(), data.dtype.name) for position, data in constants.items()}
    remaining = [position for position in range(len(node.inputs)) if position not in values]
    inner = math_of_node.build

    def build(*inputs):
        given = dict(zip(remaining, inputs))
        return inner(*(values[p] if p in values else given[p] for p in range(len(node.inputs))))

    whole = frozenset(remaining.index(position) for position in math_of_node.whole_inputs)
    return OpNode(
        type=FUSED_TYPE,
        name=node.name,
        inputs=[node.inputs[position] for position in remaining],
        outputs=list(node.outputs),
        params={"math": ElementwiseMath(build, len(remaining), whole), "members": [node.name]},
        source=node.source,
    )


def _without_unread_ops(order: list[OpNode], model_outputs: list[str]) -> list[OpNode]:
    """Drop the ops none of whose outputs is read or returned (the folded constants' producers)."""
    needed = set(model_outputs)
    kept: list[OpNode] = []
    for node in reversed(order):
        if any(operand in needed for operand in node.outputs):
            kept.append(node)
            needed.update(node.inputs)
    return kept[::-1]
