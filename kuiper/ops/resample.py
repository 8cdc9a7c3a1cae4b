"""Resample: resize chosen axes by a nearest, linear or cubic filter under an explicit coordinate rule.

Interpolate (resize.py) is PyTorch's F.interpolate, with ATen's own tables. Resample says every
choice out loud, so any frontend can name what its resize means (ONNX Resize and Upsample, TF's and
JAX's image resizes are all points in this space):

* which ``axes`` change, to ``sizes`` or by ``scales`` (out = floor(in * scale), times the crop's
  extent with ``crop_and_resize``); given both, the sizes are the output and the scales place samples;
  given sizes only, the scale is out / in;
* ``coordinate_mode``, where output sample x reads in the input (s is the scale, L = s * in the
  resized length as a real number):

  - half_pixel:            (x + 0.5) / s - 0.5
  - half_pixel_symmetric:  the same, shifted by in/2 * (1 - out / L) to keep the centre in place
  - pytorch_half_pixel:    half_pixel, but -0.5 when L == 1
  - align_corners:         x * (in - 1) / (L - 1), 0 when L == 1
  - asymmetric:            x / s
  - crop_and_resize:       the crop [start, end] (normalised, from ``roi``) spread over the output:
                           start * (in - 1) + x * (end - start) * (in - 1) / (L - 1); a position
                           outside [0, in - 1] gives ``extrapolation_value``;

* ``mode``: nearest (``nearest_rounding`` of the position: round_prefer_floor, round_prefer_ceil,
  floor, ceil), linear (a triangle of radius 1) or cubic (Keys' kernel with ``cubic_coeff_a``,
  radius 2);
* ``antialias``: when an axis shrinks (s < 1), linear and cubic stretch their kernel by 1/s and
  normalise its taps, so every input sample is seen;
* ``exclude_outside``: taps that fall outside the input weigh 0 and the others are renormalised;
  otherwise a tap outside reads the nearest edge sample.

Each axis is resampled in turn (the filters are separable) from a table of taps made once per
input size in float64: for every output sample, the input positions it reads and their weights.
"""

from __future__ import annotations

import functools
import math

import numpy as np  # only to build small index/weight tables, moved to the backend once

from ..errors import ShapeError
from ..ir import dtypes
from ..limits import check_size
from .base import Op
from .params import Bool, Choice, Float, Ints

COORDINATE_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                    "crop_and_resize")
NEAREST_ROUNDING = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
MAX_SCALE = 2.0**32
MAX_TAPS = 1 << 12  # an antialiased axis shrunk 1000-fold reads ~4000 taps per sample; beyond is no image


def source_positions(coordinate_mode: str, in_size: int, out_size: int, scale: float,
                     crop: tuple[float, float]) -> np.ndarray:
    """The input position (float64) each of the ``out_size`` output samples reads."""
    x = np.arange(out_size, dtype=np.float64)
    length = scale * in_size  # the resized length as a real number, as the coordinate rules use it
    if coordinate_mode == "asymmetric":
        return x / scale
    if coordinate_mode == "align_corners":
        return np.zeros(out_size) if length == 1 else x * (in_size - 1) / (length - 1)
    if coordinate_mode == "crop_and_resize":
        start, end = crop
        if length == 1:
            return np.full(out_size, (end - start) * (in_size - 1) / 2 + start * (in_size - 1))
        return x * (end - start) * (in_size - 1) / (length - 1) + start * (in_size - 1)
    if coordinate_mode == "pytorch_half_pixel" and length == 1:
        return np.full(out_size, -0.5)
    position = (x + 0.5) / scale - 0.5
    if coordinate_mode == "half_pixel_symmetric":
        position += in_size / 2 * (1 - out_size / length)
    return position


def _round(position: np.ndarray, rounding: str) -> np.ndarray:
    if rounding == "floor":
        return np.floor(position)
    if rounding == "ceil":
        return np.ceil(position)
    if rounding == "round_prefer_ceil":
        return np.floor(position + 0.5)
    return np.ceil(position - 0.5)  # round_prefer_floor: x.5 goes down


