"""ONNX's quantized ops -> chains of canonical ops on dequantized values.

QuantizeLinear and DequantizeLinear are ONNX's formulas (saturating, rounding half to even). The
integer and quantized products (MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv) dequantize
their operands, run the float MatMul or Conv, and quantize the result: integer products are computed
in float64, exact while the sums stay below 2**53.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ..model_ir import OpNode
from .emit import Emit
from .site import Site


def _per_axis(emit: Emit, site: Site, name: str, rank: int) -> str:
    """A scale or zero point shaped to broadcast against input 0: one value, one per slice along ``axis``,
    or (``block_size`` > 0) one per block of ``block_size`` slices along ``axis``, repeated over its block."""
    shape = site.values.shape(name)
    block_size = site.int_("block_size", 0) if site.attribute("block_size") is not None else 0
    if block_size < 0:
        raise site.error(f"block_size must be positive (or 0 for none), found {block_size}")
    if block_size == 0 and (shape is None or len(shape) == 0 or (len(shape) == 1 and shape[0] == 1)):
        return name
    axis = site.int_("axis", 1)
    if not -rank <= axis < rank:
        raise site.error(f"axis {axis} is out of range for an input of rank {rank}")
    axis %= rank
    if block_size > 0:
        return _blocked(emit, site, name, axis, block_size)
    if len(shape) != 1:
        raise site.error(f"'{name}' must be a scalar or 1-D without block_size, found shape {list(shape)}")
    target = [1] * rank
    target[axis] = -1
    return emit.op("Reshape", [name], {"shape": target}, dtype=emit.dtype(name))


def _blocked(emit: Emit, site: Site, name: str, axis: int, block_size: int) -> str:
    """Blocked quantization: ``name`` has input 0's shape but ceil(n / block_size) along ``axis``; each value
    covers ``block_size`` slices (the last block may be shorter): repeat it, then cut to input 0's length."""
    x_shape = list(site.static_shape(0))
    shape = site.values.shape(name)
    expected = list(x_shape)
    expected[axis] = -(-x_shape[axis] // block_size)
    if shape is None or list(shape) != expected:
        raise site.error(f"with block_size={block_size} along axis {axis}, '{name}' must have shape {expected} "
                         f"(input 0 is {x_shape}), found {None if shape is None else list(shape)}")
    dtype = emit.dtype(name)
    repeated = emit.op("RepeatInterleave", [name], {"repeats": block_size, "dim": axis}, dtype=dtype)
    limits = list(x_shape)
    return emit.op("Slice", [repeated], {"starts": [0] * len(x_shape), "limits": limits}, dtype=dtype)


def translate_dequantize(site: Site) -> list[OpNode]:
    """y = (x - zero_point) * scale, computed in the scale's type."""
    emit = Emit(site)
    rank = site.rank(0)
    dtype = site.out_dtype(0)
    x = emit.convert(site.input(0), dtype)
    if site.has_input(2):
        x = emit.fn("subtract", [x, emit.convert(_per_axis(emit, site, site.input(2), rank), dtype)])
    emit.fn("multiply", [x, emit.convert(_per_axis(emit, site, site.input(1), rank), dtype)], out=site.outputs[0])
    return emit.ops


# ONNX's integer quantization ranges, the narrow ones included (NumPy's iinfo does not know them).
_INTEGER_RANGES = {"int2": (-2, 1), "uint2": (0, 3), "int4": (-8, 7), "uint4": (0, 15)}
_FLOAT_TARGETS = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float4_e2m1fn")


def translate_quantize(site: Site) -> list[OpNode]:
    """Integers: y = saturate(round_half_even(x / scale) + zero_point) to the output type's range. Float8
    and float4: y = x / scale (+ zero_point, which ONNX requires to be 0), cast to the output type,
    clamped to its finite range unless ``saturate=0`` (float4 has no infinity: always clamped).
    ``precision`` (opset 23) names the type the division runs in; else the scale's."""
    emit = Emit(site)
    rank = site.rank(0)
    target = site.out_dtype(0)
    if target not in _FLOAT_TARGETS and not target.startswith(("int", "uint")):
        raise site.error(f"quantizing to {target} is not supported (integers, float8 and float4 are)")
    work = site.dtype(1)
    if site.attribute("precision") is not None and site.int_("precision") != 0:
        work = _precision_dtype(site, site.int_("precision"))
    x = emit.convert(site.input(0), work)
    scaled = emit.fn("divide", [x, emit.convert(_per_axis(emit, site, site.input(1), rank), work)])
    if target in _FLOAT_TARGETS:
        if site.has_input(2):
            scaled = emit.fn("add", [scaled, emit.convert(_per_axis(emit, site, site.input(2), rank), work)])
        if site.int_("saturate", 1) or target == "float4_e2m1fn":
            info = ml_dtypes.finfo(target)
            scaled = emit.fn("clamp", [emit.const(float(info.min), work), scaled, emit.const(float(info.max), work)])
        emit.convert(scaled, target, out=site.outputs[0])
        return emit.ops
    scaled = emit.fn("round_half_even", [scaled])
    if site.has_input(2):
        scaled = emit.fn("add", [scaled, emit.convert(_per_axis(emit, site, site.input(2), rank), work)])
    low, high = _INTEGER_RANGES[target] if target in _INTEGER_RANGES else (np.iinfo(target).min, np.iinfo(target).max)
    clamped = emit.fn("clamp", [emit.const(low, work), scaled, emit.const(high, work)])
    emit.convert(clamped, target, out=site.outputs[0])
    return emit.ops


def _precision_dtype(site: Site, code: int) -> str:
    """The float type a ``precision`` attribute (a TensorProto data type code) names."""
    names = {1: "float32", 10: "float16", 11: "float64", 16: "bfloat16"}
    if code not in names:
        raise site.error(f"precision {code} is not a float type kuiper computes in "
                         "(float32, float16, float64, bfloat16)")
    return names[code]


def _centered(emit: Emit, site: Site, value: int, zero_point: int | None, dtype: str) -> str:
    """Input ``value`` minus input ``zero_point`` (if given), as ``dtype``. A conv weight's zero points are
    per output channel: dims (C_out, 1, 1 ...)."""
    centered = emit.convert(site.input(value), dtype)
    if zero_point is not None and site.has_input(zero_point):
        point = emit.convert(site.input(zero_point), dtype)
        shape = site.shape(zero_point)
        if site.op_type in ("ConvInteger", "QLinearConv") and value in (1, 3) and shape and len(shape) == 1:
            point = emit.op("Reshape", [point], {"shape": [-1] + [1] * (site.rank(value) - 1)}, dtype=dtype)
        centered = emit.fn("subtract", [centered, point])
    return centered


def _conv_params(site: Site) -> dict:
    spatial = site.rank(0) - 2
    pads = site.ints("pads", [0] * (2 * spatial))
    if site.string("auto_pad", "NOTSET") not in ("NOTSET", ""):
        raise site.error("auto_pad is not supported for quantized convolutions")
    return {"spatial_dims": spatial, "stride": site.ints("strides", [1] * spatial),
            "dilation": site.ints("dilations", [1] * spatial), "groups": site.int_("group", 1),
            "pads": [[pads[i], pads[i + spatial]] for i in range(spatial)]}


def translate_integer_product(site: Site) -> list[OpNode]:
    """MatMulInteger / ConvInteger: (a - a_zero_point) times (b - b_zero_point), exactly, as int32."""
    emit = Emit(site)
    a = _centered(emit, site, 0, 2, "float64")
    b = _centered(emit, site, 1, 3, "float64")
    if site.op_type == "MatMulInteger":
        product = emit.op("MatMul", [a, b], dtype="float64")
    else:
        product = emit.op("Conv", [a, b], _conv_params(site), dtype="float64")
    emit.convert(product, "int32", out=site.outputs[0])
    return emit.ops


def translate_qlinear_product(site: Site) -> list[OpNode]:
    """QLinearMatMul / QLinearConv: dequantize, the float product, quantize with the output's scale and zero point."""
    emit = Emit(site)
    work = "float64"
    a = emit.fn("multiply", [_centered(emit, site, 0, 2, work), emit.convert(site.input(1), work)])
    b_scale = emit.convert(site.input(4), work)
    if site.op_type == "QLinearConv":  # the weight's scale is per output channel: dims (C_out, 1, 1 ...)
        rank = site.rank(3)
        b_scale = emit.op("Reshape", [b_scale], {"shape": [-1] + [1] * (rank - 1)}, dtype=work)
    b = emit.fn("multiply", [_centered(emit, site, 3, 5, work), b_scale])
    if site.op_type == "QLinearMatMul":
        product = emit.op("MatMul", [a, b], dtype=work)
    else:
        inputs = [a, b]
        if site.has_input(8):  # the int32 bias, in units of a_scale * b_scale
            bias = emit.fn("multiply", [emit.convert(site.input(8), work),
                                        emit.fn("multiply", [emit.convert(site.input(1), work), b_scale])])
            inputs.append(emit.op("Reshape", [bias], {"shape": [-1]}, dtype=work))
        product = emit.op("Conv", inputs, _conv_params(site), dtype=work)
    scale_at, zero_at = 6, 7
    target = site.out_dtype(0)
    scaled = emit.fn("round_half_even", [emit.fn("divide", [product, emit.convert(site.input(scale_at), work)])])
    if site.has_input(zero_at):
        scaled = emit.fn("add", [scaled, emit.convert(site.input(zero_at), work)])
    info = np.iinfo(target)
    clamped = emit.fn("clamp", [emit.const(info.min, work), scaled, emit.const(info.max, work)])
    emit.convert(clamped, target, out=site.outputs[0])
    return emit.ops


TRANSLATORS = {
    "DequantizeLinear": translate_dequantize, "QuantizeLinear": translate_quantize,
    "MatMulInteger": translate_integer_product, "ConvInteger": translate_integer_product,
    "QLinearMatMul": translate_qlinear_product, "QLinearConv": translate_qlinear_product,
}
