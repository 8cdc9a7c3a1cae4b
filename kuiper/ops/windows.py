"""Sliding windows as tensors: F.unfold/nn.Unfold (im2col), F.fold/nn.Fold (col2im), and power-average
pooling F.lp_pool1d/2d / nn.LPPool1d/2d.

unfold turns (N, C, H, W) into (N, C*kh*kw, L): column l holds the window at output
position l (row-major), its rows ordered channel, then kernel row, then kernel column.
fold is its adjoint: it adds each column's window back into a zero (N, C, H, W)
image, so overlapping windows sum.  Inputs without the batch dim are accepted, as in
PyTorch.

lp pooling is PyTorch's formula: avg_pool(x ** p) * (kernel area), then ** (1/p),
with avg_pool's ceil_mode border rule (so a window hanging past the edge is scaled by
its clipped size, not summed).
"""

from __future__ import annotations

import itertools
import math

from ..errors import ShapeError
from .base import Op
from .params import Ints
from .pooling_average import AvgPoolNd


def _windows_out(size: int, kernel: int, stride: int, pad: int, dilation: int) -> int:
    return (size + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1


class WindowOp(Op):
    """Reads kernel_size, dilation, padding and stride (all pairs)."""

    arity = 1
    params = (
        Ints("kernel_size", length=2, low=1, attr="kernel"), Ints("dilation", default=1, length=2, low=1),
        Ints("padding", default=0, length=2, low=0), Ints("stride", default=1, length=2, low=1),
    )

    def grid(self, height: int, width: int) -> tuple[int, int]:
        outs = tuple(_windows_out(size, k, s, p, d) for size, k, s, p, d in
                     zip((height, width), self.kernel, self.stride, self.padding, self.dilation))
        if min(outs) < 1:
            raise ShapeError(f"{self.node.describe()}: a {height}x{width} image with padding {self.padding} is "
                             f"smaller than the dilated kernel {self.kernel} (dilation {self.dilation})")
        return outs

    def tap(self, i: int, j: int, out_h: int, out_w: int) -> tuple:
        """The (rows, columns) slices that kernel element (i, j) visits in the padded image."""
        (dh, dw), (sh, sw) = self.dilation, self.stride
        return (slice(i * dh, i * dh + (out_h - 1) * sh + 1, sh), slice(j * dw, j * dw + (out_w - 1) * sw + 1, sw))


class Unfold(WindowOp):
    types = ("Unfold",)

    def forward(self, x):
        xp = self.xp
        if x.ndim not in (3, 4):
            raise ShapeError(f"{self.node.describe()}: expects (N, C, H, W) or (C, H, W), found {tuple(x.shape)}")
        batched = x if x.ndim == 4 else x[None]
        n, c, h, w = batched.shape
        out_h, out_w = self.grid(h, w)
        (ph, pw), (kh, kw) = self.padding, self.kernel
        padded = self.backend.pad(batched, ((0, 0), (0, 0), (ph, ph), (pw, pw)), "constant", value=0.0)
        taps = [padded[(..., *self.tap(i, j, out_h, out_w))] for i in range(kh) for j in range(kw)]
        columns = xp.reshape(xp.stack(taps, axis=2), (n, c * kh * kw, out_h * out_w))
        return columns if x.ndim == 4 else columns[0]


class Fold(Op):
    """col2im over ``spatial_dims`` spatial dims (2 unless told: nn.Fold's): (N, C*prod(kernel), L) -> (N, C, *output_size).

    ``pads`` ([before, after] per dim) replaces the even ``padding`` where the two sides differ
    (ONNX's Col2Im); the image is built padded and the pads are cropped.
    """

    types = ("Fold",)
    arity = 1

    def setup(self):
        n = self.spatial = self.int_param("spatial_dims", 2)
        if not 1 <= n <= 3:
            raise self.error(f"param 'spatial_dims' must be 1, 2 or 3, found {n}")
        self.output_size = self.ints_param("output_size", n)
        self.kernel = self.ints_param("kernel_size", n)
        self.dilation = self.ints_param("dilation", n, default=1)
        self.stride = self.ints_param("stride", n, default=1)
        padding = self.ints_param("padding", n, default=0)
        pads = self.param("pads", None)
        if pads is None:
            self.pads = tuple((p, p) for p in padding)
        elif (isinstance(pads, (list, tuple)) and len(pads) == n
              and all(isinstance(pair, (list, tuple)) and len(pair) == 2 for pair in pads)
              and all(isinstance(v, int) and not isinstance(v, bool) for pair in pads for v in pair)):
            self.pads = tuple((pair[0], pair[1]) for pair in pads)
        else:
            raise self.error(f"param 'pads' must give [before, after] for {n} dims, found {pads!r}")
        for key, values, low in (("output_size", self.output_size, 1), ("kernel_size", self.kernel, 1),
                                 ("dilation", self.dilation, 1), ("stride", self.stride, 1),
                                 ("pads", [v for pair in self.pads for v in pair], 0)):
            if any(not low <= v <= 1 << 20 for v in values):
                raise self.error(f"param '{key}' must be between {low} and {1 << 20}, found {list(values)}")
        spans = [d * (k - 1) + 1 for k, d in zip(self.kernel, self.dilation)]
        self.blocks = tuple((size + before + after - span) // s + 1 for size, (before, after), span, s in
                            zip(self.output_size, self.pads, spans, self.stride))
        if min(self.blocks) < 1:
            raise self.error(f"an image of {list(self.output_size)} with pads {list(self.pads)} is smaller than the "
                             f"dilated kernel {list(self.kernel)} (dilation {list(self.dilation)})")

    def forward(self, columns):
        xp = self.xp
        if columns.ndim not in (2, 3):
            raise ShapeError(f"{self.node.describe()}: expects (N, C*prod(kernel), L) or (C*prod(kernel), L), "
                             f"found {tuple(columns.shape)}")
        batched = columns if columns.ndim == 3 else columns[None, ...]
        n, rows, length = batched.shape
        area = math.prod(self.kernel)
        if rows % area or length != math.prod(self.blocks):
            raise ShapeError(f"{self.node.describe()}: input {tuple(columns.shape)} needs dim -2 divisible by "
                             f"{area} and dim -1 = {math.prod(self.blocks)} ({'x'.join(map(str, self.blocks))} "
                             f"windows)")
        c = rows // area
        windows = xp.reshape(batched, (n, c, *self.kernel, *self.blocks))
        padded = tuple(size + before + after for size, (before, after) in zip(self.output_size, self.pads))
        image = xp.zeros((n, c, *padded), dtype=columns.dtype)
        for tap in itertools.product(*(range(k) for k in self.kernel)):
            key = (slice(None), slice(None), *(slice(i * d, i * d + (b - 1) * s + 1, s) for i, d, b, s in
                                                zip(tap, self.dilation, self.blocks, self.stride)))
            image[key] = image[key] + windows[(slice(None), slice(None), *tap, ...)]  # one tap's positions are distinct
        crop = tuple(slice(before, before + size) for size, (before, _) in zip(self.output_size, self.pads))
        image = image[(slice(None), slice(None), *crop)]
        return image if columns.ndim == 3 else image[0, ...]


class LPPoolNd(AvgPoolNd):
    def setup(self):
        super().setup()
        if self.has_param("padding") or self.has_param("divisor_override") or self.has_param("count_include_pad"):
            raise self.error("takes no padding, divisor_override or count_include_pad")
        self.norm_type = self.float_param("norm_type")
        if self.norm_type == 0:
            raise self.unsupported("norm_type", self.norm_type, "a non-zero power")
        self.area = math.prod(self.kernel)

    def forward(self, x):
        return (super().forward(x**self.norm_type) * self.area) ** (1.0 / self.norm_type)


class LPPool1d(LPPoolNd):
    types = ("LPPool1d",)
    spatial = 1


class LPPool2d(LPPoolNd):
    types = ("LPPool2d",)
    spatial = 2


OPS = [Unfold, Fold, LPPool1d, LPPool2d]