def _cubic(distance: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution kernel: 1 at 0, 0 at the other integers, 0 from |d| = 2 on."""
    d = np.abs(distance)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


def _kernel_span(mode: str, antialias: bool, scale: float) -> tuple[float, int]:
    """(the kernel's stretch, the first tap's offset from the base): taps run base + first .. base - first + 1."""
    radius = 1 if mode == "linear" else 2
    stretch = min(scale, 1.0) if antialias else 1.0  # antialiasing widens the kernel by 1/scale on a shrink
    return stretch, math.floor(-radius / stretch) + 1


@functools.lru_cache(maxsize=256)
def resample_table(mode: str, coordinate_mode: str, rounding: str, cubic_coeff_a: float, antialias: bool,
                   exclude_outside: bool, in_size: int, out_size: int, scale: float,
                   crop: tuple[float, float]) -> tuple[tuple[tuple[np.ndarray, np.ndarray | None], ...], np.ndarray | None]:
    """(((index, weight) per tap), outside mask or None) for one axis; weight None for nearest."""
    position = source_positions(coordinate_mode, in_size, out_size, scale, crop)
    outside = None
    if coordinate_mode == "crop_and_resize":
        outside = (position < 0) | (position > in_size - 1)
        position = np.where(outside, 0.0, position)  # any finite place: these samples are overwritten
        outside = outside if outside.any() else None
    if mode == "nearest":
        index = np.clip(_round(position, rounding), 0, in_size - 1).astype(np.int64)
        return ((index, None),), outside
    stretch, first = _kernel_span(mode, antialias, scale)
    base = np.ceil(position) - 1  # position - base lies in (0, 1]
    taps = []
    weights = []
    for offset in range(first, 2 - first):
        index = base + offset
        distance = (index - position) * stretch
        weight = np.clip(1 - np.abs(distance), 0, 1) if mode == "linear" else _cubic(distance, cubic_coeff_a)
        taps.append(index)
        weights.append(weight)
    weights = np.stack(weights)
    taps = np.stack(taps)
    if antialias:
        weights = weights / weights.sum(axis=0)
    if exclude_outside:
        weights = np.where((taps < 0) | (taps > in_size - 1), 0.0, weights)
        weights = weights / weights.sum(axis=0)
    index = np.clip(taps, 0, in_size - 1).astype(np.int64)
    return tuple((index[k], weights[k]) for k in range(len(index)) if weights[k].any()), outside


class Resample(Op):
    """Resize ``axes`` to ``sizes`` or by ``scales`` with the filter and coordinate rule named by the params."""

    types = ("Resample",)
    arity = 1
    params = (
        Ints("axes", low=0),
        Ints("sizes", default=None, length="axes", low=1),
        Choice("mode", ("nearest", "linear", "cubic")),
        Choice("coordinate_mode", COORDINATE_MODES, default="half_pixel"),
        Choice("nearest_rounding", NEAREST_ROUNDING, default="round_prefer_floor"),
        Float("cubic_coeff_a", default=-0.75),
        Bool("antialias", default=False),
        Bool("exclude_outside", default=False),
        Float("extrapolation_value", default=0.0),
    )

    def setup(self):
        if len(set(self.axes)) != len(self.axes):
            raise self.error(f"param 'axes' {list(self.axes)} repeats an axis")
        self.scales = self._floats("scales", positive=True)
        if self.sizes is None and self.scales is None:
            raise self.error("needs 'sizes' or 'scales' (or both)")
        if self.scales is not None and any(s > MAX_SCALE for s in self.scales):
            raise self.error(f"param 'scales' must be at most {MAX_SCALE:g}, found {list(self.scales)}")
        roi = self._floats("roi", positive=False)
        if roi is not None and len(roi) != 2 * len(self.axes):
            raise self.error(f"param 'roi' must give a start and an end per axis (starts, then ends), found {list(roi)}")
        if self.coordinate_mode == "crop_and_resize":
            if roi is None:
                raise self.error("coordinate_mode 'crop_and_resize' needs 'roi'")
            count = len(self.axes)
            self.crops = tuple((roi[i], roi[count + i]) for i in range(count))
        else:
            self.crops = ((0.0, 1.0),) * len(self.axes)
        if self.antialias and self.mode == "nearest":
            raise self.error("antialias applies to the linear and cubic modes, not nearest")
        self._tables = {}

    def _floats(self, key: str, positive: bool) -> tuple[float, ...] | None:
        values = self.param(key, None)
        if values is None:
            return None
        if (not isinstance(values, (list, tuple)) or len(values) != (len(self.axes) if key == "scales" else len(values))
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values)
                or (positive and not all(v > 0 for v in values))):
            what = "positive numbers, one per axis" if positive else "finite numbers"
            raise self.error(f"param '{key}' must be a list of {what}, found {values!r}")
        return tuple(float(v) for v in values)

    def plan(self, shape: tuple[int, ...]) -> list[tuple[int, int, int, float, tuple[float, float]]]:
        """(axis, in size, out size, scale, crop) for each resized axis of an input of ``shape``."""
        plan = []
        for i, axis in enumerate(self.axes):
            if axis >= len(shape):
                raise ShapeError(f"{self.node.describe()}: axis {axis} is out of range for shape {shape}")
            size, crop = shape[axis], self.crops[i]
            if size < 1:
                raise ShapeError(f"{self.node.describe()}: cannot resize an empty axis {axis} of shape {shape}")
            if self.sizes is not None:
                out = self.sizes[i]
                scale = self.scales[i] if self.scales is not None else out / size
            else:
                scale = self.scales[i]
                extent = crop[1] - crop[0] if self.coordinate_mode == "crop_and_resize" else 1.0
                out = math.floor(size * extent * scale)
                if out < 1:
                    raise ShapeError(f"{self.node.describe()}: scale {scale} makes axis {axis} of size {size} empty")
            plan.append((axis, size, out, scale, crop))
        return plan

    def forward(self, x):
        xp = self.xp
        shape = tuple(x.shape)
        plan = self.plan(shape)
        out_shape = list(shape)
        for axis, _, out, _, _ in plan:
            out_shape[axis] = out
        check_size(tuple(out_shape), dtypes.itemsize(x.dtype), self.node.describe())
        exact = xp.isdtype(x.dtype, ("real floating", "complex floating"))
        y = x if exact or self.mode == "nearest" else xp.astype(x, xp.float64)
        # The last axis first, as ONNX's reference nests its loops (it only moves the last rounding bit).
        for axis, size, out, scale, crop in reversed(plan):
            key = (size, out, scale, crop)
            taps, outside = self.cached(self._tables, key, self._table, key)
            shape = [1] * y.ndim
            shape[axis] = out
            result = None
            for index, weight in taps:
                picked = xp.take(y, index, axis=axis)
                if weight is not None:
                    picked = picked * xp.reshape(xp.astype(weight, y.dtype), tuple(shape))
                result = picked if result is None else result + picked
            if outside is not None:
                fill = xp.asarray(self.extrapolation_value, dtype=y.dtype)
                result = xp.where(xp.reshape(outside, tuple(shape)), fill, result)
            y = result
        # Integers filtered in float64 come back truncated, as ONNX's reference casts them.
        return y if y.dtype == x.dtype else xp.astype(y, x.dtype)

    def _table(self, key):
        size, out, scale, crop = key
        if self.mode != "nearest" and 2 - 2 * _kernel_span(self.mode, self.antialias, scale)[1] > MAX_TAPS:
            raise ShapeError(f"{self.node.describe()}: an antialiased resize of {size} samples by {scale} reads "
                             f"more than {MAX_TAPS} taps per sample")
        taps, outside = resample_table(self.mode, self.coordinate_mode, self.nearest_rounding, self.cubic_coeff_a,
                                       self.antialias, self.exclude_outside, size, out, scale, crop)
        backend = self.backend
        return (tuple((backend.asarray(index), None if weight is None else backend.asarray(weight))
                      for index, weight in taps),
                None if outside is None else backend.asarray(outside))


OPS = [Resample]
