"""ONNX normalizations -> canonical BatchNormInference, LayerNorm, RMSNorm, InstanceNorm, GroupNorm and
LocalResponseNorm. Their scale and bias travel as inputs bound to ``$weight`` / ``$bias``.
"""

from __future__ import annotations

from ..model_ir import OpNode
from .emit import Emit
from .site import Site


def _keyed(node: OpNode, keys: list) -> OpNode:
    node.input_keys = keys
    return node


def _affine(site: Site, first: int) -> tuple[list[str], list]:
    """The data input and the optional scale and bias from position ``first`` on, with their keys."""
    inputs, keys = [site.input(0)], ["input"]
    for position, key in ((first, "weight"), (first + 1, "bias")):
        if site.has_input(position):
            inputs.append(site.input(position))
            keys.append(key)
    return inputs, keys


def translate_batch_norm(site: Site) -> list[OpNode]:
    if site.int_("training_mode", 0):
        return _batch_norm_training(site)
    if len([name for name in site.outputs if name]) > 1:
        raise site.error("the running mean and variance outputs (training) are not supported")
    params = {"feature": 1, "epsilon": site.float_("epsilon", 1e-5)}
    return [site.op("BatchNormInference", [site.input(i) for i in range(5)], site.outputs[:1], params)]


def _batch_norm_training(site: Site) -> list[OpNode]:
    """training_mode=1 (opset 14 on): normalize with the batch's own mean and (biased) variance over every
    dim but the channels, and give the running statistics moved towards them:
    running = running * momentum + batch * (1 - momentum). Deterministic tensor math, as ONNX defines it."""
    rank = site.rank(0)
    dtype = site.dtype(0)
    axes = [d for d in range(rank) if d != 1]
    momentum = site.float_("momentum", 0.9)
    emit = Emit(site)
    x = site.input(0)
    kept = emit.op("Reduction", [x], {"dim": axes, "keepdim": True, "reduction": "mean"}, dtype=dtype)
    deviation = emit.fn("subtract", [x, kept])
    mean = emit.op("Reshape", [kept], {"shape": [-1]}, dtype=dtype)
    variance = emit.op("Reduction", [emit.fn("multiply", [deviation, deviation])],
                       {"dim": axes, "keepdim": False, "reduction": "mean"}, dtype=dtype)
    params = {"feature": 1, "epsilon": site.float_("epsilon", 1e-5)}
    emit.op("BatchNormInference", [x, site.input(1), site.input(2), mean, variance], params, dtype=dtype,
            out=site.outputs[0])
    for position, batch in ((1, mean), (2, variance)):
        if site.has_output(position):
            running = emit.convert(site.input(2 + position), dtype)
            emit.fn("add", [emit.fn("multiply", [running, emit.const(momentum, dtype)]),
                            emit.fn("multiply", [batch, emit.const(1.0 - momentum, dtype)])],
                    out=site.outputs[position])
    return emit.ops


def translate_layer_norm(site: Site) -> list[OpNode]:
    rank = site.rank(0)
    axis = site.int_("axis", -1) % rank
    shape = site.shape(0)
    if any(d is None for d in shape[axis:]):  # the dims normalized over must be known; those before may be free
        shape = site.static_shape(0)
    op_type = "LayerNorm" if site.op_type == "LayerNormalization" else "RMSNorm"
    inputs, keys = _affine(site, 1)
    epsilon = site.float_("epsilon", 1e-5)
    params = {"normalized_shape": list(shape[axis:]), "eps": epsilon}
    ops = [_keyed(site.op(op_type, inputs, site.outputs[:1], params), keys)]
    if op_type == "LayerNorm" and (site.has_output(1) or site.has_output(2)):
        ops += _statistics(site, list(range(axis, len(shape))), epsilon)
    return ops


def _statistics(site: Site, axes: list[int], epsilon: float) -> list[OpNode]:
    """LayerNormalization's optional outputs: the mean and 1 / sqrt(variance + epsilon), dims kept."""
    emit = Emit(site)
    x = site.input(0)
    reduce = {"dim": axes, "keepdim": True, "reduction": "mean"}
    mean = emit.op("Reduction", [x], reduce, dtype=site.dtype(0), out=site.outputs[1] if site.has_output(1) else None)
    if site.has_output(2):
        centered = emit.fn("subtract", [x, mean])
        variance = emit.op("Reduction", [emit.fn("multiply", [centered, centered])], reduce, dtype=site.dtype(0))
        shifted = emit.fn("add", [variance, emit.const(epsilon, site.dtype(0))])
        emit.fn("rsqrt", [shifted], out=site.outputs[2])
    return emit.ops


def translate_instance_norm(site: Site) -> list[OpNode]:
    inputs, keys = _affine(site, 1)
    params = {"eps": site.float_("epsilon", 1e-5)}
    return [_keyed(site.op("InstanceNorm", inputs, site.outputs, params), keys)]


def translate_group_norm(site: Site) -> list[OpNode]:
    inputs, keys = _affine(site, 1)
    params = {"num_groups": site.int_("num_groups"), "eps": site.float_("epsilon", 1e-5)}
    return [_keyed(site.op("GroupNorm", inputs, site.outputs, params), keys)]


def translate_lrn(site: Site) -> list[OpNode]:
    params = {"size": site.int_("size"), "alpha": site.float_("alpha", 1e-4), "beta": site.float_("beta", 0.75),
              "k": site.float_("bias", 1.0)}
    return [site.op("LocalResponseNorm", [site.input(0)], site.outputs, params)]


TRANSLATORS = {
    "BatchNormalization": translate_batch_norm, "LayerNormalization": translate_layer_norm,
    "RMSNormalization": translate_layer_norm, "InstanceNormalization": translate_instance_norm,
    "GroupNormalization": translate_group_norm, "LRN": translate_lrn,
}
