"""Softmax, log-softmax and layer norm written out step by step become one ``Softmax`` or ``LayerNorm`` op.

JAX writes ``jax.nn.softmax`` over the last axis as a max reduction, a maximum with -inf, a
subtraction, exp, a sum reduction and a division, and Flax's ``nn.LayerNorm`` as about fifteen
steps (two sum reductions, divisions by the row length, a square, ``max(E[x^2] - E[x]^2, 0)``,
rsqrt, the scale and the bias).  Run as written, each step is a pass over the tensor and a step of
the plan: a (1, 196, 192) layer norm cost 180-200 us and a (1, 3, 196, 196) softmax 360 us, where
one row loop takes a fraction of that.  ONNX exports before opset 17 spell layer norm out too
(ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add), and ONNX Runtime makes the same
rewrite on them (its LayerNormFusion and SoftmaxFusion transformers).

The pass reads only the canonical op set (Reduce, Reduction, Elementwise, Broadcast, Reshape,
Constant) and runs before constant folding, which would hide the constants inside fused
elementwise math.  A chain is rewritten only when it says exactly what the op computes:

- every step float32, the reductions over the last axis only, from a scalar constant init
  (0 for sums, -inf for the max), not sequential;
- per-row values (the max, the sums, the statistics) broadcast back along the last axis only, by
  Broadcast ops or, kept as (rows, 1), by the elementwise op reading them;
- the mean a sum divided by a constant equal to the row length, or a mean Reduction; the layer
  norm's variance either ``max(mean(x*x) - mean*mean, 0)`` (Flax's default ``use_fast_variance``: the op's
  ``fast_variance``, computed with float32 rounding at the steps the chain rounds, as the chain
  would on inputs with a large mean) or ``mean((x - mean)^2)`` (the square a product or a power
  of 2); epsilon a non-negative constant added to the variance before rsqrt (multiplied) or sqrt
  (divided by); scale and bias (each optional) vectors of the row length;
- no value inside the chain read by anything outside it, nor a model output.

Any chain that differs in a detail is left as it is.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict

import numpy as np

from ..model_ir import OperandInfo, OpNode

FLOAT32 = "float32"
ROOT_FUNCTIONS = ("divide", "subtract", "add", "multiply")  # the last step of each chain


class _NoMatch(Exception):
    """The chain differs from the pattern somewhere: it stays as written."""


def fuse_row_normalizations(order: list[OpNode], operands: dict[str, OperandInfo],
                            model_outputs: list[str]) -> list[OpNode]:
    """The op order with each decomposed softmax, log-softmax and layer norm made one op."""
    graph = _Graph(order, operands, model_outputs)
    replaced: dict[int, list[OpNode]] = {}  # position of a chain's last op -> the ops standing for the chain
    removed: set[int] = set()  # ids of the chains' other ops
    # Last op first: a layer norm's scaled product is itself a layer norm without bias, and the
    # longer chain (with the bias) must win.
    for position in range(len(order) - 1, -1, -1):
        node = order[position]
        if node.type != "Elementwise" or node.params.get("function") not in ROOT_FUNCTIONS or id(node) in removed:
            continue
        for match in (_softmax, _layer_norm):
            try:
                chain = _Chain(graph, node)
                made = match(chain, node)
                chain.check_closed()
            except _NoMatch:
                continue
            if any(id(member) in removed for member in chain.members):
                continue  # an op already in a later chain
            removed.update(id(member) for member in chain.members if member is not node)
            replaced[position] = made
            break
    if not replaced:
        return order
    result: list[OpNode] = []
    for position, node in enumerate(order):
        if position in replaced:
            result.extend(replaced[position])
        elif id(node) not in removed:
            result.append(node)
    return result


class _Graph:
    """Who makes and who reads each operand, and the declared shapes."""

    def __init__(self, order: list[OpNode], operands: dict[str, OperandInfo], model_outputs: list[str]):
        self.operands = operands
        self.outputs = set(model_outputs)
        self.producer: dict[str, OpNode] = {}
        self.readers: dict[str, list[OpNode]] = defaultdict(list)
        for node in order:
            for operand in node.outputs:
                self.producer[operand] = node
            for operand in node.inputs:
                self.readers[operand].append(node)

    def shape(self, operand: str) -> tuple[int, ...]:
        info = self.operands.get(operand)
        if info is None or info.shape is None or any(not isinstance(d, int) for d in info.shape):
            raise _NoMatch
        return tuple(info.shape)

    def dtype(self, operand: str) -> str | None:
        info = self.operands.get(operand)
        return info.dtype if info else None


class _Chain:
    """The ops of one candidate chain, collected while it is read from its last op back."""

    def __init__(self, graph: _Graph, root: OpNode):
        self.graph = graph
        self.root = root
        self.members: list[OpNode] = [root]
        self.shape = graph.shape(root.outputs[0]) if len(root.outputs) == 1 else ()
        if len(self.shape) < 1 or self.shape[-1] < 1:
            raise _NoMatch
        self.rows = self.shape[:-1]

    def take(self, operand: str, op_type: str, function: str | None = None) -> OpNode:
        """The op making ``operand``, which must be an ``op_type`` (an Elementwise of ``function``)
        with one output, float32 throughout; it joins the chain."""
        node = self.graph.producer.get(operand)
        if node is None or node.type != op_type or len(node.outputs) != 1:
            raise _NoMatch
        if op_type == "Elementwise":
            dtypes = node.params.get("operand_dtypes")
            if (node.params.get("function") != function or node.params.get("dtype") != FLOAT32
                    or not isinstance(dtypes, (list, tuple)) or any(d != FLOAT32 for d in dtypes)
                    or set(node.params) - {"function", "operand_dtypes", "dtype"}):
                raise _NoMatch
        if all(member is not node for member in self.members):
            self.members.append(node)
        return node

    def constant(self, operand: str) -> float:
        """The value of a float32 scalar Constant op (not a member: other ops may read it too)."""
        node = self.graph.producer.get(operand)
        data = node.attrs.get("data") if node is not None and node.type == "Constant" else None
        if data is None or data.dtype != np.float32 or data.shape != ():
            raise _NoMatch
        return float(data)

    def reduce(self, operand: str, reducer: str, init: float) -> str:
        """The operand a float32 Reduce over the last axis made ``operand`` from, with a scalar ``init``."""
        node = self.take(operand, "Reduce")
        if (len(node.inputs) != 2 or node.params.get("reducer") != reducer
                or list(node.params.get("axes", ())) != [len(self.shape) - 1] or node.params.get("sequential")):
            raise _NoMatch
        value = self.constant(node.inputs[1])
        if not (value == init and math.copysign(1.0, value) == math.copysign(1.0, init)):
            raise _NoMatch
        source = node.inputs[0]
        if self.graph.shape(source) != self.shape or self.graph.dtype(source) != FLOAT32:
            raise _NoMatch
        return source

    def per_row(self, operand: str) -> str:
        """``operand`` (one value per row, of shape rows or rows + (1,)) seen past the Reshapes that
        add or drop its trailing 1."""
        row_shapes = (self.rows, (*self.rows, 1))
        while True:
            if self.graph.shape(operand) not in row_shapes:
                raise _NoMatch
            node = self.graph.producer.get(operand)
            if node is None or node.type != "Reshape" or len(node.inputs) != 1 or len(node.outputs) != 1:
                return operand
            if self.graph.shape(node.inputs[0]) not in row_shapes:
                return operand
            self.take(operand, "Reshape")
            operand = node.inputs[0]

    def row_broadcast(self, operand: str) -> str:
        """The per-row value that ``operand`` (of the full shape) repeats along the last axis."""
        node = self.take(operand, "Broadcast")
        rank = len(self.shape)
        dims = list(node.params.get("dims", ()))
        if (len(node.inputs) != 1 or tuple(node.params.get("shape", ())) != self.shape
                or self.graph.shape(operand) != self.shape):
            raise _NoMatch
        source_shape = self.graph.shape(node.inputs[0])
        if not ((dims == list(range(rank - 1)) and source_shape == self.rows)
                or (dims == list(range(rank)) and source_shape == (*self.rows, 1))):
            raise _NoMatch
        return self.per_row(node.inputs[0])

    def vector_broadcast(self, operand: str) -> str:
        """The vector of the row length that ``operand`` (of the full shape) repeats over the rows: its
        source, found past a Reshape that made it (1, ..., n), when that source is 1-D."""
        node = self.take(operand, "Broadcast")
        rank = len(self.shape)
        dims = list(node.params.get("dims", ()))
        if len(node.inputs) != 1 or tuple(node.params.get("shape", ())) != self.shape:
            raise _NoMatch
        source = node.inputs[0]
        source_shape = self.graph.shape(source)
        width = self.shape[-1]
        if len(dims) != len(source_shape) or math.prod(source_shape) != width:
            raise _NoMatch
        if any(size != 1 and dim != rank - 1 for size, dim in zip(source_shape, dims)):
            raise _NoMatch  # a dim of the vector placed anywhere but the last axis
        if width > 1 and rank - 1 not in dims:
            raise _NoMatch
        if source_shape == (width,):
            return source
        made = self.graph.producer.get(source)
        if (made is not None and made.type == "Reshape" and len(made.inputs) == 1
                and self.graph.shape(made.inputs[0]) == (width,)):
            self.take(source, "Reshape")
            return made.inputs[0]
        raise _NoMatch

    def divided_by_width(self, operand: str) -> str:
        """The operand that ``operand`` is, divided by a constant equal to the row length."""
        node = self.take(operand, "Elementwise", "divide")
        if self.constant(node.inputs[1]) != float(self.shape[-1]):
            raise _NoMatch
        return node.inputs[0]

    def mean_of(self, operand: str) -> str:
        """The tensor whose mean over the last axis ``operand`` is: a sum divided by the row length
        (JAX), or a ``Reduction`` of kind mean (ONNX's ReduceMean)."""
        node = self.graph.producer.get(operand)
        if node is None or node.type != "Reduction":
            return self.reduce(self.divided_by_width(operand), "add", 0.0)
        self.take(operand, "Reduction")
        dims = node.params.get("dim")
        if (len(node.inputs) != 1 or node.params.get("reduction") != "mean"
                or set(node.params) - {"dim", "keepdim", "reduction"}
                or not isinstance(dims, (list, tuple)) or len(dims) != 1 or dims[0] not in (-1, len(self.shape) - 1)):
            raise _NoMatch
        source = node.inputs[0]
        if self.graph.shape(source) != self.shape or self.graph.dtype(source) != FLOAT32:
            raise _NoMatch
        return source

    def row_value(self, operand: str) -> str:
        """The per-row value an elementwise op reads as ``operand``: broadcast to the full shape by a
        Broadcast op, or of shape rows + (1,), which the op broadcasts itself."""
        if self.graph.shape(operand) == self.shape:
            return self.row_broadcast(operand)
        if self.graph.shape(operand) != (*self.rows, 1):
            raise _NoMatch
        return self.per_row(operand)

    def vector_value(self, operand: str) -> str:
        """The vector of the row length an elementwise op reads as ``operand``: broadcast by a Broadcast
        op, or 1-D, which the op broadcasts itself."""
        if self.graph.shape(operand) == (self.shape[-1],):
            return operand
        return self.vector_broadcast(operand)

    def check_closed(self) -> None:
        """No member's result is read outside the chain or returned by the model (the root's aside)."""
        members = {id(member) for member in self.members}
        for member in self.members:
            if member is self.root:
                continue
            for operand in member.outputs:
                if operand in self.graph.outputs:
                    raise _NoMatch
                if any(id(reader) not in members for reader in self.graph.readers[operand]):
                    raise _NoMatch


def _either(chain: _Chain, node: OpNode, match) -> tuple[str, str]:
    """(the input that ``match`` accepts, the other) of a two-input commutative op; what a failed
    ``match`` added to the chain leaves it again."""
    if len(node.inputs) != 2:
        raise _NoMatch
    first, second = node.inputs
    for mine, other in ((first, second), (second, first)):
        count = len(chain.members)
        try:
            match(mine)
        except _NoMatch:
            del chain.members[count:]
            continue
        return mine, other
    raise _NoMatch


# -- softmax and log-softmax ----------------------------------------------------------------------------


def _softmax(chain: _Chain, root: OpNode) -> list[OpNode]:
    """``exp(x - max) / sum(exp(x - max))`` (jax.nn.softmax) or ``(x - max) - log(sum(exp(x - max)))``
    (jax.nn.log_softmax), over the last axis, as one Softmax op."""
    if root.type != "Elementwise" or root.params.get("function") not in ("divide", "subtract"):
        raise _NoMatch
    log = root.params["function"] == "subtract"
    chain.take(root.outputs[0], "Elementwise", "subtract" if log else "divide")
    numerator, denominator = root.inputs
    if log:
        shifted = numerator
        total = chain.take(chain.row_broadcast(denominator), "Elementwise", "log").inputs[0]
        exps = chain.reduce(chain.per_row(total), "add", 0.0)
        if chain.take(exps, "Elementwise", "exp").inputs[0] != shifted:
            raise _NoMatch
    else:
        exps = numerator
        if chain.reduce(chain.row_broadcast(denominator), "add", 0.0) != exps:
            raise _NoMatch
        shifted = chain.take(exps, "Elementwise", "exp").inputs[0]
    x, peak = chain.take(shifted, "Elementwise", "subtract").inputs
    peak = chain.row_broadcast(peak)
    bounded = chain.graph.producer.get(peak)
    if bounded is not None and bounded.type == "Elementwise" and bounded.params.get("function") == "maximum":
        # max(max(x), -inf): JAX's initial value, which changes nothing
        chain.take(peak, "Elementwise", "maximum")
        peak, floor = _either(chain, bounded, lambda operand: chain.reduce(chain.per_row(operand), "max", -math.inf))
        if chain.constant(floor) != -math.inf:
            raise _NoMatch
    if chain.reduce(chain.per_row(peak), "max", -math.inf) != x:
        raise _NoMatch
    params = {"dim": -1, "log": True} if log else {"dim": -1}
    return [OpNode(type="Softmax", name=root.name, inputs=[x], outputs=list(root.outputs), params=params,
                   source=root.source)]


# -- layer norm ------------------------------------------------------------------------------------------


@dataclasses.dataclass
class _Statistics:
    x: str
    mean: str  # the operand holding each row's mean
    fast_variance: bool
    eps: float


def _layer_norm(chain: _Chain, root: OpNode) -> list[OpNode]:
    """``(x - mean) * (rsqrt(var + eps) [* scale]) [+ bias]`` (Flax's nn.LayerNorm) or
    ``(x - mean) / sqrt(var + eps) [* scale] [+ bias]`` (ONNX's spelling before LayerNormalization), over
    the last axis, as one LayerNorm op."""
    if root.type != "Elementwise" or root.params.get("function") not in ("add", "multiply", "divide"):
        raise _NoMatch
    node, bias, scale = root, None, None
    if node.params["function"] == "add":
        chain.take(node.outputs[0], "Elementwise", "add")
        inner, bias_operand = _either(chain, node, lambda operand: _product(chain, operand))
        bias = chain.vector_value(bias_operand)
        node = chain.graph.producer[inner]
    if node.params.get("function") == "multiply" and _is_made_by(chain, node.inputs, "divide"):
        # ONNX: ((x - mean) / sqrt(var + eps)) * scale
        chain.take(node.outputs[0], "Elementwise", "multiply")
        inner, scale_operand = _either(chain, node, lambda operand: chain.take(operand, "Elementwise", "divide"))
        scale = chain.vector_value(scale_operand)
        node = chain.graph.producer[inner]
    if node.params.get("function") == "divide":
        chain.take(node.outputs[0], "Elementwise", "divide")
        centered_operand, root_operand = node.inputs
        x, mean = _centered(chain, centered_operand)
        total = chain.take(chain.row_value(root_operand), "Elementwise", "sqrt").inputs[0]
    else:
        # Flax: (x - mean) * (rsqrt(var + eps) [* scale])
        chain.take(node.outputs[0], "Elementwise", "multiply")
        centered_operand, factor = _either(
            chain, node, lambda operand: chain.take(operand, "Elementwise", "subtract"))
        x, mean = _centered(chain, centered_operand)
        made = chain.graph.producer.get(factor)
        if made is not None and made.type == "Elementwise" and made.params.get("function") == "multiply":
            chain.take(factor, "Elementwise", "multiply")
            inverse_operand, scale_operand = _either(chain, made, lambda operand: chain.take(operand, "Broadcast")
                                                     and _is_row_broadcast(chain, operand))
            scale = chain.vector_broadcast(scale_operand)
            factor = inverse_operand
        total = chain.take(chain.row_broadcast(factor), "Elementwise", "rsqrt").inputs[0]
    statistics = _statistics(chain, total)
    if statistics.x != x or statistics.mean != mean:
        raise _NoMatch
    inputs, keys = [x], ["input"]
    for key, value in (("weight", scale), ("bias", bias)):
        if value is not None:
            if chain.graph.dtype(value) != FLOAT32:
                raise _NoMatch
            inputs.append(value)
            keys.append(key)
    params = {"normalized_shape": [chain.shape[-1]], "eps": statistics.eps}
    if statistics.fast_variance:
        params["fast_variance"] = True
    return [OpNode(type="LayerNorm", name=root.name, inputs=inputs, outputs=list(root.outputs), params=params,
                   input_keys=keys, source=root.source)]


def _product(chain: _Chain, operand: str) -> OpNode:
    """The multiply or divide making ``operand`` (the normalised value a bias is added to); not joined yet."""
    node = chain.graph.producer.get(operand)
    if node is None or node.type != "Elementwise" or node.params.get("function") not in ("multiply", "divide"):
        raise _NoMatch
    return node


def _is_made_by(chain: _Chain, operands: list[str], function: str) -> bool:
    """Whether an Elementwise ``function`` makes one of ``operands``."""
    for operand in operands:
        node = chain.graph.producer.get(operand)
        if node is not None and node.type == "Elementwise" and node.params.get("function") == function:
            return True
    return False


def _centered(chain: _Chain, operand: str) -> tuple[str, str]:
    """(x, the operand holding its rows' means) of ``operand`` = x - mean."""
    x, mean = chain.take(operand, "Elementwise", "subtract").inputs
    return x, chain.row_value(mean)


def _is_row_broadcast(chain: _Chain, operand: str) -> bool:
    """Whether ``operand`` is a per-row value broadcast along the last axis (checked without joining)."""
    probe = _Chain(chain.graph, chain.root)
    probe.row_broadcast(operand)
    return True


def _statistics(chain: _Chain, total: str) -> _Statistics:
    """Read ``var + eps`` back to x, its mean and how the variance is taken."""
    adder = chain.take(chain.per_row(total), "Elementwise", "add")
    variance, eps_operand = _either(chain, adder,
                                    lambda operand: chain.per_row(operand) and _not_constant(chain, operand))
    eps = chain.constant(eps_operand)
    if not (math.isfinite(eps) and eps >= 0):
        raise _NoMatch
    variance = chain.per_row(variance)
    made = chain.graph.producer.get(variance)
    if made is not None and made.type == "Elementwise" and made.params.get("function") == "maximum":
        # max(mean(x * x) - mean * mean, 0): the fast variance
        chain.take(variance, "Elementwise", "maximum")
        difference, zero = _either(chain, made, lambda operand: _not_constant(chain, operand))
        if chain.constant(zero) != 0.0:
            raise _NoMatch
        minuend, subtrahend = chain.take(chain.per_row(difference), "Elementwise", "subtract").inputs
        x, also_x = chain.take(chain.mean_of(chain.per_row(minuend)), "Elementwise", "multiply").inputs
        mean, also_mean = chain.take(chain.per_row(subtrahend), "Elementwise", "multiply").inputs
        mean = chain.per_row(mean)
        if also_x != x or chain.per_row(also_mean) != mean:
            raise _NoMatch
        fast = True
    else:
        # mean((x - mean)^2): the two-pass variance, the square a product or a power of 2
        deviation = _squared(chain, chain.mean_of(variance))
        x, mean = _centered(chain, deviation)
        fast = False
    if chain.mean_of(mean) != x:
        raise _NoMatch
    return _Statistics(x=x, mean=mean, fast_variance=fast, eps=eps)


def _squared(chain: _Chain, operand: str) -> str:
    """What ``operand`` is the square of: ``d * d`` or ``d ** 2``."""
    made = chain.graph.producer.get(operand)
    if made is not None and made.type == "Elementwise" and made.params.get("function") == "power":
        base, exponent = chain.take(operand, "Elementwise", "power").inputs
        if chain.constant(exponent) != 2.0:
            raise _NoMatch
        return base
    base, also_base = chain.take(operand, "Elementwise", "multiply").inputs
    if also_base != base:
        raise _NoMatch
    return base


def _not_constant(chain: _Chain, operand: str) -> bool:
    made = chain.graph.producer.get(operand)
    if made is not None and made.type == "Constant":
        raise _NoMatch
    return True
