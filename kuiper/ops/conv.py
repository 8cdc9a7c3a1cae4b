"""Convolution: nn.Conv1d/2d/3d, computed as im2col + one batched matmul.

The input is padded (zeros, or the op's padding_mode), viewed as sliding
windows by the backend, gathered into columns of shape
(N, groups, C/groups * prod(kernel), prod(out)), and multiplied by the weight
reshaped once at build time to (groups, out/groups, C/groups * prod(kernel)).
The result is already in NCHW order, so no output transpose is needed.
"""

from __future__ import annotations

from ..errors import ShapeError
from .base import Op, prod

PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def conv_output_size(size: int, kernel: int, stride: int, pad_total: int, dilation: int) -> int:
    return (size + pad_total - dilation * (kernel - 1) - 1) // stride + 1


class ConvNd(Op):
    """Shared by nn.Conv1d/2d/3d; ``spatial`` is the number of spatial dims."""

    spatial = 2

    def setup(self):
        n = self.spatial
        self.require_inputs(1)
        self.stride = self.ints_param("stride", n, default=1)
        self.dilation = self.ints_param("dilation", n, default=1)
        self.groups = self.int_param("groups", default=1)
        self.padding_mode = self.choice_param("padding_mode", PADDING_MODES, default="zeros")
        weight = self.node.attrs.get("weight")
        if weight is None:
            raise self.error("missing weight '@weight'")
        if weight.ndim != n + 2:
            raise self.error(f"weight must have rank {n + 2}, found shape {weight.shape}")
        self.out_channels, self.group_in_channels = weight.shape[:2]
        self.kernel = tuple(weight.shape[2:])
        if self.groups < 1 or self.out_channels % self.groups:
            raise self.error(f"groups={self.groups} does not divide out_channels={self.out_channels}")
        self.in_channels = self.group_in_channels * self.groups
        self.pads = self._read_padding()

        xp = self.xp
        w = self.weight("weight")
        self.w_matrix = xp.reshape(w, (self.groups, self.out_channels // self.groups, -1))
        bias = self.weight("bias", required=self.bool_param("bias", default="bias" in self.node.attrs))
        self.bias = None if bias is None else xp.reshape(bias, (1, self.out_channels) + (1,) * n)

    def _read_padding(self) -> tuple[tuple[int, int], ...]:
        """(before, after) per spatial dim; 'same' splits like PyTorch (extra on the right)."""
        value = self.param("padding", 0)
        n = self.spatial
        if value == "valid":
            return ((0, 0),) * n
        if value == "same":
            pads = []
            for k, d in zip(self.kernel, self.dilation):
                total = d * (k - 1)
                pads.append((total // 2, total - total // 2))
            return tuple(pads)
        padding = self.ints_param("padding", n, default=0)
        if any(p < 0 for p in padding):
            raise self.error(f"param 'padding' must be non-negative, found {padding}")
        return tuple((p, p) for p in padding)

    def forward(self, x):
        xp = self.xp
        n = self.spatial
        if x.ndim != n + 2 or x.shape[1] != self.in_channels:
            raise ShapeError(
                f"{self.node.describe()}: expected input (N, {self.in_channels}, {n} spatial dims), found {tuple(x.shape)}"
            )
        mode = "constant" if self.padding_mode == "zeros" else self.padding_mode
        x = self.backend.pad(x, ((0, 0), (0, 0)) + self.pads, mode)
        batch = x.shape[0]
        spatial_axes = tuple(range(2, 2 + n))
        span = tuple(d * (k - 1) + 1 for k, d in zip(self.kernel, self.dilation))
        windows = self.backend.sliding_window(x, span, spatial_axes)  # (N, C, *out_full, *span)
        index = (slice(None), slice(None)) + tuple(slice(None, None, s) for s in self.stride) + tuple(
            slice(None, None, d) for d in self.dilation
        )
        windows = windows[index]  # (N, C, *out, *kernel)
        out_shape = tuple(windows.shape[2 : 2 + n])
        # (N, C, *kernel, *out): channels and kernel taps become the contraction axis.
        order = (0, 1) + tuple(range(2 + n, 2 + 2 * n)) + tuple(range(2, 2 + n))
        columns = xp.reshape(xp.permute_dims(windows, order), (batch, self.groups, -1, prod(out_shape)))
        out = xp.matmul(self.w_matrix, columns)  # (N, G, out/G, P)
        out = xp.reshape(out, (batch, self.out_channels) + out_shape)
        if self.bias is not None:
            out = out + self.bias
        return out


class Conv1d(ConvNd):
    types = ("nn.Conv1d",)
    spatial = 1


class Conv2d(ConvNd):
    types = ("nn.Conv2d",)
    spatial = 2


class Conv3d(ConvNd):
    types = ("nn.Conv3d",)
    spatial = 3


OPS = [Conv1d, Conv2d, Conv3d]
