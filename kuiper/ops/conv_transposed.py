"""Transposed convolution: nn.ConvTranspose1d/2d/3d and their F.* forms.

It is convolution in reverse (col2im): one batched matmul turns each input pixel into an
(out_channels, *kernel) patch, and the patches are added into the output with one strided
slice per kernel tap (a loop over the taps, never over pixels). Nothing is multiplied by the
zeros that the "insert stride-1 zeros and convolve" formulation would create. Weight and
params are read by conv.py's ConvBase.  Like a convolution, it may carry an epilogue (the
elementwise math of its reader, epilogue.py), which a kernel can run as oneDNN post-ops.
"""

from __future__ import annotations

import itertools

from ..errors import ShapeError
from ..ir import dtypes
from ..limits import check_size
from .base import spatial_variants
from .conv import ConvBase, PreparedWeight
from .epilogue import WithEpilogue


def transposed_output_size(size: int, kernel: int, stride: int, pad: int, dilation: int, output_pad: int) -> int:
    return (size - 1) * stride - 2 * pad + dilation * (kernel - 1) + output_pad + 1


class ConvTransposeNd(WithEpilogue, ConvBase):
    """nn.ConvTransposeNd and F.conv_transposeNd (zero padding only, like PyTorch)."""

    def setup(self):
        self.read_epilogue()
        super().setup()
        n = self.spatial
        self.choice_param("padding_mode", ["zeros"], default="zeros")
        self.padding = self.ints_param("padding", n, default=0)
        self.output_padding = self.ints_param("output_padding", n, default=0)
        if any(p < 0 for p in self.padding):
            raise self.error(f"param 'padding' must be non-negative, found {self.padding}")
        for op, s, d in zip(self.output_padding, self.stride, self.dilation):
            if not 0 <= op < max(s, d):
                raise self.error(
                    f"param 'output_padding' {self.output_padding} must be smaller than stride {self.stride} "
                    f"or dilation {self.dilation} (PyTorch's rule)"
                )
        if self.param("output_size", None) is not None:
            raise self.unsupported("output_size", self.param("output_size"), "None (use output_padding)")

    def prepare_weight(self, weight):
        in_channels, group_out = weight.shape[:2]
        if in_channels % self.groups:
            raise self.error(f"groups={self.groups} does not divide in_channels={in_channels}")
        kernel = tuple(weight.shape[2:])
        xp = self.xp
        # (in, out/G, *k) -> (G, in/G, out/G * K) -> (G, out/G * K, in/G): one patch row per (out channel, tap).
        matrix = xp.reshape(weight, (self.groups, in_channels // self.groups, -1))
        matrix = xp.permute_dims(matrix, (0, 2, 1))
        return PreparedWeight(matrix, group_out * self.groups, in_channels, kernel)

    def compute(self, x, weight, bias):
        self.check_input(x, weight.in_channels)
        xp = self.xp
        batch = x.shape[0]
        sizes = tuple(x.shape[2:])
        outs = tuple(
            transposed_output_size(size, k, s, p, d, op)
            for size, k, s, p, d, op in zip(
                sizes, weight.kernel, self.stride, self.padding, self.dilation, self.output_padding
            )
        )
        if any(o < 0 for o in outs):
            raise ShapeError(f"{self.node.describe()}: input {tuple(x.shape)} gives a negative output size {outs}")
        check_size((batch, weight.out_channels) + outs, dtypes.itemsize(x.dtype), self.node.describe())
        if batch == 0:  # an empty batch gives an empty batch (as in PyTorch)
            return xp.zeros((0, weight.out_channels, *outs), dtype=x.dtype)
        columns = xp.matmul(weight.matrix, xp.reshape(x, (batch, self.groups, weight.in_channels // self.groups, -1)))
        # (N, G, out/G * K, P) -> (N, out, *kernel, *input sizes)
        columns = xp.reshape(columns, (batch, weight.out_channels) + weight.kernel + sizes)
        # Accumulate into the uncropped output; 'padding' is then cropped from both ends.
        full = tuple(p + o for p, o in zip(self.padding, outs))
        full = tuple(max(f, (size - 1) * s + d * (k - 1) + 1) for f, size, s, d, k in zip(
            full, sizes, self.stride, self.dilation, weight.kernel))
        result = xp.zeros((batch, weight.out_channels) + full, dtype=columns.dtype)
        for tap in itertools.product(*(range(k) for k in weight.kernel)):
            target = (slice(None), slice(None)) + tuple(
                slice(t * d, t * d + (size - 1) * s + 1, s)
                for t, d, s, size in zip(tap, self.dilation, self.stride, sizes)
            )
            result[target] += columns[(slice(None), slice(None)) + tap + (...,)]
        out = result[(slice(None), slice(None)) + tuple(slice(p, p + o) for p, o in zip(self.padding, outs))]
        if bias is not None:
            out = out + bias
        return out


ConvTranspose1d, ConvTranspose2d, ConvTranspose3d = spatial_variants(ConvTransposeNd, "ConvTranspose{}d")


OPS = [ConvTranspose1d, ConvTranspose2d, ConvTranspose3d]
