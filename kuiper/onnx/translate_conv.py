"""ONNX Conv, ConvTranspose, MaxPool, AveragePool, the global pools, MatMul and Gemm -> canonical Conv,
ConvTranspose{n}d, MaxPool{n}d, AvgPool{n}d, AdaptiveAvgPool/MaxPool{n}d and MatMul.

``auto_pad`` (SAME_UPPER, SAME_LOWER, VALID) becomes explicit pads from the input's static spatial
size. A constant weight travels as the op's ``@weight`` (and ``@bias``), so the conv's fast paths
(oneDNN, Winograd, depthwise) prepare it once at load, as for PNNX and HLO models.
"""

from __future__ import annotations

import numpy as np

from ..model_ir import OpNode
from .emit import NARROW_FLOATS, Emit
from .site import Site


def _window(site: Site, spatial: int, kernel: list[int]) -> tuple[list[int], list[int], list[list[int]]]:
    """(strides, dilations, [before, after] pads per spatial dim) with auto_pad resolved."""
    strides = site.ints("strides", [1] * spatial)
    dilations = site.ints("dilations", [1] * spatial)
    auto_pad = site.string("auto_pad", "NOTSET")
    if auto_pad in ("NOTSET", ""):
        pads = site.ints("pads", [0] * (2 * spatial))
        if len(pads) != 2 * spatial:
            raise site.error(f"pads {pads} must give a begin and an end for {spatial} spatial dims")
        return strides, dilations, [[pads[i], pads[i + spatial]] for i in range(spatial)]
    if auto_pad == "VALID":
        return strides, dilations, [[0, 0] for _ in range(spatial)]
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise site.error(f"auto_pad={auto_pad!r} is not NOTSET, VALID, SAME_UPPER or SAME_LOWER")
    sizes = site.spatial_shape(0)
    pads = []
    for size, k, s, d in zip(sizes, kernel, strides, dilations):
        out = -(-size // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        small, large = total // 2, total - total // 2
        pads.append([small, large] if auto_pad == "SAME_UPPER" else [large, small])
    return strides, dilations, pads


def translate_conv(site: Site) -> list[OpNode]:
    rank = site.rank(0)
    spatial = rank - 2
    if site.is_known(1):
        weight = site.constant(1, "weight")
        kernel = list(weight.shape[2:])
    else:
        kernel = site.ints("kernel_shape", None) or list(site.static_shape(1)[2:])
    strides, dilations, pads = _window(site, spatial, kernel)
    params = {"spatial_dims": spatial, "stride": strides, "dilation": dilations, "groups": site.int_("group", 1),
              "pads": pads}
    inputs = [site.input(0)]
    attrs = {}
    if site.is_known(1) and (not site.has_input(2) or site.is_known(2)):
        attrs["weight"] = site.constant(1, "weight")
        if site.has_input(2):
            attrs["bias"] = site.constant(2, "bias")
    else:
        inputs += [name for name in site.inputs[1:3] if name]
    return [site.op("Conv", inputs, site.outputs, params, attrs)]


def translate_conv_transpose(site: Site) -> list[OpNode]:
    """The canonical ConvTranspose{n}d; pads it cannot take (unequal, or negative: ONNX's output_shape asks
    for a larger output) become a Pad of its unpadded output, which crops where the amount is positive."""
    spatial = site.rank(0) - 2
    weight_shape = site.static_shape(1)
    kernel = site.ints("kernel_shape", list(weight_shape[2:]))
    strides = site.ints("strides", [1] * spatial)
    dilations = site.ints("dilations", [1] * spatial)
    output_padding = site.ints("output_padding", [0] * spatial)
    auto_pad = site.string("auto_pad", "NOTSET")
    if site.attribute("output_shape") is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        sizes = site.spatial_shape(0)
        targets = (site.ints("output_shape", None) or [size * s for size, s in zip(sizes, strides)])[-spatial:]
        pads = []
        for size, k, s, d, extra, target in zip(sizes, kernel, strides, dilations, output_padding, targets):
            total = s * (size - 1) + extra + (k - 1) * d + 1 - target
            first = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
            pads.append((first, total - first))
    elif auto_pad == "VALID":
        pads = [(0, 0)] * spatial
    else:
        flat = site.ints("pads", [0] * (2 * spatial))
        pads = [(flat[i], flat[i + spatial]) for i in range(spatial)]
    even = all(before == after >= 0 for before, after in pads)
    params = {"stride": strides, "dilation": dilations, "groups": site.int_("group", 1),
              "padding": [before if even else 0 for before, _ in pads], "output_padding": output_padding}
    attrs = {"weight": site.constant(1, "weight")}
    if site.has_input(2):
        attrs["bias"] = site.constant(2, "bias")
    emit = Emit(site)
    dtype = site.dtype(0)
    output = emit.op(f"ConvTranspose{spatial}d", [site.input(0)], params, dtype=dtype, attrs=attrs,
                     out=site.outputs[0] if even else None)
    if not even:
        emit.op("Pad", [output], {"low": [0, 0, *(-before for before, _ in pads)],
                                  "high": [0, 0, *(-after for _, after in pads)], "value": 0.0},
                dtype=dtype, out=site.outputs[0])
    return emit.ops


def translate_pool(site: Site) -> list[OpNode]:
    spatial = site.rank(0) - 2
    if not 1 <= spatial <= 3:
        raise site.error(f"pools 1 to 3 spatial dims, found an input of rank {spatial + 2}")
    if site.has_output(1):
        raise site.error("the Indices output (positions over the whole tensor) is not supported")
    kernel = site.ints("kernel_shape")
    strides, dilations, pads = _window(site, spatial, kernel)
    is_max = site.op_type == "MaxPool"
    emit = Emit(site)
    value = site.input(0)
    params = {"kernel_size": kernel, "stride": strides, "ceil_mode": bool(site.int_("ceil_mode", 0))}
    # The pool ops pad evenly by at most half a window: other pads become an explicit Pad first.
    if any(before != after or 2 * before > k for (before, after), k in zip(pads, kernel)):
        include_pad = site.int_("count_include_pad", 0)
        if not is_max and not include_pad:
            raise site.error(f"unequal pads {pads} with count_include_pad=0 are not supported")
        fill = float("-inf") if is_max else 0.0
        value = emit.op("Pad", [value], {"low": [0, 0, *(p[0] for p in pads)], "high": [0, 0, *(p[1] for p in pads)],
                                         "value": fill}, dtype=site.dtype(0))
        pads = [[0, 0] for _ in pads]
    params["padding"] = [p[0] for p in pads]
    if is_max:
        params["dilation"] = dilations
        emit.op(f"MaxPool{spatial}d", [value], params, dtype=site.dtype(0), out=site.outputs[0])
    else:
        if any(d != 1 for d in dilations):
            raise site.error(f"dilations {dilations} in an average pool are not supported")
        params["count_include_pad"] = bool(site.int_("count_include_pad", 0))
        emit.op(f"AvgPool{spatial}d", [value], params, dtype=site.dtype(0), out=site.outputs[0])
    return emit.ops


def translate_lp_pool(site: Site) -> list[OpNode]:
    """(sum over the window of |x|^p)^(1/p): an average pool that counts padding, times the window's size."""
    spatial = site.rank(0) - 2
    kernel = site.ints("kernel_shape")
    strides, dilations, pads = _window(site, spatial, kernel)
    if site.int_("ceil_mode", 0) or any(d != 1 for d in dilations):
        raise site.error("ceil_mode and dilations are not supported for LpPool")
    p = float(site.int_("p", 2))
    emit = Emit(site)
    dtype = site.dtype(0)
    powered = emit.fn("power", [emit.fn("abs", [site.input(0)]), emit.const(p, dtype)])
    if any(before != after or 2 * before > k for (before, after), k in zip(pads, kernel)):
        powered = emit.op("Pad", [powered], {"low": [0, 0, *(q[0] for q in pads)],
                                             "high": [0, 0, *(q[1] for q in pads)], "value": 0.0}, dtype=dtype)
        pads = [[0, 0] for _ in pads]
    params = {"kernel_size": kernel, "stride": strides, "padding": [q[0] for q in pads], "count_include_pad": True}
    mean = emit.op(f"AvgPool{spatial}d", [powered], params, dtype=dtype)
    total = emit.fn("multiply", [mean, emit.const(float(np.prod(kernel)), dtype)])
    emit.fn("power", [total, emit.const(1.0 / p, dtype)], out=site.outputs[0])
    return emit.ops


def translate_global_pool(site: Site) -> list[OpNode]:
    spatial = site.rank(0) - 2
    kind = "Max" if site.op_type == "GlobalMaxPool" else "Avg"
    return [site.op(f"Adaptive{kind}Pool{spatial}d", [site.input(0)], site.outputs, {"output_size": [1] * spatial})]


def translate_matmul(site: Site) -> list[OpNode]:
    """MatMul; of bfloat16 or float8 operands, computed in float32 and rounded back, as ONNX types it."""
    dtype = site.dtype(0)
    if dtype not in NARROW_FLOATS:  # ml_dtypes' bfloat16 and float8 matmul gives float32
        return [site.op("MatMul", [site.input(0), site.input(1)], site.outputs)]
    emit = Emit(site)
    wide = [emit.convert(site.input(i), "float32") for i in (0, 1)]
    emit.convert(emit.op("MatMul", wide, dtype="float32"), dtype, out=site.outputs[0])
    return emit.ops


def translate_gemm(site: Site) -> list[OpNode]:
    alpha, beta = site.float_("alpha", 1.0), site.float_("beta", 1.0)
    if site.is_known(1) and not site.int_("transA", 0) and (not site.has_input(2) or site.is_known(2)):
        # A dense layer: the canonical Linear, its weight (out, in) and bias scaled and laid out once.
        weight = site.constant(1, "B")
        weight = (weight if site.int_("transB", 0) else weight.T) * np.asarray(alpha, weight.dtype)
        attrs = {"weight": np.ascontiguousarray(weight)}
        if site.has_input(2):
            bias = site.constant(2, "C") * np.asarray(beta, weight.dtype)
            out = weight.shape[0]
            if bias.shape not in ((), (1,), (out,), (1, 1), (1, out)):  # C varies along rows: no bias vector
                return _gemm_ops(site, alpha, beta)
            attrs["bias"] = np.ascontiguousarray(np.broadcast_to(bias.reshape(-1), (weight.shape[0],)))
        return [site.op("Linear", [site.input(0)], site.outputs, {"bias": "bias" in attrs}, attrs)]
    return _gemm_ops(site, alpha, beta)


def _gemm_ops(site: Site, alpha: float, beta: float) -> list[OpNode]:
    emit = Emit(site)
    dtype = site.dtype(0)
    a, b = site.input(0), site.input(1)
    if site.int_("transA", 0):
        a = emit.op("Transpose", [a], {"dims": [1, 0]}, dtype=dtype)
    if site.int_("transB", 0):
        b = emit.op("Transpose", [b], {"dims": [1, 0]}, dtype=dtype)
    has_c = site.has_input(2)
    final = site.outputs[0]
    product = emit.op("MatMul", [a, b], dtype=dtype, out=None if has_c or alpha != 1.0 else final)
    if alpha != 1.0:
        product = emit.fn("multiply", [product, emit.const(alpha, dtype)], out=None if has_c else final)
    if has_c:
        c = site.input(2)
        if beta != 1.0:
            c = emit.fn("multiply", [c, emit.const(beta, dtype)])
        emit.fn("add", [product, c], out=final)
    return emit.ops


TRANSLATORS = {
    "Conv": translate_conv, "ConvTranspose": translate_conv_transpose, "MaxPool": translate_pool,
    "AveragePool": translate_pool, "LpPool": translate_lp_pool, "GlobalAveragePool": translate_global_pool, "GlobalMaxPool": translate_global_pool,
    "MatMul": translate_matmul, "Gemm": translate_gemm,
}
