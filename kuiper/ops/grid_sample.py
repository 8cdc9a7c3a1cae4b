"""Spatial transformers: F.affine_grid and F.grid_sample, in 2-D (4-D inputs) and 3-D (5-D inputs).

grid_sample reads ``input`` (N, C, [D,] H, W) at the normalised positions of ``grid``
(N, [Do,] Ho, Wo, n), whose last dim is (x, y[, z]) for (W, H[, D]): -1 and +1 are the
centres of the corner pixels with align_corners, their outer edges without.  Modes:
bilinear (trilinear in 3-D), nearest (round half to even) and bicubic (2-D only,
Keys' cubic with A = -0.75).  Padding modes say what lies outside: zeros, border
(clamp the position) or reflection (mirror the position at the edges; at the pixel
centres with align_corners, at the outer edges without).  All of this follows
PyTorch's CPU kernels (aten/src/ATen/native/GridSampler.h), which bicubic reads
tap by tap: padding is applied to each of the 4x4 integer taps, not to the position.

affine_grid maps the base grid of ``size`` (the pixel centres in normalised
coordinates) through theta (N, 2, 3) or (N, 3, 4).  The batch is theta's, so a
model exported at one batch size runs at others.
"""

from __future__ import annotations

import itertools

from ..errors import ShapeError
from .base import Op
from .params import Bool, Choice
from .shape import int_list

_CUBIC_A = -0.75


class GridSample(Op):
    types = ("GridSample",)
    input_names = ("input", "grid")
    params = (
        Choice("mode", ("bilinear", "nearest", "bicubic"), default="bilinear"),
        Choice("padding_mode", ("zeros", "border", "reflection"), default="zeros"),
        Bool("align_corners", default=False),
    )

    def forward(self, *inputs):
        xp = self.xp
        x, grid = self.ordered(inputs)
        n = x.ndim - 2
        if n not in (2, 3) or grid.ndim != x.ndim or grid.shape[-1] != n or grid.shape[0] != x.shape[0]:
            raise ShapeError(f"{self.node.describe()}: expects input (N, C, [D,] H, W) and grid (N, [D,] H, W, {n}) "
                             f"with the same N, found {tuple(x.shape)} and {tuple(grid.shape)}")
        if self.mode == "bicubic" and n != 2:
            raise ShapeError(f"{self.node.describe()}: mode 'bicubic' needs a 4-D input, found {tuple(x.shape)}")
        sizes = tuple(x.shape[2:])  # (D,) H, W
        grid = xp.astype(grid, xp.float64)
        # positions[a]: the input coordinate along spatial axis a; grid's last dim runs W, H, D.
        positions = [self._unnormalize(grid[..., n - 1 - a], sizes[a]) for a in range(n)]
        if self.mode == "bicubic":
            out = self._bicubic(x, positions, sizes)
        else:
            if self.padding_mode != "zeros":
                positions = [self._pad_position(p, size) for p, size in zip(positions, sizes)]
            out = self._nearest(x, positions, sizes) if self.mode == "nearest" else self._linear(x, positions, sizes)
        return xp.astype(out, x.dtype)

    # -- coordinates -----------------------------------------------------------------
    def _unnormalize(self, coordinate, size: int):
        if self.align_corners:
            return (coordinate + 1.0) / 2.0 * (size - 1)
        return ((coordinate + 1.0) * size - 1.0) / 2.0

    def _pad_position(self, position, size: int):
        xp = self.xp
        if self.padding_mode == "reflection":
            if self.align_corners:
                position = self._reflect(position, 0.0, 2.0 * (size - 1))
            else:
                position = self._reflect(position, -1.0, 2.0 * size - 1.0)
        return xp.clip(position, 0.0, float(size - 1))

    def _reflect(self, position, twice_low: float, twice_high: float):
        """Mirror at low and high until inside [low, high]."""
        xp = self.xp
        if twice_low == twice_high:
            return xp.zeros_like(position)
        low, span = twice_low / 2.0, (twice_high - twice_low) / 2.0
        distance = xp.abs(position - low)
        extra = distance % span
        flips = xp.floor(distance / span)
        return xp.where(flips % 2 == 0, extra + low, span - extra + low)

    # -- reading taps ----------------------------------------------------------------
    def _gather(self, x, coordinates, sizes):
        """x at integer coordinates (one int array per spatial axis, shaped like the output grid),
        zero where any coordinate falls outside."""
        xp = self.xp
        batch, channels = x.shape[:2]
        inside = None
        flat = None
        for coordinate, size in zip(coordinates, sizes):
            ok = (coordinate >= 0) & (coordinate < size)
            inside = ok if inside is None else inside & ok
            clipped = xp.clip(coordinate, 0, size - 1)
            flat = clipped if flat is None else flat * size + clipped
        out_shape = tuple(flat.shape[1:])
        index = xp.reshape(flat, (batch, 1, -1))
        index = xp.broadcast_to(index, (batch, channels, index.shape[-1]))
        values = xp.take_along_axis(xp.reshape(x, (batch, channels, -1)), index, axis=2)
        values = xp.reshape(values, (batch, channels, *out_shape))
        return xp.where(inside[:, None, ...], values, xp.zeros_like(values))

    def _nearest(self, x, positions, sizes):
        xp = self.xp
        return self._gather(x, [xp.astype(xp.round(p), xp.int64) for p in positions], sizes)

    def _linear(self, x, positions, sizes):
        xp = self.xp
        lows = [xp.floor(p) for p in positions]
        fractions = [p - low for p, low in zip(positions, lows)]
        lows = [xp.astype(low, xp.int64) for low in lows]
        out = None
        for corner in itertools.product((0, 1), repeat=len(positions)):
            weight = None
            for step, fraction in zip(corner, fractions):
                w = fraction if step else 1.0 - fraction
                weight = w if weight is None else weight * w
            values = self._gather(x, [low + step for low, step in zip(lows, corner)], sizes)
            term = values * weight[:, None, ...]
            out = term if out is None else out + term
        return out

    def _bicubic(self, x, positions, sizes):
        xp = self.xp
        y, xcoord = positions
        (height, width) = sizes
        y0, x0 = xp.floor(y), xp.floor(xcoord)
        wy, wx = _cubic_weights(y - y0), _cubic_weights(xcoord - x0)
        y0, x0 = xp.astype(y0, xp.int64), xp.astype(x0, xp.int64)
        out = None
        for i in range(4):
            for j in range(4):
                row, column = y0 - 1 + i, x0 - 1 + j
                if self.padding_mode != "zeros":
                    row = xp.astype(self._pad_position(xp.astype(row, xp.float64), height), xp.int64)
                    column = xp.astype(self._pad_position(xp.astype(column, xp.float64), width), xp.int64)
                term = self._gather(x, [row, column], sizes) * (wy[i] * wx[j])[:, None, ...]
                out = term if out is None else out + term
        return out


