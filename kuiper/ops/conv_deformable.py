"""Deformable convolution (torchvision.ops.deform_conv2d, ONNX DeformConv), 2-D.

Each kernel tap of each output position reads the input at its usual place plus a learned offset
(``offset``: (N, offset_groups * kh * kw * 2, out_h, out_w), a (dy, dx) pair per tap, the input's
channels split into offset_groups that share them), bilinearly, a corner outside the input reading
0; ``mask`` (optional, (N, offset_groups * kh * kw, out_h, out_w)) scales each sample (DCNv2). The
sampled columns (im2col with moved taps) then meet the weight in one grouped matrix product, and
the bias is added.

Inputs in order: input, offset, weight, then bias and mask when ``bias`` and ``mask`` say so.
"""

from __future__ import annotations

import math

import numpy as np  # the undisplaced tap positions: small tables made once per input size

from ..errors import ShapeError
from ..ir import dtypes
from ..limits import check_size
from .base import Op
from .params import Bool, Int, Ints


class DeformConv2d(Op):
    types = ("DeformConv2d",)
    params = (
        Ints("stride", default=1, length=2, low=1),
        Ints("dilation", default=1, length=2, low=1),
        Int("groups", default=1, low=1),
        Int("offset_groups", default=1, low=1),
        Bool("bias", default=False, attr="has_bias"),
        Bool("mask", default=False, attr="has_mask"),
    )

    def setup(self):
        self.require_inputs(3 + self.has_bias + self.has_mask)
        pads = self.param("pads", [[0, 0], [0, 0]])
        if (not isinstance(pads, (list, tuple)) or len(pads) != 2
                or not all(isinstance(pair, (list, tuple)) and len(pair) == 2 for pair in pads)
                or not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 1 << 16
                           for pair in pads for v in pair)):
            raise self.error(f"param 'pads' must give [before, after] non-negative pads for 2 dims, found {pads!r}")
        self.pads = tuple((pair[0], pair[1]) for pair in pads)

    def forward(self, *inputs):
        xp = self.xp
        x, offset, weight = inputs[:3]
        bias = inputs[3] if self.has_bias else None
        mask = inputs[3 + self.has_bias] if self.has_mask else None
        n, channels, height, width = self._check(x, offset, weight, bias, mask)
        out_c, group_c, kh, kw = weight.shape
        out_h, out_w = offset.shape[2:]
        taps, groups = kh * kw, self.offset_groups
        check_size((n, channels, taps, out_h * out_w), dtypes.itemsize(x.dtype), self.node.describe())
        # Sample positions (N, offset groups, taps, out_h * out_w): the tap's place plus its offset.
        offset = xp.reshape(offset, (n, groups, taps, 2, out_h * out_w))
        base_y, base_x = self._base_positions(out_h, out_w, kh, kw)
        y = offset[:, :, :, 0, :] + xp.astype(self.backend.asarray(base_y), x.dtype)
        x_pos = offset[:, :, :, 1, :] + xp.astype(self.backend.asarray(base_x), x.dtype)
        scale = None if mask is None else xp.reshape(mask, (n, groups, taps, out_h * out_w))
        planes = xp.reshape(x, (n, groups, channels // groups, height * width))
        y0, x0 = xp.floor(y), xp.floor(x_pos)
        columns = None
        for dy, dx in ((0, 0), (0, 1), (1, 0), (1, 1)):
            corner_y, corner_x = y0 + dy, x0 + dx
            # Bilinear weight of this corner, 0 where it lies outside the input.
            weight_c = (1 - xp.abs(y - corner_y)) * (1 - xp.abs(x_pos - corner_x))
            inside = (corner_y >= 0) & (corner_y <= height - 1) & (corner_x >= 0) & (corner_x <= width - 1)
            weight_c = xp.where(inside, weight_c, xp.zeros_like(weight_c))
            if scale is not None:
                weight_c = weight_c * scale
            index = (xp.astype(xp.clip(corner_y, 0, height - 1), xp.int64) * width
                     + xp.astype(xp.clip(corner_x, 0, width - 1), xp.int64))
            index = xp.reshape(index, (n, groups, 1, taps * out_h * out_w))
            index = xp.broadcast_to(index, (n, groups, channels // groups, taps * out_h * out_w))
            values = xp.take_along_axis(planes, index, axis=3)
            values = values * xp.reshape(weight_c, (n, groups, 1, taps * out_h * out_w))
            columns = values if columns is None else columns + values
        # (N, C, taps, L) grouped as the convolution's groups meet the weight (groups, out/g, C/g * taps).
        conv_groups = self.groups
        columns = xp.reshape(columns, (n, conv_groups, group_c * taps, out_h * out_w))
        matrix = xp.reshape(weight, (conv_groups, out_c // conv_groups, group_c * taps))
        out = xp.matmul(matrix[None, ...], columns)  # (N, groups, out/g, L)
        out = xp.reshape(out, (n, out_c, out_h, out_w))
        if bias is not None:
            out = out + xp.reshape(bias, (1, out_c, 1, 1))
        return out

    def _base_positions(self, out_h: int, out_w: int, kh: int, kw: int):
        """Each tap's undisplaced input position (taps, out_h * out_w), rows and columns."""
        (sh, sw), (dh, dw), ((top, _), (left, _)) = self.stride, self.dilation, self.pads
        rows = (np.arange(kh) * dh)[:, None, None, None] + (np.arange(out_h) * sh - top)[None, None, :, None]
        cols = (np.arange(kw) * dw)[None, :, None, None] + (np.arange(out_w) * sw - left)[None, None, None, :]
        shape = (kh, kw, out_h, out_w)
        return (np.broadcast_to(rows, shape).reshape(kh * kw, out_h * out_w).astype(np.float64),
                np.broadcast_to(cols, shape).reshape(kh * kw, out_h * out_w).astype(np.float64))

    def _check(self, x, offset, weight, bias, mask):
        describe = self.node.describe()
        if x.ndim != 4 or weight.ndim != 4 or offset.ndim != 4:
            raise ShapeError(f"{describe}: expects input (N, C, H, W), offset (N, 2*G*kh*kw, oh, ow) and weight "
                             f"(O, C/groups, kh, kw), found {tuple(x.shape)}, {tuple(offset.shape)}, "
                             f"{tuple(weight.shape)}")
        n, channels, height, width = x.shape
        out_c, group_c, kh, kw = weight.shape
        groups = self.offset_groups
        if channels != group_c * self.groups or out_c % self.groups or channels % groups:
            raise ShapeError(f"{describe}: {channels} input channels do not fit a weight {tuple(weight.shape)} in "
                             f"{self.groups} group(s) and {groups} offset group(s)")
        (sh, sw), (dh, dw), ((top, bottom), (left, right)) = self.stride, self.dilation, self.pads
        out_h = (height + top + bottom - (dh * (kh - 1) + 1)) // sh + 1
        out_w = (width + left + right - (dw * (kw - 1) + 1)) // sw + 1
        if tuple(offset.shape) != (n, 2 * groups * kh * kw, out_h, out_w):
            raise ShapeError(f"{describe}: offset must be {(n, 2 * groups * kh * kw, out_h, out_w)}, "
                             f"found {tuple(offset.shape)}")
        if mask is not None and tuple(mask.shape) != (n, groups * kh * kw, out_h, out_w):
            raise ShapeError(f"{describe}: mask must be {(n, groups * kh * kw, out_h, out_w)}, found {tuple(mask.shape)}")
        if bias is not None and tuple(bias.shape) != (out_c,):
            raise ShapeError(f"{describe}: bias must be ({out_c},), found {tuple(bias.shape)}")
        if math.prod((height, width)) == 0:
            raise ShapeError(f"{describe}: the input {tuple(x.shape)} is empty")
        return n, channels, height, width


OPS = [DeformConv2d]
