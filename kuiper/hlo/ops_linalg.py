"""HLO dot (general dimension numbers) and convolution (dim labels, windows, dilations, groups)."""

from __future__ import annotations

import string
from math import prod

from .ops_base import HloOp

_LETTERS = string.ascii_letters


class Dot(HloOp):
    """Result dims: batch dims, then lhs free dims, then rhs free dims (XLA's DotGeneral)."""

    types = ("hlo.dot",)

    def hlo_setup(self):
        lhs_rank, rhs_rank = self.operand_shape(0).rank, self.operand_shape(1).rank
        lhs_batch, rhs_batch = self.ints("lhs_batch_dims", ()), self.ints("rhs_batch_dims", ())
        lhs_contract, rhs_contract = self.ints("lhs_contracting_dims", ()), self.ints("rhs_contracting_dims", ())
        if len(lhs_batch) != len(rhs_batch) or len(lhs_contract) != len(rhs_contract):
            raise self.error("lhs and rhs must have as many batch dims, and as many contracting dims")
        letters = iter(_LETTERS)
        lhs = [next(letters) for _ in range(lhs_rank)]
        rhs = [next(letters) for _ in range(rhs_rank)]
        for left, right in zip(lhs_batch + lhs_contract, rhs_batch + rhs_contract):
            if not (0 <= left < lhs_rank and 0 <= right < rhs_rank):
                raise self.error(f"dimension numbers out of range for ranks {lhs_rank} and {rhs_rank}")
            rhs[right] = lhs[left]
        free_lhs = [lhs[d] for d in range(lhs_rank) if d not in lhs_batch and d not in lhs_contract]
        free_rhs = [rhs[d] for d in range(rhs_rank) if d not in rhs_batch and d not in rhs_contract]
        out = [lhs[d] for d in lhs_batch] + free_lhs + free_rhs
        self.equation = f"{''.join(lhs)},{''.join(rhs)}->{''.join(out)}"

    def forward(self, lhs, rhs):
        return self.xp.asarray(self.backend.einsum(self.equation, lhs, rhs)).astype(self.dtype())


def dilate(xp, x, axes, factors):
    """Insert ``factor - 1`` zeros between neighbours along each axis."""
    if all(f == 1 for f in factors):
        return x
    shape = list(x.shape)
    index = [slice(None)] * x.ndim
    for axis, factor in zip(axes, factors):
        shape[axis] = (shape[axis] - 1) * factor + 1 if shape[axis] else 0
        index[axis] = slice(None, None, factor)
    result = xp.zeros(tuple(shape), dtype=x.dtype)
    result[tuple(index)] = x
    return result


def pad_or_crop(backend, x, axes, pads):
    """Pad with zeros (positive amounts) or crop (negative amounts) along ``axes``."""
    widths = [(0, 0)] * x.ndim
    crop = [slice(None)] * x.ndim
    for axis, (low, high) in zip(axes, pads):
        widths[axis] = (max(low, 0), max(high, 0))
        crop[axis] = slice(max(-low, 0), x.shape[axis] + max(low, 0) + max(high, 0) - max(-high, 0))
    if any(w != (0, 0) for w in widths):
        x = backend.pad(x, widths)
    return x[tuple(crop)]


def parse_window(op: HloOp, rank: int) -> dict:
    """``window={size=3x3 stride=2x2 pad=1_1x0_0 lhs_dilate=1x1 rhs_dilate=2x2 rhs_reversal=0x1}``."""
    window = op.attribute("window", {})
    if not isinstance(window, dict):
        raise op.error(f"window={window!r} is not a window description")

    def numbers(key, default):
        text = window.get(key)
        if text is None:
            return [default] * rank
        parts = str(text).split("x")
        if len(parts) != rank:
            raise op.error(f"window {key}={text} has {len(parts)} dims, expected {rank}")
        try:
            return [tuple(int(v) for v in p.split("_")) if "_" in p else int(p) for p in parts]
        except ValueError:
            raise op.error(f"window {key}={text} is not numbers joined by 'x'") from None

    return {
        "size": numbers("size", 1),
        "stride": numbers("stride", 1),
        "pad": numbers("pad", (0, 0)),
        "lhs_dilate": numbers("lhs_dilate", 1),
        "rhs_dilate": numbers("rhs_dilate", 1),
        "rhs_reversal": numbers("rhs_reversal", 0),
    }


