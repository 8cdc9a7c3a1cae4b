"""HLO ``convolution`` -> the shared ``Conv`` op (NC<spatial> input, OI<spatial> weight), with every
fast path and compiled kernel that a PNNX convolution gets.

The translation puts everything XLA spells differently into the canonical form:

* ``dim_labels`` (``b01f_01io->b01f``, ``bf01_oi01->bf01`` ...): transposes of the input and the
  output where they are not already batch-feature-spatial; a constant kernel is re-laid out
  (and flipped for ``rhs_reversal``) once, here, so the op prepares its fast path at build time;
  a kernel computed in the program gets a Transpose (and a Reverse) op instead.
* window pads that are unequal per side become the op's (before, after) ``pads``; ``lhs_dilate``
  (a transposed convolution: JAX's ``conv_transpose``) becomes the shared ``ConvTranspose{n}d``
  where it is one that op takes (``_as_transposed``), which multiplies none of the inserted zeros
  (Flax's U-Net with three 2x2/2 up-convolutions: 6 % less time a call, 1 thread, in-process A/B); other
  lhs dilations and negative pads (crops) become an explicit ``Pad`` with interior zeros before a
  convolution without padding.
* ``batch_group_count`` G: the batch is split into G groups that are stacked along the
  features, which is a feature-grouped convolution with G groups.
"""

from __future__ import annotations

import numpy as np

from ..ir.dtypes import array_dtype
from ..model_ir import OpNode
from .site import Site
from .translate_common import (
    attribute,
    constant_operand,
    integer,
    operand,
    reshape,
    result,
    transpose,
    widened_operand,
    widens,
    with_dims,
    word,
)
from .windows import parse_window, split_dim_labels


def _labels(site: Site) -> tuple[list[int], list[int], list[int], int]:
    """(lhs dims as b, f, 0.., rhs dims as o, i, 0.., output dims in the canonical b, f, 0.. order, spatial)."""
    lhs, rhs, out = split_dim_labels(word(site, "dim_labels", ""), site.error)
    spatial = len(lhs) - 2
    digits = [str(d) for d in range(spatial)]
    canonical = ["b", "f", *digits]
    position = {label: i for i, label in enumerate(canonical)}
    return ([lhs.index(c) for c in canonical], [rhs.index(c) for c in ["o", "i", *digits]],
            [position[c] for c in out], spatial)


def _window(site: Site, rank: int) -> dict:
    window = parse_window(attribute(site, "window", {}), rank, site.error)
    if any(not isinstance(p, tuple) or len(p) != 2 for p in window["pad"]):
        raise site.error(f"window pad={attribute(site, 'window')['pad']} must be low_high per dim")
    return window


