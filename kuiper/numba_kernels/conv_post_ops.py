"""A conv epilogue as oneDNN post-ops, where its math is one oneDNN knows.

The fusion pass gives a conv the elementwise math that read its output (kuiper/ops/epilogue.py).
oneDNN can apply some of it while the output is in cache: an element-wise function, and a
sum with another tensor of the output's shape.  This module reads the epilogue's IR
(float32 inputs, simplified) and returns the post-op steps that compute the same thing, or
None when it is something else (then the compiled epilogue runs after the conv).

Recognised, with c the conv's result and r the other input:
``f(c)`` and ``g(f(c) + r)`` (in either order of the sum), where f and g are each the identity
or one of the activations below, built here from the same composites the ops use, so a match
is structural equality of IR and never a guess.  ``relu(relu(c) + r)`` (a TCN block's second
conv, its residual and the block's ReLU) is the ReLU, the sum, and the ReLU again.  For a Linear's
gated epilogue (the math of its output's two halves), ``gate_for`` finds ``f(gate) * value``.
"""

from __future__ import annotations

import dataclasses
import functools

from ..ir import composites, make
from ..ir.nodes import Assign, Binary, Const, Node, Var
from ..ops.elementwise import ElementwiseMath, function_for

FLOAT32 = "float32"
SUM = ("sum",)

# Activations over one float32 input, as composites builds them (and as HLO from JAX spells SiLU),
# and the oneDNN post-op (algorithm, alpha, beta) that computes each.
_ACTIVATIONS = (
    (composites.relu, ("eltwise_relu", 0.0, 0.0)),
    (composites.silu, ("eltwise_swish", 1.0, 0.0)),  # x * sigmoid(alpha * x)
    (lambda x: make.arith("mul", x, composites.sigmoid(x)), ("eltwise_swish", 1.0, 0.0)),
    (composites.sigmoid, ("eltwise_logistic", 0.0, 0.0)),
    (composites.hardswish, ("eltwise_hardswish", 1.0 / 6.0, 0.5)),  # x * clip(alpha * x + beta, 0, 1)
    (composites.gelu, ("eltwise_gelu_erf", 0.0, 0.0)),
)


@functools.cache
def _activation_table() -> tuple:
    """((IR of the activation over x0, post-op step), ...), built once."""
    return tuple((_value(function_for(ElementwiseMath(build, 1), (FLOAT32,))), step) for build, step in _ACTIVATIONS)


def _value(function):
    """The expression a one-result elementwise Function assigns."""
    statements = function.body.stmts
    return statements[0].value if len(statements) == 1 and isinstance(statements[0], Assign) else None


def post_ops_for(epilogue: ElementwiseMath | None, operand: int) -> tuple | None:
    """The post-op steps computing ``epilogue`` with the conv's result as input ``operand``; () for none."""
    if epilogue is None:
        return ()
    if epilogue.arity > 2:
        return None
    function = function_for(epilogue, (FLOAT32,) * epilogue.arity)
    value = _value(function)
    if value is None:
        return None
    conv = function.params[operand]
    residual = function.params[1 - operand] if epilogue.arity == 2 else None
    return _match(value, conv, residual)


def gate_for(epilogue: ElementwiseMath, operand: int) -> tuple[int, tuple] | None:
    """For an epilogue of a Linear's two output halves (the first at input ``operand``): (which half is
    the gate, 0 or 1; the post-op steps of its activation) when the math is ``f(gate) * other``,
    f the identity or an activation above; else None."""
    function = function_for(epilogue, (FLOAT32, FLOAT32))
    value = _value(function)
    if not (isinstance(value, Binary) and value.op == "mul"):
        return None
    halves = (function.params[operand], function.params[1 - operand])
    for gate, other in ((value.lhs, value.rhs), (value.rhs, value.lhs)):
        if other not in halves:
            continue
        gate_half = 1 - halves.index(other)
        steps = _activation(gate, halves[gate_half])
        if steps is not None:
            return gate_half, steps
    return None


