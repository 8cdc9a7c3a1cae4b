"""Resizing: F.upsample/F.interpolate/nn.Upsample and friends, pixel and channel shuffles.

Interpolation is separable: for each spatial axis we build (once per input
size) the source indices and weights PyTorch's CPU kernels use, then combine
``take(x, index_k, axis) * weight_k`` over the taps.  The tables follow
ATen's UpSample.h formulas in float32 (float64 for float64 inputs):

* output size: ``size``, else ``floor(in * scale_factor)``;
* the scale a source index is computed with: ``1 / scale_factor`` when a
  scale factor is given and ``recompute_scale_factor`` is not set, else
  ``in / out``; with ``align_corners=True`` (linear, cubic) ``(in-1)/(out-1)``;
* nearest: ``min(floor(dst * scale), in - 1)``; nearest-exact:
  ``min(floor((dst + 0.5) * scale), in - 1)``;
* linear: ``src = scale * (dst + 0.5) - 0.5`` clamped at 0 (or ``scale * dst``
  with align_corners), two taps ``floor(src)`` and the next one;
* cubic: the same ``src`` without the clamp, four taps with Keys' kernel (A=-0.75),
  indices clamped to the border;
* linear modes copy an axis whose output size equals its input size unchanged
  (ATen special-cases it, even when a scale factor would move samples);
  2-D nearest (upsample_nearest2d) goes through ATen's ``nearest_idx``, which
  also copies equal sizes and maps ``out == 2 * in`` to ``dst // 2``; 1-D and
  3-D nearest, nearest-exact and cubic have no such shortcut.  (Checked against
  torch 2.x CPU on thousands of random sizes and scale factors.)
"""

from __future__ import annotations

import functools
import math

import numpy as np  # only to build small index/weight tables, moved to the backend once

from ..errors import ShapeError
from ..ir import dtypes
from ..limits import check_size
from .base import Op
from .params import Bool, Int, Ints
from .shape import data_input_index, int_list

NEAREST_MODES = ("nearest", "nearest-exact")
LINEAR_MODES = {"linear": 1, "bilinear": 2, "trilinear": 3}  # mode -> spatial dims it requires
CUBIC_MODES = {"bicubic": 2}
MAX_SCALE = 2.0**32
SUPPORTED_MODES = (*NEAREST_MODES, *LINEAR_MODES, *CUBIC_MODES)
CUBIC_A = -0.75


def source_scale(in_size: int, out_size: int, scale_factor: float | None, align_corners: bool, dtype) -> np.floating:
    """ATen's area_pixel_compute_scale."""
    if align_corners:
        return dtype(in_size - 1) / dtype(out_size - 1) if out_size > 1 else dtype(0)
    if scale_factor is not None and scale_factor > 0:
        return dtype(1.0 / scale_factor)
    return dtype(in_size) / dtype(out_size)