def translate_convolution(site: Site) -> list[OpNode]:
    lhs_order, rhs_order, out_order, spatial = _labels(site)
    window = _window(site, spatial)
    # No spatial dims (``bf_io->bf``: features times a matrix, per feature group): the shared Conv
    # runs it with one spatial dim of size 1 added to the input, the kernel and the result.
    flat = spatial == 0
    if flat:
        window = {key: [default] for key, default in
                  (("size", 1), ("stride", 1), ("pad", (0, 0)), ("lhs_dilate", 1), ("rhs_dilate", 1), ("rhs_reversal", 0))}
    if any(isinstance(v, tuple) or v < 1 for key in ("stride", "lhs_dilate", "rhs_dilate") for v in window[key]):
        raise site.error(f"window strides and dilations must be positive integers, found {window}")
    groups = integer(site, "feature_group_count", 1)
    batch_groups = integer(site, "batch_group_count", 1)
    if groups < 1 or batch_groups < 1 or (groups > 1 and batch_groups > 1):
        raise site.error(f"feature_group_count={groups} and batch_group_count={batch_groups}: both must be "
                         "positive, and at most one above 1")
    out_shape = result(site)
    if not all(widens(operand(site, i).dtype, out_shape.dtype) for i in (0, 1)):
        raise site.error(f"a {operand(site, 0).element_type} convolution with a {out_shape.element_type} result "
                         "is not supported")
    x, x_shape, ops = widened_operand(site, 0, "lhs")
    x, x_shape, emitted = transpose(site, x, x_shape, lhs_order, "lhs")
    ops += emitted
    if flat:
        x, x_shape, emitted = reshape(site, x, x_shape, [*x_shape.dims, 1], "lhs_spatial")
        ops += emitted
        spatial = 1
    pads = [tuple(p) for p in window["pad"]]
    transposed = _as_transposed(window, groups, batch_groups, flat)
    if transposed is not None:
        return ops + _transposed_convolution(site, x, rhs_order, window, transposed, out_order, spatial)
    if any(d > 1 for d in window["lhs_dilate"]) or any(v < 0 for p in pads for v in p):
        x, x_shape, emitted = _dilate_and_pad(site, x, x_shape, window["lhs_dilate"], pads)
        ops += emitted
        pads = [(0, 0)] * spatial
    if batch_groups > 1:
        x, x_shape, emitted = _batch_groups_as_features(site, x, x_shape, batch_groups)
        ops += emitted
        groups = batch_groups
    inputs, attrs, emitted = _kernel(site, rhs_order, window["rhs_reversal"], flat)
    ops += emitted
    params = {"spatial_dims": spatial, "stride": list(window["stride"]), "dilation": list(window["rhs_dilate"]),
              "groups": groups, "pads": [list(p) for p in pads]}
    conv_dims = [out_shape.dims[out_order.index(axis)] for axis in range(len(out_order))]
    identity = out_order == list(range(len(out_order))) and not flat
    conv_out = site.outputs[0] if identity else site.temporary("conv", with_dims(out_shape, conv_dims + [1] * flat))
    ops.append(site.op("Conv", [x, *inputs], [conv_out], params, attrs, suffix="" if identity else "conv"))
    if flat:
        conv_out, _, emitted = reshape(site, conv_out, with_dims(out_shape, conv_dims + [1]), conv_dims, "conv_flat",
                                       target=site.outputs[0] if out_order == [0, 1] else None)
        ops += emitted
        if out_order == [0, 1]:
            return ops
    if not identity:
        ops += transpose(site, conv_out, with_dims(out_shape, conv_dims), out_order, "out", target=site.outputs[0])[2]
    return ops


def _as_transposed(window: dict, groups: int, batch_groups: int, flat: bool) -> tuple[list[int], list[int]] | None:
    """(padding, output_padding) of the transposed convolution that a convolution over an lhs-dilated input
    is, or None where it is not one the shared ConvTranspose op takes.

    Along a dim with lhs_dilate s, pads (lo, hi), kernel k and rhs_dilate d (window stride 1), output y
    sums x[i] times the kernel's tap t' where y - lo + t' d = i s; with t = k - 1 - t' that is
    y = i s - p + t d, p = d (k - 1) - lo: PyTorch's transposed convolution with stride s, padding p
    and the kernel flipped, in and out features swapped; the output has hi - lo more positions than
    padding p alone gives (output_padding), which PyTorch allows below max(s, d)."""
    if flat or groups != 1 or batch_groups != 1 or all(s == 1 for s in window["lhs_dilate"]):
        return None
    if any(stride != 1 for stride in window["stride"]):
        return None
    padding, output_padding = [], []
    for k, s, d, (lo, hi) in zip(window["size"], window["lhs_dilate"], window["rhs_dilate"], window["pad"]):
        p, extra = d * (k - 1) - lo, hi - lo
        if p < 0 or not 0 <= extra < max(s, d):
            return None
        padding.append(p)
        output_padding.append(extra)
    return padding, output_padding


