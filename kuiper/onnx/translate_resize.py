"""ONNX Resize/Upsample, GridSample and AffineGrid -> the canonical Interpolate, GridSample and AffineGrid ops.

The canonical ops follow PyTorch's sampling rules, which are some of ONNX's: Resize translates the
combinations that coincide and refuses the others by name.

* ``nearest`` with ``asymmetric`` coordinates and ``floor`` rounding is PyTorch's ``nearest``;
  with ``half_pixel`` and ``round_prefer_ceil`` it is ``nearest-exact``.
* ``linear`` with ``half_pixel`` or ``pytorch_half_pixel`` is ``(bi/tri)linear``, align_corners=False;
  with ``align_corners``, align_corners=True.
* ``cubic`` (on 2 spatial dims) with cubic_coeff_a = -0.75 and exclude_outside = 0 is ``bicubic``,
  with the same two coordinate rules.
"""

from __future__ import annotations

from ..model_ir import OpNode
from .site import Site

_LINEAR = {1: "linear", 2: "bilinear", 3: "trilinear"}


def _mode(site: Site, spatial: int) -> tuple[str, bool]:
    """(canonical mode, align_corners) for the node's mode and coordinate rules, or an error naming them."""
    mode = site.string("mode", "nearest")
    transform = site.string("coordinate_transformation_mode", "half_pixel" if site.opset >= 11 else "asymmetric")
    if mode == "nearest":
        rounding = site.string("nearest_mode", "round_prefer_floor")
        if transform == "asymmetric" and rounding == "floor":
            return "nearest", False
        if transform in ("half_pixel", "pytorch_half_pixel") and rounding == "round_prefer_ceil":
            return "nearest-exact", False
        raise site.error(f"nearest with coordinate_transformation_mode={transform!r} and nearest_mode="
                         f"{rounding!r} is not supported (asymmetric+floor and half_pixel+round_prefer_ceil are)")
    if mode in ("linear", "cubic"):
        if mode == "cubic" and (spatial != 2 or site.float_("cubic_coeff_a", -0.75) != -0.75
                                or site.int_("exclude_outside", 0)):
            raise site.error("cubic is supported on 2 spatial dims with cubic_coeff_a=-0.75 and exclude_outside=0")
        if transform not in ("half_pixel", "pytorch_half_pixel", "align_corners"):
            raise site.error(f"coordinate_transformation_mode={transform!r} is not supported for {mode} "
                             "(half_pixel, pytorch_half_pixel and align_corners are)")
        if spatial not in _LINEAR:
            raise site.error(f"{mode} over {spatial} spatial dims is not supported")
        return ("bicubic" if mode == "cubic" else _LINEAR[spatial]), transform == "align_corners"
    raise site.error(f"mode={mode!r} is not nearest, linear or cubic")


def translate_resize(site: Site) -> list[OpNode]:
    shape = site.static_shape(0)
    rank = len(shape)
    if site.int_("antialias", 0):
        raise site.error("antialias=1 is not supported")
    if site.string("keep_aspect_ratio_policy", "stretch") != "stretch":
        raise site.error("keep_aspect_ratio_policy other than stretch is not supported")
    if site.ints("axes", None) is not None:
        raise site.error("the axes attribute is not supported")
    if site.op_type == "Upsample" or site.opset < 11:
        scales_at, sizes_at = (1 if site.op_type == "Upsample" or site.opset >= 9 else None), None
    else:
        scales_at, sizes_at = 2, 3
    params = {}
    if sizes_at is not None and site.has_input(sizes_at):
        sizes = site.constant_ints(sizes_at, "sizes")
        if len(sizes) != rank or list(sizes[:2]) != list(shape[:2]):
            raise site.error(f"sizes {sizes} must keep the batch and channel dims of {list(shape)}")
        params["size"] = list(sizes[2:])
    else:
        scales = [float(v) for v in (site.constant(scales_at, "scales").reshape(-1) if scales_at is not None
                                     else site.floats("scales"))]
        if len(scales) != rank or scales[:2] != [1.0, 1.0]:
            raise site.error(f"scales {scales} must be 1 for the batch and channel dims")
        params["scale_factor"] = scales[2:]
        params["recompute_scale_factor"] = False
    mode, align_corners = _mode(site, rank - 2)
    transform = site.string("coordinate_transformation_mode", "")
    if align_corners and "scale_factor" in params:
        raise site.error("align_corners with scales (rather than sizes) is not supported")
    if transform == "pytorch_half_pixel" and mode not in ("nearest", "nearest-exact"):
        outputs = params.get("size") or [int(size * scale) for size, scale in zip(shape[2:], params["scale_factor"])]
        if 1 in outputs:  # pytorch_half_pixel samples position 0 for an output of one element, half_pixel does not
            raise site.error("pytorch_half_pixel with an output dim of size 1 is not supported")
    params.update(mode=mode, align_corners=align_corners)
    return [site.op("Interpolate", [site.input(0)], site.outputs, params)]


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


TRANSLATORS = {"Resize": translate_resize, "Upsample": translate_resize, "GridSample": translate_grid_sample,
               "AffineGrid": translate_affine_grid}
