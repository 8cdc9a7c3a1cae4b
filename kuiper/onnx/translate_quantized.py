"""ONNX's quantized ops -> chains of canonical ops on dequantized values.

QuantizeLinear and DequantizeLinear are ONNX's formulas (saturating, rounding half to even). The
integer and quantized products (MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv) dequantize
their operands, run the float MatMul or Conv, and quantize the result: integer products are computed
in float64, exact while the sums stay below 2**53.
"""

from __future__ import annotations

import numpy as np

from ..model_ir import OpNode
from .emit import Emit
from .site import Site


def _per_axis(emit: Emit, site: Site, name: str, rank: int) -> str:
    """A scale or zero point of one value, or one per slice along ``axis`` shaped to broadcast."""
    shape = site.values.shape(name)
    if shape is None or len(shape) == 0 or (len(shape) == 1 and shape[0] == 1):
        return name
    if len(shape) != 1 or site.attribute("block_size") is not None and site.int_("block_size") > 0:
        raise site.error("blocked quantization (a scale per block) is not supported")
    axis = site.int_("axis", 1) % rank
    target = [1] * rank
    target[axis] = -1
    return emit.op("Reshape", [name], {"shape": target}, dtype=emit.dtype(name))


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


def translate_quantize(site: Site) -> list[OpNode]:
    """y = saturate(round_half_even(x / scale) + zero_point) in the output's integer type."""
    emit = Emit(site)
    rank = site.rank(0)
    target = site.out_dtype(0)
    if not target.startswith(("int", "uint")) or target in ("int4", "uint4", "int2", "uint2"):
        raise site.error(f"quantizing to {target} is not supported (8- and 16-bit integers are)")
    work = site.dtype(1)
    x = emit.convert(site.input(0), work)
    scaled = emit.fn("round_half_even", [emit.fn("divide", [x, _per_axis(emit, site, site.input(1), rank)])])
    if site.has_input(2):
        scaled = emit.fn("add", [scaled, emit.convert(_per_axis(emit, site, site.input(2), rank), work)])
    info = np.iinfo(target)
    clamped = emit.fn("clamp", [emit.const(info.min, work), scaled, emit.const(info.max, work)])
    emit.convert(clamped, target, out=site.outputs[0])
    return emit.ops


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