@functools.lru_cache(maxsize=256)
def interpolation_table(mode: str, in_size: int, out_size: int, scale_factor: float | None,
                        align_corners: bool, dtype_name: str,
                        nearest_shortcuts: bool = False) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """((index, weight) per tap) for one axis; index int64 of length out, weight of dtype_name.

    ``nearest_shortcuts``: apply ``nearest_idx``'s special cases (2-D nearest).
    """
    dtype = np.dtype(dtype_name).type
    dst = np.arange(out_size)
    ones = np.ones(out_size, dtype=dtype)
    if out_size == in_size and (mode in LINEAR_MODES or (mode == "nearest" and nearest_shortcuts)):
        return ((dst, ones),)
    if mode == "nearest" and nearest_shortcuts and out_size == 2 * in_size:
        return ((dst // 2, ones),)
    if mode in NEAREST_MODES:
        scale = source_scale(in_size, out_size, scale_factor, False, dtype)
        offset = dtype(0.5) if mode == "nearest-exact" else dtype(0)
        index = np.floor((dst.astype(dtype) + offset) * scale).astype(np.int64)
        return ((np.minimum(index, in_size - 1), ones),)
    scale = source_scale(in_size, out_size, scale_factor, align_corners, dtype)
    if align_corners:
        src = scale * dst.astype(dtype)
    else:
        src = scale * (dst.astype(dtype) + dtype(0.5)) - dtype(0.5)
    if mode in LINEAR_MODES:
        src = np.maximum(src, dtype(0))
        index0 = np.minimum(np.floor(src).astype(np.int64), in_size - 1)
        weight1 = np.clip(src - index0.astype(dtype), dtype(0), dtype(1)).astype(dtype)
        index1 = index0 + (index0 < in_size - 1)
        return ((index0, (dtype(1) - weight1).astype(dtype)), (index1, weight1))
    # cubic
    floor = np.floor(src)
    t = (src - floor).astype(dtype)
    base = floor.astype(np.int64)
    a = dtype(CUBIC_A)

    def near(x):  # |x| <= 1
        return ((a + dtype(2)) * x - (a + dtype(3))) * x * x + dtype(1)

    def far(x):  # 1 < |x| < 2
        return ((a * x - dtype(5) * a) * x + dtype(8) * a) * x - dtype(4) * a

    weights = (far(t + dtype(1)), near(t), near(dtype(1) - t), far(dtype(2) - t))
    return tuple(
        (np.clip(base - 1 + k, 0, in_size - 1), w.astype(dtype)) for k, w in enumerate(weights)
    )


class Interpolate(Op):
    """F.upsample / F.interpolate / nn.Upsample (params: size or scale_factor, mode, align_corners)."""

    types = ("Interpolate",)
    fixed_mode: str | None = None
    fixed_align_corners: bool | None = None
    params = (Ints("size", default=None), Bool("recompute_scale_factor", default=None, attr="recompute"))

    def setup(self):
        self.data_index = data_input_index(self)
        self.size_index = self.input_index("size")
        self.require_inputs(1 if self.size_index is None else 2)
        self.mode = self.fixed_mode or self.choice_param("mode", SUPPORTED_MODES, default="nearest")
        if self.fixed_align_corners is not None:
            self.align_corners = self.fixed_align_corners
        else:
            self.align_corners = self.param("align_corners", None) is not None and self.bool_param("align_corners")
        if self.align_corners and self.mode in NEAREST_MODES:
            raise self.error("align_corners=True only applies to linear and cubic modes")
        if self.param("antialias", False) not in (False, None, 0):
            raise self.unsupported("antialias", self.param("antialias"), [False])
        scale = self.param("scale_factor", None)
        if (self.size is not None or self.size_index is not None) == (scale is not None):
            raise self.error("needs exactly one of 'size' and 'scale_factor'")
        if scale is None:
            self.scale_factor = None
        else:
            values = scale if isinstance(scale, list) else [scale]
            # Bounded so that size * scale stays a finite float (1e308 would overflow to inf).
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= MAX_SCALE for v in values):
                raise self.error(f"param 'scale_factor' must be positive number(s) up to {MAX_SCALE:g}, found {scale!r}")
            self.scale_factor = tuple(float(v) for v in values)
        self._tables = {}

    def _per_axis(self, values, spatial: int, what: str):
        if len(values) == 1:
            return tuple(values) * spatial
        if len(values) != spatial:
            raise ShapeError(f"{self.node.describe()}: {what} {list(values)} does not match {spatial} spatial dim(s)")
        return tuple(values)

    def output_plan(self, in_sizes, inputs):
        """(out size, scale factor used for source indices or None) per spatial axis."""
        spatial = len(in_sizes)
        if self.scale_factor is None:
            size = self.size if self.size_index is None else int_list(self, inputs[self.size_index], "input $size")
            sizes = self._per_axis(size, spatial, "size")
            if any(s < 1 for s in sizes):
                raise ShapeError(f"{self.node.describe()}: output size {list(sizes)} must be positive")
            return [(s, None) for s in sizes]
        scales = self._per_axis(self.scale_factor, spatial, "scale_factor")
        plan = []
        for size, scale in zip(in_sizes, scales):
            out = math.floor(size * scale)
            if out < 1:
                raise ShapeError(f"{self.node.describe()}: scale_factor {scale} makes dim of size {size} empty")
            plan.append((out, None if self.recompute else scale))
        return plan

    def _table(self, key):
        """The (index, weight) taps for one axis, on the backend; built once per key."""
        table = self._tables.get(key)
        if table is None:
            in_size, out_size = key[:2]
            taps = interpolation_table(self.mode, *key)
            if len(taps) == 1 and out_size == in_size and (taps[0][0] == np.arange(out_size)).all():
                table = ((None, None),)  # the identity: skip the axis
            else:
                table = tuple((self.backend.asarray(index), self.backend.asarray(weight)) for index, weight in taps)
            self._tables[key] = table
        return table

    def forward(self, *inputs):
        xp = self.xp
        x = inputs[self.data_index]
        spatial = x.ndim - 2
        needed = LINEAR_MODES.get(self.mode) or CUBIC_MODES.get(self.mode)
        if spatial < 1 or (needed is not None and spatial != needed):
            want = f"rank {needed + 2}" if needed else "rank >= 3"
            raise ShapeError(f"{self.node.describe()}: mode={self.mode} expects a {want} input, found shape {tuple(x.shape)}")
        table_dtype = "float64" if x.dtype == xp.float64 else "float32"
        plan = self.output_plan(tuple(x.shape[2:]), inputs)
        check_size(tuple(x.shape[:2]) + tuple(out for out, _ in plan), dtypes.itemsize(x.dtype), self.node.describe())
        shortcuts = self.mode == "nearest" and spatial == 2  # ATen's nearest_idx (see the module docstring)
        for offset, (in_size, (out_size, scale)) in enumerate(zip(x.shape[2:], plan)):
            axis = 2 + offset
            taps = self._table((in_size, out_size, scale, self.align_corners, table_dtype, shortcuts))
            if len(taps) == 1 and taps[0][0] is None:
                continue  # this axis is copied unchanged
            shape = [1] * x.ndim
            shape[axis] = out_size
            result = None
            for index, weight in taps:
                picked = xp.take(x, index, axis=axis)
                if self.mode not in NEAREST_MODES:
                    picked = picked * xp.astype(xp.reshape(weight, tuple(shape)), x.dtype)
                result = picked if result is None else result + picked
            x = result
        return x


class UpsampleNearest(Interpolate):
    types = ("UpsampleNearest",)
    fixed_mode = "nearest"
    fixed_align_corners = False


class UpsampleBilinear(Interpolate):
    """F.upsample_bilinear and nn.UpsamplingBilinear2d always use align_corners=True."""

    types = ("UpsampleBilinear",)
    fixed_mode = "bilinear"
    fixed_align_corners = True


def regroup(xp, x, lead: int, split: tuple[int, ...], order: tuple[int, ...], merged: tuple[int, ...]):
    """``x`` reshaped to ``lead`` dims then ``split``, the split dims reordered by ``order``, reshaped
    to ``merged`` after the lead dims: the shuffles below are each one such regrouping."""
    lead_shape = tuple(x.shape[:lead])
    x = xp.reshape(x, lead_shape + split)
    x = xp.permute_dims(x, tuple(range(lead)) + tuple(lead + i for i in order))
    return xp.reshape(x, lead_shape + merged)


class PixelShuffle(Op):
    """(*, C*r*r, H, W) -> (*, C, H*r, W*r)."""

    types = ("PixelShuffle",)
    arity = 1
    params = (Int("upscale_factor", low=1),)

    def forward(self, x):
        r = self.upscale_factor
        if x.ndim < 3 or x.shape[-3] % (r * r):
            raise ShapeError(f"{self.node.describe()}: channels of {tuple(x.shape)} are not divisible by {r * r}")
        c, h, w = x.shape[-3:]
        c //= r * r
        return regroup(self.xp, x, x.ndim - 3, (c, r, r, h, w), (0, 3, 1, 4, 2), (c, h * r, w * r))


class PixelUnshuffle(Op):
    """(*, C, H*r, W*r) -> (*, C*r*r, H, W)."""

    types = ("PixelUnshuffle",)
    arity = 1
    params = (Int("downscale_factor", low=1),)

    def forward(self, x):
        r = self.downscale_factor
        if x.ndim < 3 or x.shape[-2] % r or x.shape[-1] % r:
            raise ShapeError(f"{self.node.describe()}: H and W of {tuple(x.shape)} are not divisible by {r}")
        c, h, w = x.shape[-3:]
        return regroup(self.xp, x, x.ndim - 3, (c, h // r, r, w // r, r), (0, 2, 4, 1, 3), (c * r * r, h // r, w // r))


class ChannelShuffle(Op):
    """(N, C, *) -> channels regrouped as (C/g, g) transposed: channel i*g+j <- j*(C/g)+i."""

    types = ("ChannelShuffle",)
    arity = 1
    params = (Int("groups", low=1),)

    def forward(self, x):
        g = self.groups
        if x.ndim < 2 or x.shape[1] % g:
            raise ShapeError(f"{self.node.describe()}: channels of {tuple(x.shape)} are not divisible by groups={g}")
        c, rest = x.shape[1], tuple(x.shape[2:])
        spatial = tuple(range(2, 2 + len(rest)))
        return regroup(self.xp, x, 1, (g, c // g) + rest, (1, 0) + spatial, (c,) + rest)


OPS = [Interpolate, UpsampleNearest, UpsampleBilinear, PixelShuffle, PixelUnshuffle, ChannelShuffle]