def _match(value, conv: Var, residual: Var | None) -> tuple | None:
    if residual is None:
        return _activation(value, conv)
    # g(f(c) + r) in either order of the sum: f's step, the sum, then g's (f or g may be the identity).
    for total in _sums_with(value, residual):
        inner = total.lhs if total.rhs == residual else total.rhs
        before, after = _activation(inner, conv), _activation(_replaced(value, total, _SUM_VALUE), _SUM_VALUE)
        if before is not None and after is not None:
            return before + (SUM,) + after
    return None


def _sums_with(value: Node, residual: Var) -> list[Binary]:
    """The ``add`` subtrees of ``value`` with ``residual`` as one operand, outermost first."""
    found = []
    if isinstance(value, Binary) and value.op == "add" and residual in (value.lhs, value.rhs):
        found.append(value)
    for child in value.children():
        found += _sums_with(child, residual)
    return found


_X0 = Var("x0", FLOAT32)
_SUM_VALUE = Var("sum of conv and residual", FLOAT32)


def _activation(value, x: Var) -> tuple | None:
    """The steps computing ``value`` from x alone: () for x itself, one eltwise step, or None."""
    if _variables(value) != {x}:
        return None  # reads something besides x (e.g. c outside the sum it was matched in)
    if value == x:
        return ()
    value = _replaced(value, x, _X0)
    for candidate, step in _activation_table():
        if value == candidate:
            return (step,)
    bounds = _clip_bounds(value)
    return None if bounds is None else (("eltwise_clip", *bounds),)


def _replaced(value: Node, pattern: Node, replacement: Node) -> Node:
    """``value`` with every occurrence of the subtree ``pattern`` replaced by ``replacement``."""
    if value == pattern:
        return replacement
    changes = {}
    for field in dataclasses.fields(value):
        old = getattr(value, field.name)
        if isinstance(old, Node):
            new = _replaced(old, pattern, replacement)
        elif isinstance(old, tuple) and any(isinstance(item, Node) for item in old):
            new = tuple(_replaced(item, pattern, replacement) if isinstance(item, Node) else item for item in old)
        else:
            continue
        if new != old:
            changes[field.name] = new
    return dataclasses.replace(value, **changes) if changes else value


def _variables(value: Node) -> set[Var]:
    if isinstance(value, Var):
        return {value}
    found: set[Var] = set()
    for child in value.children():
        found |= _variables(child)
    return found


def _clip_bounds(value) -> tuple[float, float] | None:
    """(low, high) when value is min(max(x0, low), high) with constant bounds (ReLU6, hardtanh)."""
    if not (isinstance(value, Binary) and value.op == "min" and isinstance(value.rhs, Const)):
        return None
    inner = value.lhs
    if not (isinstance(inner, Binary) and inner.op == "max" and isinstance(inner.rhs, Const)):
        return None
    if inner.lhs != _X0:
        return None
    return float(inner.rhs.value), float(value.rhs.value)


# Post-op functions whose result is never larger in magnitude than their input, whatever their alpha and beta:
# each is x times a factor in [0, 1] (x * sigmoid(alpha * x), x * clip(alpha * x + beta, 0, 1), x * Phi(x)).
_SHRINKING = frozenset({"eltwise_swish", "eltwise_hardswish", "eltwise_gelu_erf"})


def bound_after(steps, bound: float, residual_bound: float, unit: float = 1.0) -> float | None:
    """A bound on the output of the post-op ``steps`` (as post_ops_for gives them), given ``bound`` on the
    convolution's finite result and ``residual_bound`` on the residual, both in one measure: the
    magnitude of each element (``unit`` 1) or the 2-norm of n elements (``unit`` sqrt(n)).  Each
    step here maps every element to one no larger in magnitude, or into constant limits (so within
    the limit times ``unit``), or adds the residual (the triangle inequality holds for both
    measures); None for a step not known here."""
    for step in steps:
        name = step[0]
        if name == "sum":
            bound += residual_bound
        elif name in _SHRINKING or (name == "eltwise_relu" and abs(step[1]) <= 1.0):  # alpha: the negative slope
            continue
        elif name == "eltwise_logistic":
            bound = unit
        elif name == "eltwise_clip":
            low, high = step[1], step[2]
            widest = max(abs(low), abs(high)) * unit
            bound = min(bound, widest) if low <= 0.0 <= high else widest
        else:
            return None
    return bound
