"""A bias vector added after a convolution or a matrix product becomes the layer's own bias input.

JAX passes every weight as an argument, and XLA writes a layer's bias as its own add of a
broadcast: ``add(transpose(conv(x, w)), broadcast(b))`` (the conv computing NCHW, the transpose
giving the program's NHWC) and ``add(reshape(dot(x, w)), broadcast(b))``.  That add read a
broadcast view (and for the conv a transposed one: 1.3 ns an element, 0.26 ms of a Flax CNN's 1.5
on an 8 x 28 x 28 x 32 activation), and it kept the ReLU after it in a fused step of its own.
Here it becomes the layer's input:

* ``conv(x, w)`` + a per-channel vector is ``conv(x, w, b)``, which adds b to its own NCHW output
  in one contiguous pass; the transpose then gives the add's result.  A transposed conv likewise
  (Flax's ConvTranspose, which the HLO frontend translates into one).
* ``dot(x, w)`` (two 2-D operands) + a vector along its columns is ``AddMatrixProduct(b, x, w)``
  (torch.addmm's op), which adds b into the product's fresh result; a reshape that splits the
  rows and the columns apart (Flax's DenseGeneral: (64, 256) as (1, 64, 4, 64)) then gives the
  add's result, and a bias laid over the split columns ((4, 64)) is read as the (256,) vector it is.

Both are the same float32 sums as the add.  Only an ``add`` of float32 values whose other operand
is a Broadcast of the bias (or of the bias reshaped with dims of 1 around it: JAX's (1, C) row)
is rewritten; the layer must take no bias yet and read its inputs by position, and its result
(and the transpose's or reshape's) have no other reader and not be a model output.  Constant
weights and biases are constant_fold.py's.  Reads only the op set (kuiper.ops.conv's ConvNd,
kuiper.ops.conv_transposed's ConvTransposeNd, MatMul, AddMatrixProduct, Transpose, Reshape, Broadcast
and elementwise math), never a frontend.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from ..model_ir import OperandInfo, OpNode
from ..ops.conv import ConvNd
from ..ops.conv_transposed import ConvTransposeNd
from ..plugins import op_registry
from .constant_fold import is_float32_binary
from .fusion import elementwise_maths, producers_and_readers
from .target import Target

TRANSPOSE, BROADCAST, RESHAPE = "Transpose", "Broadcast", "Reshape"
MATMUL, ADD_MATMUL = "MatMul", "AddMatrixProduct"
CHANNEL_AXIS = 1  # a conv's output is (N, C, *spatial)


@dataclass
class Rewrite:
    """What one add's rewrite does: ``at[name]`` takes the place of the node of that name (in order), the
    ``dropped`` nodes leave (a node in both takes ``at``'s place)."""

    at: dict[str, list[OpNode]] = field(default_factory=dict)
    dropped: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class Graph:
    """What a rule reads of the op order."""

    producer: dict[str, OpNode]
    readers: dict[str, int]
    kept: set[str]
    operands: dict[str, OperandInfo]

    def private(self, operand: str) -> bool:
        """Whether one input reads ``operand`` and the caller does not get it."""
        return operand not in self.kept and self.readers[operand] == 1

    def shape(self, operand: str) -> tuple | None:
        info = self.operands.get(operand)
        if info is None or info.shape is None or not all(isinstance(d, int) for d in info.shape):
            return None
        return tuple(info.shape)


def fold_bias_inputs(order: list[OpNode], operands: dict[str, OperandInfo], model_outputs: list[str],
                     target: Target) -> list[OpNode]:
    """The op order with each conv + channel vector a conv with a bias input, each 2-D product + column
    vector an AddMatrixProduct."""
    for rule in (_conv_bias, _product_bias):
        order = _rewritten(order, operands, model_outputs, target, rule)
    return order


def _rewritten(order, operands, model_outputs, target: Target, rule) -> list[OpNode]:
    maths = elementwise_maths(order, target)
    producer, readers = producers_and_readers(order)
    graph = Graph(producer, readers, set(model_outputs), operands)
    taken: set[str] = set()  # nodes some rewrite changes or drops
    at: dict[str, list[OpNode]] = {}
    dropped: set[str] = set()
    for node in order:
        math_of_node = maths.get(node.name)
        if math_of_node is None or len(node.inputs) != 2 or len(node.outputs) != 1 \
                or not is_float32_binary(math_of_node, "add"):
            continue
        for position, operand in enumerate(node.inputs):
            rewrite = rule(node, operand, node.inputs[1 - position], graph)
            if rewrite is None or (set(rewrite.at) | rewrite.dropped) & taken:
                continue
            taken |= set(rewrite.at) | rewrite.dropped
            at.update(rewrite.at)
            dropped |= rewrite.dropped
            break
    result: list[OpNode] = []
    for node in order:
        if node.name in at:
            result.extend(at[node.name])
        elif node.name not in dropped:
            result.append(node)
    return result


def _conv_bias(add: OpNode, operand: str, other: str, graph: Graph) -> Rewrite | None:
    """``add(conv(x, w) [-> transpose], broadcast(b))`` as ``conv(x, w, b) [-> transpose]``."""
    if not graph.private(operand):
        return None
    node, transpose, channel_at = graph.producer.get(operand), None, CHANNEL_AXIS
    if node is not None and node.type == TRANSPOSE and len(node.inputs) == 1:
        transpose, dims = node, list(node.params.get("dims", ()))
        if not graph.private(node.inputs[0]) or CHANNEL_AXIS not in dims:
            return None
        channel_at = dims.index(CHANNEL_AXIS)
        node = graph.producer.get(node.inputs[0])
    if not _bias_free_conv(node, graph):
        return None
    channels = graph.shape(node.outputs[0])[CHANNEL_AXIS]
    vector = _bias_vector(other, graph.shape(operand), [channel_at], channels, graph)
    vector_shape = None if vector is None else graph.shape(vector)
    if vector_shape is None or tuple(extent for extent in vector_shape if extent != 1) != (channels,):
        return None  # a conv's bias input is one value per channel
    rewrite = _without_bias_layout(add, other, vector, graph)
    # Placed where the add was: the bias (and the layout ops JAX gives it: a (1, C, 1, 1) parameter
    # broadcast and reshaped) may come after the conv in the order; nothing else reads the conv.
    placed = []
    if vector_shape != (channels,):  # a bias with dims of 1 around it: read as the vector it is
        placed.append(_flat_bias(add, vector, channels, graph))
        vector = placed[-1].outputs[0]
    placed.append(dataclasses.replace(node, inputs=[*node.inputs, vector], input_keys=[None, None, None],
                                      outputs=node.outputs if transpose is not None else list(add.outputs)))
    rewrite.dropped.add(node.name)
    if transpose is not None:
        placed.append(dataclasses.replace(transpose, outputs=list(add.outputs)))
        rewrite.dropped.add(transpose.name)
    rewrite.at[add.name] = placed
    return rewrite


def _flat_bias(add: OpNode, vector: str, size: int, graph: Graph) -> OpNode:
    """A Reshape of ``vector`` (its ``size`` values with dims of 1 around them) to (size,), named after ``add``."""
    flat = f"{add.name}/bias_vector"
    while flat in graph.producer or flat in graph.readers:
        flat += "'"
    return OpNode(type=RESHAPE, name=flat, inputs=[vector], outputs=[flat], params={"shape": [size]},
                  source=add.source)


def _product_bias(add: OpNode, operand: str, other: str, graph: Graph) -> Rewrite | None:
    """``add(dot(x, w) [-> reshape], broadcast(b))`` as ``AddMatrixProduct(b, x, w) [-> reshape]``."""
    if not graph.private(operand):
        return None
    node, reshape = graph.producer.get(operand), None
    if node is not None and node.type == RESHAPE and len(node.inputs) == 1:
        reshape, node = node, graph.producer.get(node.inputs[0])
        if not graph.private(reshape.inputs[0]):
            return None
    if node is None or node.type != MATMUL or len(node.inputs) != 2 or len(node.outputs) != 1 or any(node.input_keys):
        return None
    product, result = graph.shape(node.outputs[0]), graph.shape(operand)
    shapes = [graph.shape(value) for value in node.inputs]
    if product is None or result is None or len(product) != 2 or any(s is None or len(s) != 2 for s in shapes) \
            or graph.operands[node.outputs[0]].dtype != "float32":
        return None
    rows, columns = product
    split = next((j for j in range(len(result) + 1)
                  if math.prod(result[:j]) == rows and math.prod(result[j:]) == columns), None)
    if split is None:
        return None  # the reshape mixes rows and columns
    vector = _bias_vector(other, result, list(range(split, len(result))), columns, graph)
    if vector is None:
        return None
    rewrite = _without_bias_layout(add, other, vector, graph)
    placed: list[OpNode] = []
    if graph.shape(vector) != (columns,):  # a bias laid over the split columns: read as the vector it is
        placed.append(_flat_bias(add, vector, columns, graph))
        vector = placed[-1].outputs[0]
    placed.append(OpNode(type=ADD_MATMUL, name=node.name, inputs=[vector, *node.inputs], outputs=list(node.outputs),
                         params={}, input_keys=[None, None, None], source=node.source))
    if reshape is not None:
        placed.append(dataclasses.replace(reshape, outputs=list(add.outputs)))
        rewrite.dropped.add(reshape.name)
    else:
        placed[-1] = dataclasses.replace(placed[-1], outputs=list(add.outputs))
    rewrite.dropped.add(node.name)
    rewrite.at[add.name] = placed  # where the bias exists (its layout ops may come after the product)
    return rewrite


def _bias_vector(spread: str, shape: tuple | None, axes: list[int], size: int, graph: Graph) -> str | None:
    """The float32 operand that Broadcast ``spread`` lays over ``axes`` of a result of ``shape``, holding
    ``size`` values, one per position of those axes in row-major order and the same along the others: the
    broadcast's own input, or the vector a Reshape (to dims of 1 around it) made it from.  None where
    ``spread`` is anything else."""
    broadcast = graph.producer.get(spread)
    if shape is None or broadcast is None or broadcast.type != BROADCAST or len(broadcast.inputs) != 1 \
            or graph.shape(spread) != shape or size == 1:
        return None
    source, dims = broadcast.inputs[0], list(broadcast.params.get("dims", ()))
    source_shape, info = graph.shape(source), graph.operands.get(source)
    if source_shape is None or info.dtype != "float32" or len(dims) != len(source_shape) or dims != sorted(dims):
        return None  # (dims out of order would lay the values out in another order)
    laid = [1] * len(shape)  # the source's dims where the broadcast puts them
    for axis, extent in zip(dims, source_shape):
        laid[axis] = extent
    if any(laid[axis] != (shape[axis] if axis in axes else 1) for axis in range(len(shape))):
        return None  # varies along another axis, or repeats along one of ``axes``
    inner = tuple(extent for extent in source_shape if extent != 1)
    if inner == tuple(shape[axis] for axis in axes if shape[axis] != 1) and len(source_shape) == len(inner):
        return source  # the bias itself, laid out as the axes are
    reshape = graph.producer.get(source)
    if reshape is not None and reshape.type == RESHAPE and len(reshape.inputs) == 1:
        original = graph.shape(reshape.inputs[0])
        if original is not None and tuple(d for d in original if d != 1) == inner:
            return reshape.inputs[0]
    return source


def _without_bias_layout(add: OpNode, spread: str, vector: str, graph: Graph) -> Rewrite:
    """The add dropped, and the broadcast (and the reshape before it, when the layer now reads the vector
    that reshape read) where nothing else reads them."""
    rewrite = Rewrite(dropped={add.name})
    broadcast = graph.producer[spread]
    if graph.private(spread):
        rewrite.dropped.add(broadcast.name)
        source = broadcast.inputs[0]
        if source != vector and graph.private(source):
            rewrite.dropped.add(graph.producer[source].name)
    return rewrite


def _bias_free_conv(node: OpNode | None, graph: Graph) -> bool:
    """Whether ``node`` is a convolution or a transposed one of two positional inputs, x and a weight input,
    with no bias and a float32 output of declared shape.  Both add a bias input to their float32 output
    as the add did (kuiper/ops/conv.py, conv_transposed.py)."""
    if node is None or len(node.inputs) != 2 or len(node.outputs) != 1 or any(node.input_keys):
        return False
    registered = op_registry().get(node.type)
    if registered is None or not issubclass(registered.obj, (ConvNd, ConvTransposeNd)):
        return False
    if node.attrs or node.params.get("bias") not in (None, False) or "epilogue" in node.params:
        return False
    shape = graph.shape(node.outputs[0])
    return graph.operands[node.outputs[0]].dtype == "float32" and shape is not None and len(shape) > CHANNEL_AXIS
