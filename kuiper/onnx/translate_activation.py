"""ONNX activations and softmax -> the canonical Softmax op and chains of the canonical Elementwise op.

Each activation is its formula in elementwise functions (``Selu``: gamma * (x > 0 ? x : alpha * (exp(x) - 1))),
so the graph fuses it with its neighbours like any elementwise chain.
"""

from __future__ import annotations

import math

from ..model_ir import OpNode
from .emit import Emit
from .site import Site


def translate_softmax(site: Site) -> list[OpNode]:
    """Softmax / LogSoftmax along ``axis`` (opset 13); before 13 over the dims from ``axis`` on, flattened."""
    log = site.op_type == "LogSoftmax"
    emit = Emit(site)
    if site.opset >= 13:
        emit.op("Softmax", [site.input(0)], {"dim": site.int_("axis", -1), "log": log}, dtype=site.dtype(0),
                out=site.outputs[0])
        return emit.ops
    shape = site.static_shape(0)
    axis = site.int_("axis", 1) % max(len(shape), 1)
    outer = math.prod(shape[:axis])
    flat = emit.op("Reshape", [site.input(0)], {"shape": [outer, -1]}, dtype=site.dtype(0))
    soft = emit.op("Softmax", [flat], {"dim": 1, "log": log}, dtype=site.dtype(0))
    emit.op("Reshape", [soft], {"shape": list(shape)}, dtype=site.dtype(0), out=site.outputs[0])
    return emit.ops


def _positive_or(emit: Emit, x: str, negative_value: str, out: str) -> str:
    """x where x > 0, else ``negative_value``."""
    zero = emit.const(0, emit.dtype(x))
    return emit.fn("select", [emit.compare("gt", x, zero), x, negative_value], out=out)


def _prelu_slope(site: Site, emit: Emit) -> str:
    """PRelu's slope as it multiplies x.  Before opset 7 a slope of one value per channel is laid along
    x's dim 1 (PyTorch's PReLU(num_parameters=C) exported at opset 6 gives a (C,) slope for an
    (N, C, ...) input); from opset 7 on it broadcasts as numbers do."""
    slope = site.input(1)
    slope_shape, x_shape = site.shape(1), site.shape(0)
    if (site.opset < 7 and slope_shape is not None and x_shape is not None and len(slope_shape) == 1
            and len(x_shape) > 2 and slope_shape[0] not in (1, None) and slope_shape[0] == x_shape[1]):
        return emit.op("Reshape", [slope], {"shape": [slope_shape[0]] + [1] * (len(x_shape) - 2)},
                       dtype=site.dtype(1))
    return slope


def translate_activation(site: Site) -> list[OpNode]:
    emit = Emit(site)
    x, out, dtype = site.input(0), site.outputs[0], site.dtype(0)

    def const(value):
        return emit.const(value, dtype)

    def mul(a, b, out=None):
        return emit.fn("multiply", [a, b], out=out)

    op = site.op_type
    if op == "Relu":
        emit.fn("maximum", [x, const(0)], out=out)
    elif op == "LeakyRelu":
        _positive_or(emit, x, mul(x, const(site.float_("alpha", 0.01))), out)
    elif op == "PRelu":
        _positive_or(emit, x, mul(x, _prelu_slope(site, emit)), out)
    elif op in ("Elu", "Celu"):
        alpha = const(site.float_("alpha", 1.0))
        scaled = x if op == "Elu" else emit.fn("divide", [x, alpha])
        _positive_or(emit, x, mul(alpha, emit.fn("expm1", [scaled])), out)
    elif op == "Selu":
        alpha, gamma = site.float_("alpha", 1.67326319217681884765625), site.float_("gamma", 1.05070102214813232421875)
        inner = _positive_or(emit, x, mul(const(alpha), emit.fn("expm1", [x])), None)
        mul(const(gamma), inner, out=out)
    elif op in ("HardSigmoid", "HardSwish"):
        alpha = site.float_("alpha", 0.2) if op == "HardSigmoid" else 1 / 6
        beta = site.float_("beta", 0.5) if op == "HardSigmoid" else 0.5
        line = emit.fn("add", [mul(x, const(alpha)), const(beta)])
        clamped = emit.fn("clamp", [const(0), line, const(1)], out=out if op == "HardSigmoid" else None)
        if op == "HardSwish":
            mul(x, clamped, out=out)
    elif op == "Softplus":
        # log(1 + exp(x)) without overflow: max(x, 0) + log1p(exp(-|x|))
        tail = emit.fn("log1p", [emit.fn("exp", [emit.fn("negate", [emit.fn("abs", [x])])])])
        emit.fn("add", [emit.fn("maximum", [x, const(0)]), tail], out=out)
    elif op == "Softsign":
        emit.fn("divide", [x, emit.fn("add", [const(1), emit.fn("abs", [x])])], out=out)
    elif op == "ThresholdedRelu":
        emit.fn("select", [emit.compare("gt", x, const(site.float_("alpha", 1.0))), x, const(0)], out=out)
    elif op == "Swish":
        mul(x, emit.fn("logistic", [mul(x, const(site.float_("alpha", 1.0)))]), out=out)
    elif op == "Mish":
        tail = emit.fn("log1p", [emit.fn("exp", [emit.fn("negate", [emit.fn("abs", [x])])])])
        softplus = emit.fn("add", [emit.fn("maximum", [x, const(0)]), tail])
        mul(x, emit.fn("tanh", [softplus]), out=out)
    elif op == "Gelu":
        if site.string("approximate", "none") == "tanh":
            inner = mul(const(math.sqrt(2 / math.pi)),
                        emit.fn("add", [x, mul(const(0.044715), mul(x, mul(x, x)))]))
            gate = emit.fn("add", [const(1), emit.fn("tanh", [inner])])
        else:
            gate = emit.fn("add", [const(1), emit.fn("erf", [mul(x, const(1 / math.sqrt(2)))])])
        mul(mul(x, const(0.5)), gate, out=out)
    elif op == "Shrink":
        bias, lambd = const(site.float_("bias", 0.0)), const(site.float_("lambd", 0.5))
        low = emit.fn("select", [emit.compare("lt", x, emit.fn("negate", [lambd])), emit.fn("add", [x, bias]),
                                 const(0)])
        emit.fn("select", [emit.compare("gt", x, lambd), emit.fn("subtract", [x, bias]), low], out=out)
    return emit.ops


def translate_clip(site: Site) -> list[OpNode]:
    emit = Emit(site)
    x, dtype = site.input(0), site.dtype(0)
    if site.opset < 11:
        low = emit.const(site.float_("min", -math.inf), dtype)
        high = emit.const(site.float_("max", math.inf), dtype)
    else:
        low = site.input(1) if site.has_input(1) else None
        high = site.input(2) if site.has_input(2) else None
    value = x
    if low is not None:
        value = emit.fn("maximum", [value, low], out=None if high is not None else site.outputs[0])
    if high is not None:
        value = emit.fn("minimum", [value, high], out=site.outputs[0])
    if low is None and high is None:
        emit.op("Identity", [x], dtype=dtype, out=site.outputs[0])
    return emit.ops


ACTIVATIONS = ("Relu", "LeakyRelu", "PRelu", "Elu", "Celu", "Selu", "HardSigmoid", "HardSwish", "Softplus",
               "Softsign", "ThresholdedRelu", "Swish", "Mish", "Gelu", "Shrink")
TRANSLATORS = {
    **{op_type: translate_activation for op_type in ACTIVATIONS},
    "Softmax": translate_softmax, "LogSoftmax": translate_softmax, "Clip": translate_clip,
}
