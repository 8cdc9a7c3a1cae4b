"""ONNX Conv, ConvTranspose, DeformConv, MaxPool, AveragePool, LpPool, the global pools, MaxUnpool, Col2Im,
MatMul and Gemm -> canonical Conv, ConvTranspose{n}d, DeformConv2d, MaxPool{n}d, AvgPool{n}d,
AdaptiveAvgPool/MaxPool{n}d, Scatter, Fold and MatMul.

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


def translate_deform_conv(site: Site) -> list[OpNode]:
    """The canonical DeformConv2d: input, offset, weight, then the bias and mask the node gives."""
    if site.rank(0) != 4:
        raise site.error(f"deformable convolution is supported in 2-D, found an input of rank {site.rank(0)}")
    kernel = site.ints("kernel_shape", None) or list(site.static_shape(1)[2:])
    strides, dilations, pads = _window(site, 2, kernel)
    has_bias, has_mask = site.has_input(3), site.has_input(4)
    params = {"stride": strides, "dilation": dilations, "pads": pads, "groups": site.int_("group", 1),
              "offset_groups": site.int_("offset_group", 1), "bias": has_bias, "mask": has_mask}
    inputs = [site.input(0), site.input(2), site.input(1)] + [site.input(i) for i in (3, 4) if site.has_input(i)]
    return [site.op("DeformConv2d", inputs, site.outputs, params)]


def translate_pool(site: Site) -> list[OpNode]:
    spatial = site.rank(0) - 2
    if not 1 <= spatial <= 3:
        raise site.error(f"pools 1 to 3 spatial dims, found an input of rank {spatial + 2}")
    kernel = site.ints("kernel_shape")
    strides, dilations, pads = _window(site, spatial, kernel)
    params = {"kernel_size": kernel, "stride": strides, "ceil_mode": bool(site.int_("ceil_mode", 0)),
              "dilation": dilations}
    if site.op_type == "AveragePool":
        # The average pool takes ONNX's window whole: pads of any size on either side, dilations.
        params.update(pads=pads, count_include_pad=bool(site.int_("count_include_pad", 0)))
        return [site.op(f"AvgPool{spatial}d", [site.input(0)], site.outputs, params)]
    emit = Emit(site)
    value = site.input(0)
    # The max pool pads evenly by at most half a window: other pads become an explicit -inf Pad first.
    padded = any(before != after or 2 * before > k for (before, after), k in zip(pads, kernel))
    if padded:
        value = emit.op("Pad", [value], {"low": [0, 0, *(p[0] for p in pads)], "high": [0, 0, *(p[1] for p in pads)],
                                         "value": float("-inf")}, dtype=site.dtype(0))
    params["padding"] = [0 if padded else p[0] for p in pads]
    if not site.has_output(1):
        emit.op(f"MaxPool{spatial}d", [value], params, dtype=site.dtype(0), out=site.outputs[0])
        return emit.ops
    if padded:
        raise site.error(f"the Indices output with pads {pads} (uneven, or over half the window) is not supported")
    # Indices: PyTorch's position in each (n, c) plane, made a position in the whole tensor (row-major,
    # or with storage_order=1 the spatial dims column-major), as ONNX counts them.
    params["return_indices"] = True
    indices = site.temporary("plane_indices", "int64")
    emit.op_many(f"MaxPool{spatial}d", [value], [site.outputs[0], indices], params)
    shape = site.static_shape(0)
    plane = int(np.prod(shape[2:]))
    if site.int_("storage_order", 0):
        if spatial != 2:
            raise site.error("storage_order=1 is supported for 2-D pools")
        height, width = shape[2:]
        row = emit.fn("divide", [indices, emit.const(width, "int64")])
        column = emit.fn("remainder", [indices, emit.const(width, "int64")])
        indices = emit.fn("add", [emit.fn("multiply", [column, emit.const(height, "int64")]), row])
    offsets = (np.arange(shape[0] * shape[1], dtype=np.int64) * plane).reshape(shape[:2] + (1,) * spatial)
    emit.fn("add", [indices, emit.const(offsets, "int64")], out=site.outputs[1])
    return emit.ops


def translate_lp_pool(site: Site) -> list[OpNode]:
    """(sum over the window of |x|^p)^(1/p): an average pool whose divisor is 1 sums the window."""
    spatial = site.rank(0) - 2
    kernel = site.ints("kernel_shape")
    strides, dilations, pads = _window(site, spatial, kernel)
    p = float(site.int_("p", 2))
    emit = Emit(site)
    dtype = site.dtype(0)
    powered = emit.fn("power", [emit.fn("abs", [site.input(0)]), emit.const(p, dtype)])
    params = {"kernel_size": kernel, "stride": strides, "pads": pads,
              "dilation": dilations, "ceil_mode": bool(site.int_("ceil_mode", 0)), "divisor_override": 1}
    total = emit.op(f"AvgPool{spatial}d", [powered], params, dtype=dtype)
    emit.fn("power", [total, emit.const(1.0 / p, dtype)], out=site.outputs[0])
    return emit.ops


def translate_max_unpool(site: Site) -> list[OpNode]:
    """Each value of X written at its index (over the whole output tensor) into zeros: a Scatter into a flat
    tensor of the size the pool's window gives, reshaped, then padded at the end to ``output_shape``."""
    shape = site.static_shape(0)
    spatial = len(shape) - 2
    kernel = site.ints("kernel_shape")
    strides = site.ints("strides", [1] * spatial)
    pads = site.ints("pads", [0] * (2 * spatial))
    if len(kernel) != spatial or len(strides) != spatial or len(pads) != 2 * spatial:
        raise site.error(f"kernel_shape {kernel}, strides {strides} and pads {pads} must fit {spatial} spatial dims")
    inferred = [*shape[:2], *((size - 1) * s - pads[i] - pads[spatial + i] + k
                              for i, (size, k, s) in enumerate(zip(shape[2:], kernel, strides)))]
    if min(inferred) < 1:
        raise site.error(f"the unpooled shape {inferred} is empty")
    target = site.constant_ints(2, "output_shape") if site.has_input(2) else inferred
    if len(target) != len(shape) or list(target[:2]) != list(shape[:2]):
        raise site.error(f"output_shape {target} must keep the batch and channel dims of {list(shape)}")
    dtype = site.dtype(0)
    emit = Emit(site)
    count = int(np.prod(shape))
    zeros = emit.op("Broadcast", [emit.const(0, dtype)], {"shape": [int(np.prod(inferred))], "dims": []}, dtype=dtype)
    indices = emit.op("Reshape", [emit.convert(site.input(1), "int64")], {"shape": [count, 1]}, dtype="int64")
    values = emit.op("Reshape", [site.input(0)], {"shape": [count]}, dtype=dtype)
    params = {"update_window_dims": [], "inserted_window_dims": [0], "scatter_dims_to_operand_dims": [0],
              "index_vector_dim": 1, "combiner": "replace"}
    flat = emit.op("Scatter", [zeros, indices, values], params, dtype=dtype)
    same = list(target) == inferred
    image = emit.op("Reshape", [flat], {"shape": inferred}, dtype=dtype, out=site.outputs[0] if same else None)
    if not same:
        emit.op("Pad", [image], {"low": [0] * len(shape), "high": [t - i for t, i in zip(target, inferred)],
                                 "value": 0.0}, dtype=dtype, out=site.outputs[0])
    return emit.ops


