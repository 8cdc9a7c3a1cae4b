"""ONNX Resize/Upsample, GridSample, AffineGrid and RoiAlign -> the canonical Resample, GridSample, AffineGrid
and RoiAlign ops.

Resample names ONNX's choices one by one (mode, coordinate rule, nearest rounding, cubic coefficient,
antialias, exclude_outside, crop and extrapolation), so Resize translates attribute for attribute.
What is left to the translator: the inputs that decide sizes (``scales``, ``sizes``, ``roi``) must be
known at load time; ``axes`` and ``keep_aspect_ratio_policy`` (opset 18) become the axes and output
sizes themselves; axes that keep their size and their samples are left out. Upsample and Resize
before opset 11 read ``asymmetric`` coordinates and floor the nearest position (what ONNX Runtime
and PyTorch's exports mean by them).
"""

from __future__ import annotations

import numpy as np

from ..model_ir import OpNode
from .site import Site

_TRANSFORMS = {"half_pixel": "half_pixel", "half_pixel_symmetric": "half_pixel_symmetric",
               "pytorch_half_pixel": "pytorch_half_pixel", "align_corners": "align_corners",
               "asymmetric": "asymmetric", "tf_crop_and_resize": "crop_and_resize"}


def _floats_input(site: Site, index: int, what: str) -> list[float] | None:
    """A known float input (scales, roi) as a list; None when absent or empty (ONNX's "not given")."""
    if not site.has_input(index):
        return None
    value = site.constant(index, what)
    if value.dtype.kind != "f" or value.ndim > 1:
        raise site.error(f"input {index} ({what}) must be a 1-D float tensor, found {value.dtype} "
                         f"of shape {list(value.shape)}")
    return [float(v) for v in value.reshape(-1)] or None


def translate_resize(site: Site) -> list[OpNode]:
    rank = site.rank(0)
    shape = site.shape(0)
    legacy = site.op_type == "Upsample" or site.opset < 11
    if legacy:  # Upsample-7 holds its scales as an attribute; later, input 1 does
        scales = site.floats("scales") if site.op_type == "Upsample" and site.opset < 9 else \
            _floats_input(site, 1, "scales")
        sizes = roi = None
    else:
        roi = _floats_input(site, 1, "roi")
        scales = _floats_input(site, 2, "scales")
        sizes = site.constant_ints(3, "sizes") if site.has_input(3) else None
    if (scales is None) == (sizes is None):
        raise site.error("needs exactly one of scales and sizes")
    axes = site.ints("axes", None)
    if axes is None:
        axes = list(range(rank))
    elif any(not -rank <= a < rank for a in axes) or len({a % rank for a in axes}) != len(axes):
        raise site.error(f"axes {axes} must be distinct axes of a rank-{rank} input")
    axes = [a % rank for a in axes]
    given = scales if sizes is None else sizes
    if len(given) != len(axes):
        raise site.error(f"{'scales' if sizes is None else 'sizes'} {given} must give one value per axis {axes}")
    if roi is not None and len(roi) != 2 * len(axes):
        raise site.error(f"roi {roi} must give a start and an end for each axis {axes}")

    mode = site.string("mode", "nearest")
    if mode not in ("nearest", "linear", "cubic"):
        raise site.error(f"mode={mode!r} is not nearest, linear or cubic")
    transform = "asymmetric" if legacy else site.string("coordinate_transformation_mode", "half_pixel")
    if transform not in _TRANSFORMS:
        raise site.error(f"coordinate_transformation_mode={transform!r} is not one of {', '.join(_TRANSFORMS)}")
    rounding = "floor" if legacy else site.string("nearest_mode", "round_prefer_floor")
    crop = transform == "tf_crop_and_resize"
    if crop and roi is None:
        raise site.error("coordinate_transformation_mode='tf_crop_and_resize' needs the roi input")
    antialias = bool(site.int_("antialias", 0)) and mode != "nearest"  # ONNX: antialias does not touch nearest

    policy = site.string("keep_aspect_ratio_policy", "stretch")
    if policy not in ("stretch", "not_larger", "not_smaller"):
        raise site.error(f"keep_aspect_ratio_policy={policy!r} is not stretch, not_larger or not_smaller")
    if sizes is not None and policy != "stretch":
        # One scale for every axis (the largest that fits, or the smallest that covers), sizes rounded half up.
        in_sizes = [site.static_shape(0)[a] for a in axes]
        ratios = [out / size for out, size in zip(sizes, in_sizes)]
        scale = min(ratios) if policy == "not_larger" else max(ratios)
        sizes = [int(scale * size + 0.5) for size in in_sizes]
        scales = [scale] * len(axes)

    kept = []
    for i, axis in enumerate(axes):
        known_size = shape[axis] if shape is not None else None
        unchanged = (sizes[i] == known_size and scales is None) if sizes is not None else scales[i] == 1.0
        if unchanged and (not crop or (roi[i], roi[len(axes) + i]) == (0.0, 1.0)):
            continue  # every sample reads itself
        kept.append(i)
    if not kept:
        return [site.op("Identity", [site.input(0)], site.outputs)]
    params = {"axes": [axes[i] for i in kept], "mode": mode, "coordinate_mode": _TRANSFORMS[transform],
              "nearest_rounding": rounding, "cubic_coeff_a": site.float_("cubic_coeff_a", -0.75),
              "antialias": antialias, "exclude_outside": bool(site.int_("exclude_outside", 0)),
              "extrapolation_value": site.float_("extrapolation_value", 0.0)}
    if sizes is not None:
        params["sizes"] = [sizes[i] for i in kept]
    if scales is not None:
        params["scales"] = [scales[i] for i in kept]
    if crop:
        params["roi"] = [roi[i] for i in kept] + [roi[len(axes) + i] for i in kept]
    return [site.op("Resample", [site.input(0)], site.outputs, params)]