def _transposed_convolution(site: Site, x: str, rhs_order: list[int], window: dict, transposed, out_order,
                            spatial: int) -> list[OpNode]:
    """A convolution over an lhs-dilated input as the shared ConvTranspose op (``_as_transposed``): it
    multiplies no inserted zeros, and oneDNN's deconvolution runs it.  Its kernel is (in, out, spatial..),
    flipped along each spatial dim the HLO does not already reverse."""
    padding, output_padding = transposed
    order = [rhs_order[1], rhs_order[0], *rhs_order[2:]]
    flipped = [2 + axis for axis, reversed_already in enumerate(window["rhs_reversal"]) if not reversed_already]
    params = {"stride": list(window["lhs_dilate"]), "dilation": list(window["rhs_dilate"]), "groups": 1,
              "padding": padding, "output_padding": output_padding}
    out_shape = result(site)
    ops: list[OpNode] = []
    weight = constant_operand(site, 1)
    if weight is not None:
        weight = np.transpose(weight, order).astype(array_dtype(np, out_shape.dtype))
        attrs, inputs = {"weight": np.ascontiguousarray(np.flip(weight, axis=flipped) if flipped else weight)}, []
    else:
        kernel, shape, ops = widened_operand(site, 1, "kernel")
        kernel, shape, emitted = transpose(site, kernel, shape, order, "kernel")
        ops += emitted
        if flipped:
            reversed_kernel = site.temporary("kernel_reversed", shape)
            ops.append(site.op("Reverse", [kernel], [reversed_kernel], {"dims": flipped}, suffix="kernel_reversed"))
            kernel = reversed_kernel
        attrs, inputs = {}, [kernel]
    conv_dims = [out_shape.dims[out_order.index(axis)] for axis in range(len(out_order))]
    identity = out_order == list(range(len(out_order)))
    conv_out = site.outputs[0] if identity else site.temporary("conv", with_dims(out_shape, conv_dims))
    ops.append(site.op(f"ConvTranspose{spatial}d", [x, *inputs], [conv_out], params, attrs,
                       suffix="" if identity else "conv"))
    if not identity:
        ops += transpose(site, conv_out, with_dims(out_shape, conv_dims), out_order, "out", target=site.outputs[0])[2]
    return ops


def _dilate_and_pad(site: Site, x: str, shape, lhs_dilate, pads):
    """Interior zeros between input elements (lhs_dilate) and the window pads, negative ones cropping."""
    low = [0, 0] + [lo for lo, _ in pads]
    high = [0, 0] + [hi for _, hi in pads]
    interior = [0, 0] + [d - 1 for d in lhs_dilate]
    new_dims = [lo + hi + size + max(size - 1, 0) * inner
                for size, lo, hi, inner in zip(shape.dims, low, high, interior)]
    padded_shape = with_dims(shape, new_dims)
    padded = site.temporary("lhs_dilated", padded_shape)
    params = {"low": low, "high": high, "interior": interior, "value": 0.0}
    return padded, padded_shape, [site.op("Pad", [x], [padded], params, suffix="lhs_dilated")]


def _batch_groups_as_features(site: Site, x: str, shape, count: int):
    """(B, C, S..) -> (count, B/count, C, S..) -> (B/count, count, C, S..) -> (B/count, count*C, S..)."""
    batch, features, *rest = shape.dims
    if batch % count:
        raise site.error(f"batch_group_count={count} does not divide the batch {batch}")
    ops: list[OpNode] = []
    x, shape, emitted = reshape(site, x, shape, [count, batch // count, features, *rest], "batch_groups")
    ops += emitted
    x, shape, emitted = transpose(site, x, shape, [1, 0, *range(2, len(shape.dims))], "batch_groups_moved")
    ops += emitted
    x, shape, emitted = reshape(site, x, shape, [batch // count, count * features, *rest], "batch_groups_stacked")
    return x, shape, ops + emitted


def _kernel(site: Site, rhs_order: list[int], reversal, flat: bool = False) -> tuple[list[str], dict, list[OpNode]]:
    """The kernel in (out, in/groups, spatial..) order: a re-laid-out @weight when constant, else ops
    (``flat``: a kernel without spatial dims gets one of size 1)."""
    reversed_axes = [2 + axis for axis, flip in enumerate(reversal) if flip]
    weight = constant_operand(site, 1)
    if weight is not None:
        weight = np.transpose(weight, rhs_order).astype(array_dtype(np, result(site).dtype))
        if reversed_axes:
            weight = np.flip(weight, axis=reversed_axes)
        weight = weight[..., None] if flat else weight
        return [], {"weight": np.ascontiguousarray(weight)}, []
    kernel, shape, ops = widened_operand(site, 1, "kernel")
    kernel, shape, emitted = transpose(site, kernel, shape, rhs_order, "kernel")
    ops += emitted
    if flat:
        kernel, shape, emitted = reshape(site, kernel, shape, [*shape.dims, 1], "kernel_spatial")
        ops += emitted
    if reversed_axes:
        flipped = site.temporary("kernel_reversed", shape)
        ops.append(site.op("Reverse", [kernel], [flipped], {"dims": reversed_axes}, suffix="kernel_reversed"))
        kernel = flipped
    return [kernel], {}, ops


TRANSLATORS = {"convolution": translate_convolution}