def translate_col2im(site: Site) -> list[OpNode]:
    """The canonical Fold (col2im) over as many spatial dims as image_shape gives."""
    image = site.constant_ints(1, "image_shape")
    block = site.constant_ints(2, "block_shape")
    spatial = len(image)
    if not 1 <= spatial <= 3 or len(block) != spatial:
        raise site.error(f"image_shape {image} and block_shape {block} must give 1 to 3 spatial dims alike")
    pads = site.ints("pads", [0] * (2 * spatial))
    if len(pads) != 2 * spatial:
        raise site.error(f"pads {pads} must give a begin and an end for {spatial} spatial dims")
    params = {"spatial_dims": spatial, "output_size": image, "kernel_size": block,
              "dilation": site.ints("dilations", [1] * spatial), "stride": site.ints("strides", [1] * spatial),
              "pads": [[pads[i], pads[spatial + i]] for i in range(spatial)]}
    return [site.op("Fold", [site.input(0)], site.outputs, params)]


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
    "AveragePool": translate_pool, "LpPool": translate_lp_pool, "GlobalAveragePool": translate_global_pool,
    "GlobalMaxPool": translate_global_pool, "MaxUnpool": translate_max_unpool, "Col2Im": translate_col2im,
    "DeformConv": translate_deform_conv, "MatMul": translate_matmul, "Gemm": translate_gemm,
}