_GRID_MODES = {"linear": "bilinear", "bilinear": "bilinear", "nearest": "nearest", "cubic": "bicubic",
               "bicubic": "bicubic"}


def translate_grid_sample(site: Site) -> list[OpNode]:
    mode = site.string("mode", "linear" if site.opset >= 20 else "bilinear")
    if mode not in _GRID_MODES:
        raise site.error(f"mode={mode!r} is not linear, nearest or cubic")
    padding = site.string("padding_mode", "zeros")
    params = {"mode": _GRID_MODES[mode], "padding_mode": padding, "align_corners": bool(site.int_("align_corners", 0))}
    return [site.op("GridSample", [site.input(0), site.input(1)], site.outputs, params)]


def translate_affine_grid(site: Site) -> list[OpNode]:
    params = {"size": site.constant_ints(1, "size"), "align_corners": bool(site.int_("align_corners", 0))}
    return [site.op("AffineGrid", [site.input(0)], site.outputs, params)]


def translate_roi_align(site: Site) -> list[OpNode]:
    """The canonical RoiAlign; ONNX's half_pixel (the default from opset 16) is torchvision's aligned=True."""
    transform = site.string("coordinate_transformation_mode", "half_pixel" if site.opset >= 16 else "output_half_pixel")
    if transform not in ("half_pixel", "output_half_pixel"):
        raise site.error(f"coordinate_transformation_mode={transform!r} is not half_pixel or output_half_pixel")
    mode = site.string("mode", "avg")
    if mode not in ("avg", "max"):
        raise site.error(f"mode={mode!r} is not avg or max")
    params = {"output_size": [site.int_("output_height", 1), site.int_("output_width", 1)],
              "sampling_ratio": site.int_("sampling_ratio", 0), "spatial_scale": site.float_("spatial_scale", 1.0),
              "mode": mode, "aligned": transform == "half_pixel"}
    return [site.op("RoiAlign", [site.input(0), site.input(1), site.input(2)], site.outputs, params)]


TRANSLATORS = {"Resize": translate_resize, "RoiAlign": translate_roi_align, "Upsample": translate_resize, "GridSample": translate_grid_sample,
               "AffineGrid": translate_affine_grid}
