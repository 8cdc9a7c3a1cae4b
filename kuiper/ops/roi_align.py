"""Region pooling: RoiAlign (torchvision.ops.roi_align, ONNX RoiAlign), average or max over each bin.

Each region of interest (x1, y1, x2, y2 in input coordinates times ``spatial_scale``) of image
``batch_indices[k]`` is cut into ``output_size`` bins; each bin is read at a grid of
``sampling_ratio`` x ``sampling_ratio`` points (0: ceil(bin size) points per axis, so it depends on
the region), bilinearly, and the samples are averaged, or (``mode="max"``) the largest of the four
weighted corner values of every sample is taken, as ONNX defines its max mode.

``aligned``: the regions' corners are shifted by half a pixel (pixel centres at integer + 0.5,
ONNX's half_pixel); without it, a region is at least 1x1 (ONNX's output_half_pixel, torchvision's
aligned=False). A sample more than one pixel outside the input reads 0; one within it reads the
clamped border. Bilinear reading is separable, so each region gathers rows, then columns.
"""

from __future__ import annotations

import math

import numpy as np  # the per-region sample tables, made on the host from the (small) region list

from ..errors import ShapeError
from ..ir import dtypes
from ..limits import check_size
from .base import Op
from .params import Bool, Choice, Float, Int, Ints

MAX_SAMPLES = 1 << 16  # sampling points per bin axis: a region 65536 bins wide is no image


def sample_axis(start: float, length: float, bins: int, grid: int, size: int):
    """(low index, high index, low weight, high weight) per sample along one axis (bins * grid samples)."""
    step = length / bins
    position = start + np.repeat(np.arange(bins) * step, grid) + np.tile((np.arange(grid) + 0.5) * step / grid, bins)
    inside = (position >= -1.0) & (position <= size)
    position = np.maximum(position, 0.0)
    low = np.floor(position).astype(np.int64)
    at_end = low >= size - 1
    low = np.where(at_end, size - 1, low)
    high = np.where(at_end, size - 1, low + 1)
    position = np.where(at_end, low, position)
    high_weight = np.where(inside, position - low, 0.0)
    low_weight = np.where(inside, 1.0 - (position - low), 0.0)
    return np.where(inside, low, 0), np.where(inside, high, 0), low_weight, high_weight


class RoiAlign(Op):
    types = ("RoiAlign",)
    input_names = ("input", "rois", "batch_indices")
    params = (
        Ints("output_size", length=2, low=1),
        Int("sampling_ratio", default=0, low=0, high=MAX_SAMPLES),
        Float("spatial_scale", default=1.0),
        Choice("mode", ("avg", "max"), default="avg"),
        Bool("aligned", default=False),
    )

    def forward(self, *inputs):
        xp = self.xp
        x, rois, batch_indices = self.ordered(inputs)
        if x.ndim != 4 or rois.ndim != 2 or rois.shape[1] != 4 or tuple(batch_indices.shape) != (rois.shape[0],):
            raise ShapeError(f"{self.node.describe()}: expects input (N, C, H, W), rois (K, 4) and batch_indices "
                             f"(K,), found {tuple(x.shape)}, {tuple(rois.shape)} and {tuple(batch_indices.shape)}")
        n, channels, height, width = x.shape
        out_h, out_w = self.output_size
        check_size((rois.shape[0], channels, out_h, out_w), dtypes.itemsize(x.dtype), self.node.describe())
        boxes = np.asarray(self.backend.to_numpy(rois), dtype=np.float64)
        images = np.asarray(self.backend.to_numpy(batch_indices)).astype(np.int64)
        if images.size and (images.min() < 0 or images.max() >= n):
            raise ShapeError(f"{self.node.describe()}: batch_indices must lie in [0, {n}), found {images.tolist()}")
        if not np.isfinite(boxes).all():
            raise ShapeError(f"{self.node.describe()}: rois must be finite")
        results = [self._region(x[int(image), ...], box) for image, box in zip(images, boxes)]
        if not results:
            return xp.zeros((0, channels, out_h, out_w), dtype=x.dtype)
        return xp.stack(results, axis=0)

    def _region(self, image, box):
        """(C, out_h, out_w): one region of one (C, H, W) image."""
        xp = self.xp
        out_h, out_w = self.output_size
        offset = 0.5 if self.aligned else 0.0
        x1, y1, x2, y2 = (float(v) * self.spatial_scale - offset for v in box)
        length_w, length_h = x2 - x1, y2 - y1
        if not self.aligned:
            length_w, length_h = max(length_w, 1.0), max(length_h, 1.0)
        grid_h = self.sampling_ratio or math.ceil(length_h / out_h)
        grid_w = self.sampling_ratio or math.ceil(length_w / out_w)
        if grid_h < 1 or grid_w < 1:
            return xp.zeros((image.shape[0], out_h, out_w), dtype=image.dtype)  # no samples (an empty region)
        if max(grid_h, grid_w) > MAX_SAMPLES:
            raise ShapeError(f"{self.node.describe()}: region {box.tolist()} would read {grid_h}x{grid_w} samples "
                             f"per bin, more than {MAX_SAMPLES}")
        rows = [self.backend.asarray(a) for a in sample_axis(y1, length_h, out_h, grid_h, image.shape[1])]
        cols = [self.backend.asarray(a) for a in sample_axis(x1, length_w, out_w, grid_w, image.shape[2])]
        low_y, high_y, weight_ly, weight_hy = rows
        low_x, high_x, weight_lx, weight_hx = cols
        wy = [xp.astype(w, image.dtype)[:, None] for w in (weight_ly, weight_hy)]
        wx = [xp.astype(w, image.dtype) for w in (weight_lx, weight_hx)]
        if self.mode == "avg":
            picked = xp.take(image, low_y, axis=1) * wy[0] + xp.take(image, high_y, axis=1) * wy[1]
            samples = xp.take(picked, low_x, axis=2) * wx[0] + xp.take(picked, high_x, axis=2) * wx[1]
            samples = xp.reshape(samples, (image.shape[0], out_h, grid_h, out_w, grid_w))
            return xp.sum(samples, axis=(2, 4)) / (grid_h * grid_w)
        corners = None
        for y_index, y_weight in ((low_y, wy[0]), (high_y, wy[1])):
            picked = xp.take(image, y_index, axis=1) * y_weight
            for x_index, x_weight in ((low_x, wx[0]), (high_x, wx[1])):
                value = xp.take(picked, x_index, axis=2) * x_weight
                corners = value if corners is None else xp.maximum(corners, value)
        corners = xp.reshape(corners, (image.shape[0], out_h, grid_h, out_w, grid_w))
        return xp.max(corners, axis=(2, 4))


OPS = [RoiAlign]