def _cubic_weights(t):
    """Keys' cubic convolution weights of the taps at -1, 0, 1, 2 for a fraction t in [0, 1)."""
    a = _CUBIC_A

    def near(s):  # |s| <= 1
        return ((a + 2.0) * s - (a + 3.0)) * s * s + 1.0

    def far(s):  # 1 < |s| < 2
        return ((a * s - 5.0 * a) * s + 8.0 * a) * s - 4.0 * a

    return far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)


class AffineGrid(Op):
    types = ("AffineGrid",)

    def setup(self):
        self.theta_at = self.input_index("theta", 0)
        self.size_at = self.input_index("size")  # dynamic graphs compute the size: [size(@0,0),3,4,7]
        self.require_inputs(1 if self.size_at is None else 2)
        self.size = None if self.size_at is not None else self._checked_size(self.ints_param("size"))
        self.align_corners = self.bool_param("align_corners", default=False)

    def _checked_size(self, size):
        if len(size) not in (4, 5) or min(size) < 1:
            raise self.error(f"'size' must be (N, C, H, W) or (N, C, D, H, W), found {list(size)}")
        return size

    def _base(self, steps: int):
        """PyTorch's linspace_from_neg_one: the pixel centres in [-1, 1]."""
        xp = self.xp
        if steps <= 1:
            return xp.zeros((steps,), dtype=xp.float64)
        line = xp.linspace(-1.0, 1.0, steps, dtype=xp.float64)
        return line if self.align_corners else line * ((steps - 1) / steps)

    def forward(self, *inputs):
        xp = self.xp
        theta = inputs[self.theta_at]
        size = self.size or self._checked_size(int_list(self, inputs[self.size_at], "input $size"))
        spatial = size[2:]
        n = len(spatial)
        if theta.ndim != 3 or tuple(theta.shape[1:]) != (n, n + 1):
            raise ShapeError(f"{self.node.describe()}: theta must be (N, {n}, {n + 1}) for size {list(size)}, "
                             f"found {tuple(theta.shape)}")
        # Base points (x, y[, z], 1) at every output position, x running along the last axis.
        axes = [self._base(steps) for steps in spatial]  # (D,) H, W
        mesh = xp.meshgrid(*axes, indexing="ij")
        columns = [mesh[n - 1 - a] for a in range(n)] + [xp.ones_like(mesh[0])]
        base = xp.reshape(xp.stack(columns, axis=-1), (-1, n + 1))  # (P, n + 1)
        grid = xp.matmul(base, xp.permute_dims(xp.astype(theta, xp.float64), (0, 2, 1)))  # (N, P, n)
        return xp.astype(xp.reshape(grid, (theta.shape[0], *spatial, n)), theta.dtype)


OPS = [GridSample, AffineGrid]