class Convolution(HloOp):
    types = ("hlo.convolution",)

    def hlo_setup(self):
        labels = self.word("dim_labels", "")
        try:
            operands, out = labels.split("->")
            lhs, rhs = operands.split("_")
        except ValueError:
            raise self.error(f"dim_labels={labels!r} is not like b01f_01io->b01f") from None
        spatial = len(lhs) - 2
        digits = [str(d) for d in range(spatial)]
        if sorted(lhs) != sorted(["b", "f", *digits]) or sorted(rhs) != sorted(["i", "o", *digits]) \
                or sorted(out) != sorted(["b", "f", *digits]):
            raise self.error(f"dim_labels={labels!r} must name b, f / i, o and spatial dims 0..{spatial - 1}")
        self.lhs_order = [lhs.index(c) for c in ["b", "f", *digits]]
        self.rhs_order = [rhs.index(c) for c in ["o", "i", *digits]]
        position = {c: i for i, c in enumerate(["b", "f", *digits])}
        self.out_order = [position[c] for c in out]
        self.spatial = spatial
        self.window = parse_window(self, spatial)
        self.groups = self.integer("feature_group_count", 1)
        self.batch_groups = self.integer("batch_group_count", 1)
        letters = _LETTERS[: 2 * spatial]
        self.out_letters, self.kernel_letters = letters[:spatial], letters[spatial:]

    def forward(self, lhs, rhs):
        xp, backend, window = self.xp, self.backend, self.window
        spatial_axes = list(range(2, 2 + self.spatial))
        lhs = xp.permute_dims(lhs, self.lhs_order)
        rhs = xp.permute_dims(rhs, self.rhs_order)
        reversed_axes = tuple(a for a, r in zip(spatial_axes, window["rhs_reversal"]) if r)
        if reversed_axes:
            rhs = xp.flip(rhs, axis=reversed_axes)
        lhs = dilate(xp, lhs, spatial_axes, window["lhs_dilate"])
        lhs = pad_or_crop(backend, lhs, spatial_axes, window["pad"])
        rhs = dilate(xp, rhs, spatial_axes, window["rhs_dilate"])
        kernel = rhs.shape[2:]
        windows = backend.sliding_window(lhs, kernel, spatial_axes)
        strides = tuple(slice(None, None, s) for s in window["stride"])
        windows = windows[(slice(None), slice(None), *strides)]
        batch, channels = lhs.shape[:2]
        out_channels, in_channels = rhs.shape[:2]
        out_spatial = windows.shape[2 : 2 + self.spatial]
        o, k = self.out_letters, self.kernel_letters
        if self.batch_groups > 1:
            g = self.batch_groups
            windows = xp.reshape(windows, (g, batch // g, channels, *out_spatial, *kernel))
            rhs = xp.reshape(rhs, (g, out_channels // g, in_channels, *kernel))
            result = backend.einsum(f"GBC{o}{k},GNC{k}->BGN{o}", windows, rhs)
            result = xp.reshape(result, (batch // g, out_channels, *out_spatial))
        else:  # im2col: one matrix product per feature group, through BLAS
            g = self.groups
            spatial_count = len(out_spatial)
            # (B, C, O..., K...) -> (B, O..., C, K...) -> rows (B*O) of columns (G, C/G * K)
            order = (0, *range(2, 2 + spatial_count), 1, *range(2 + spatial_count, windows.ndim))
            columns = xp.reshape(xp.permute_dims(windows, order), (-1, g, (channels // g) * prod(kernel)))
            matrix = xp.reshape(rhs, (g, out_channels // g, -1))  # (G, N/G, C/G*K)
            # 2-D products (BLAS GEMM); NumPy's stacked matmul does not reach BLAS for these.
            result = xp.stack([xp.matmul(columns[:, i, :], matrix[i].T) for i in range(g)])  # (G, B*O, N/G)
            result = xp.reshape(result, (g, batch, *out_spatial, out_channels // g))
            result = xp.permute_dims(result, (1, 0, spatial_count + 2, *range(2, 2 + spatial_count)))
            result = xp.reshape(result, (batch, out_channels, *out_spatial))
        return xp.asarray(xp.permute_dims(result, self.out_order)).astype(self.dtype())


OPS = [Dot, Convolution]
