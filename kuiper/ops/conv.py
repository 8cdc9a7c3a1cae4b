"""Convolution: nn.Conv1d/2d/3d and their F.* forms, and the canonical ``Conv`` of every frontend.

Convolution is im2col + one batched matmul: the input is padded (zeros, or the
op's padding_mode), viewed as sliding windows by the backend, gathered into
columns of shape (N, groups, C/groups * prod(kernel), prod(out)), and
multiplied by the weight reshaped to (groups, out/groups, C/groups * prod(kernel)).
The result is already in NCHW order, so no output transpose is needed.

Transposed convolution (conv_transposed.py) shares the base that reads stride, dilation,
groups and the weight.

nn.* ops carry their weight as ``@weight``/``@bias`` and prepare it once at
build time.  pnnx writes F.conv* only when the weight is not a constant (a
graph input, or computed in the graph), so F.* ops get ``$weight`` (and
``$bias``) as inputs and prepare them on every call.

A conv node may carry an ``epilogue``: the math of the elementwise op that was its
only reader (epilogue.py).

im2col is the reference (``ConvNd.compute_im2col``).  nn.Conv2d picks a faster
algorithm at build time where one applies (1x1 as a plain matmul, depthwise as
im2col over contiguous slices with one small matmul per channel, 3x3 stride 1 by
Winograd): the rules and the math are in conv_algorithms.py.  Large batches go
through im2col in chunks of images, so that the columns stay in cache.
"""

from __future__ import annotations

from typing import Any, Callable

from ..errors import ShapeError
from ..ir import dtypes
from ..limits import check_size
from . import conv_algorithms as algorithms
from .base import Op, prod, spatial_variants
from .epilogue import WithEpilogue
from .special_values import is_tame

PADDING_MODES = ("zeros", "reflect", "replicate", "circular")
MAX_SPATIAL_DIMS = 3
MAX_WINDOW_PARAM = 2**31 - 1  # larger strides/dilations are no real model's (and overflow index arithmetic)
IM2COL_CHUNK_BYTES = 8 << 20  # im2col columns per chunk of images (nn.* convs; kept in the L3 cache)


def conv_output_size(size: int, kernel: int, stride: int, pad_total: int, dilation: int) -> int:
    return (size + pad_total - dilation * (kernel - 1) - 1) // stride + 1


class ConvBase(Op):
    """What Conv and ConvTranspose share: stride/dilation/groups, and where weight and bias come from.

    ``spatial`` is the number of spatial dims.  Subclasses turn a weight into
    its matmul form in ``prepare_weight`` (the layouts differ: (out, in/groups,
    *kernel) for convolution, (in, out/groups, *kernel) for transposed).
    """

    spatial = 2
    epilogue_extras = 0  # inputs after the conv's own, for its epilogue (epilogue.py)

    def setup(self):
        # The canonical Conv names its spatial rank; the PNNX classes have theirs in the type.
        self.spatial = self.int_param("spatial_dims", default=type(self).spatial)
        if not 1 <= self.spatial <= MAX_SPATIAL_DIMS:
            raise self.unsupported("spatial_dims", self.spatial, f"1 to {MAX_SPATIAL_DIMS}")
        n = self.spatial
        self.stride = self.ints_param("stride", n, default=1)
        self.dilation = self.ints_param("dilation", n, default=1)
        self.groups = self.int_param("groups", default=1)
        if any(s < 1 for s in self.stride):
            raise self.error(f"param 'stride' must be positive, found {self.stride}")
        if any(d < 1 for d in self.dilation):
            raise self.error(f"param 'dilation' must be positive, found {self.dilation}")
        if self.groups < 1:
            raise self.error(f"param 'groups' must be positive, found {self.groups}")
        if any(v > MAX_WINDOW_PARAM for v in self.stride + self.dilation):
            raise self.error(f"stride {self.stride} and dilation {self.dilation} must be at most {MAX_WINDOW_PARAM}")
        self._find_operands()

    def _find_operands(self):
        """Positions of input/weight/bias among the op's inputs, or the @weight/@bias attrs."""
        node = self.node
        if "weight" in node.attrs:
            # nn.* form: one input, constant weight (and an epilogue's inputs after it).
            self.require_inputs(1 + self.epilogue_extras)
            self.input_pos, self.weight_pos, self.bias_pos = 0, None, None
            weight = node.attrs["weight"]
            self._check_weight_rank(weight.shape)
            if 0 in weight.shape:
                raise self.error(f"weight has a zero-size dimension: shape {tuple(weight.shape)}")
            self.static_weight = self.prepare_weight(self.weight("weight", aligned=True))
            self._check_params_match_weight(self.static_weight)
            bias = self.weight("bias", required=self.bool_param("bias", default="bias" in node.attrs))
            out_channels = self.static_weight.out_channels
            if bias is not None and tuple(bias.shape) != (out_channels,):
                raise self.error(f"bias must have shape ({out_channels},), found {tuple(bias.shape)}")
            self.static_bias = None if bias is None else self.xp.reshape(bias, (1, -1) + (1,) * self.spatial)
            self.static_bias_vector = bias
            return
        # F.* form: the weight (and maybe the bias) arrive as inputs, found by their $keys.
        self.require_inputs(2, 3)
        keys = node.input_keys
        if any(key is not None for key in keys):
            self.input_pos = self.input_index("input", 0)
            self.weight_pos = self.input_index("weight")
            self.bias_pos = self.input_index("bias")
            if self.weight_pos is None:
                raise self.error("needs a weight: an '@weight' attribute or an input bound to '$weight'")
        else:  # no $keys: positional (input, weight[, bias]) like the F.* signature
            self.input_pos, self.weight_pos = 0, 1
            self.bias_pos = 2 if len(node.inputs) == 3 else None
        if self.bias_pos is None and len(node.inputs) == 3:
            raise self.error("has a third input that is not bound to '$bias'")
        if self.bias_pos is None and self.param("bias", None) not in (None, False):
            raise self.unsupported("bias", self.param("bias"), "None, or a bias input '$bias'")
        self.static_weight = None
        self.static_bias = None
        self.static_bias_vector = None

    def _check_params_match_weight(self, weight: "PreparedWeight") -> None:
        """kernel_size, in_channels and out_channels, where the file gives them, must agree with @weight."""
        if self.has_param("kernel_size"):
            kernel = self.ints_param("kernel_size", self.spatial)
            if kernel != weight.kernel:
                raise self.error(f"param 'kernel_size' {kernel} contradicts the weight's kernel {weight.kernel}")
        for key, actual in (("in_channels", weight.in_channels), ("out_channels", weight.out_channels)):
            if self.has_param(key) and self.int_param(key) != actual:
                raise self.error(f"param '{key}'={self.int_param(key)} contradicts the weight, which has {actual}")

    def _check_weight_rank(self, shape):
        if len(shape) != self.spatial + 2:
            raise self.error(f"weight must have rank {self.spatial + 2}, found shape {tuple(shape)}")

    def operands(self, inputs):
        """(x, prepared weight, bias shaped (1, C, 1, ...) or None) for this call."""
        x = inputs[self.input_pos]
        if self.static_weight is not None:
            return x, self.static_weight, self.static_bias
        weight = inputs[self.weight_pos]
        if not self.backend.is_array(weight) or weight.ndim != self.spatial + 2:
            raise ShapeError(f"{self.node.describe()}: weight input must have rank {self.spatial + 2}, "
                             f"found {_shape_of(weight)}")
        prepared = self.prepare_weight(weight)
        bias = None
        if self.bias_pos is not None:
            bias = inputs[self.bias_pos]
            if bias is not None:
                if not self.backend.is_array(bias) or bias.ndim != 1 or bias.shape[0] != prepared.out_channels:
                    raise ShapeError(f"{self.node.describe()}: bias input must have shape ({prepared.out_channels},), "
                                     f"found {_shape_of(bias)}")
                bias = self.xp.reshape(bias, (1, -1) + (1,) * self.spatial)
        return x, prepared, bias

    def prepare_weight(self, weight) -> "PreparedWeight":
        raise NotImplementedError

    def forward(self, *inputs):
        x, weight, bias = self.operands(inputs)
        if self.backend.is_array(x) and x.ndim == self.spatial + 1:  # unbatched (C, *spatial), as PyTorch allows
            return self.compute(x[None], weight, bias)[0]
        return self.compute(x, weight, bias)

    def compute(self, x, weight: "PreparedWeight", bias):
        raise NotImplementedError

    def check_input(self, x, in_channels: int):
        n = self.spatial
        if not self.backend.is_array(x) or x.ndim != n + 2 or x.shape[1] != in_channels:
            raise ShapeError(
                f"{self.node.describe()}: expected input ([N,] {in_channels}, {n} spatial dim(s)), found {_shape_of(x)}"
            )


class PreparedWeight:
    """A weight reshaped for the matmul, with the sizes read from it.

    ``remade_from(remake)`` lets go of the matrix where a kernel keeps the weight in a layout of its own:
    ``matrix`` is then ``remake()``, the same numbers made again at each read (the reference path only)."""

    def __init__(self, matrix, out_channels: int, in_channels: int, kernel: tuple[int, ...]):
        self._matrix = matrix
        self._remake: Callable[[], Any] | None = None
        self.out_channels = out_channels
        self.in_channels = in_channels
        self.kernel = kernel

    @property
    def matrix(self):
        matrix = self._matrix
        return self._remake() if matrix is None else matrix

    def remade_from(self, remake: Callable[[], Any]) -> None:
        self._remake = remake
        self._matrix = None


def _shape_of(value) -> str:
    shape = getattr(value, "shape", None)
    return str(tuple(shape)) if shape is not None else f"a {type(value).__name__}"


class ConvNd(WithEpilogue, ConvBase):
    """nn.ConvNd and F.convNd."""

    fresh_output = True  # every algorithm allocates its result per call

    def setup(self):
        self.read_epilogue()
        super().setup()
        self.padding_mode = self.choice_param("padding_mode", PADDING_MODES, default="zeros")
        self.explicit_pads = self.pad_pairs() if self.has_param("pads") else None
        padding = self.param("padding", 0)
        if padding == "same" and any(s != 1 for s in self.stride):
            raise self.unsupported("padding", "same", "'same' only with stride 1 (as in PyTorch)")
        if padding not in ("same", "valid"):
            padding = self.ints_param("padding", self.spatial, default=0)
            if any(p < 0 for p in padding):
                raise self.error(f"param 'padding' must be non-negative, found {padding}")
        self.padding = padding
        self.algorithm = "im2col"
        if self.static_weight is not None:
            self.static_pads = self.pads_for(self.static_weight.kernel)
            self.algorithm = self.choose_algorithm()

    def choose_algorithm(self) -> str:
        """The fast path for this op's constant weight (see conv_algorithms), prepared once; else im2col."""
        weight = self.static_weight
        if self.spatial != 2:
            return "im2col"
        kernel = weight.kernel
        if self.groups == weight.in_channels == weight.out_channels and self.dilation == (1, 1):
            return "depthwise"  # weight.matrix is (C, 1, kh * kw): one row of taps per channel
        if kernel == (1, 1) and all(p == (0, 0) for p in self.static_pads):
            return "pointwise"
        if self.dilation != (1, 1):
            return "im2col"
        if (
            self.backend.cpu_cache_blocking
            and kernel == (3, 3)
            and self.stride == (1, 1)
            and self.groups == 1
            and min(weight.in_channels, weight.out_channels) >= algorithms.WINOGRAD_MIN_CHANNELS
            # its fractional transforms would round integers
            and dtypes.isdtype(self.xp, weight.matrix.dtype, ("real floating", "complex floating"))
        ):
            self.winograd_weights = {}  # tile size m -> WinogradWeight, made on first use (4x / 1.8x the weight)
            return "winograd"
        return "im2col"

    def pad_pairs(self) -> tuple[tuple[int, int], ...]:
        """The canonical param ``pads``: [before, after] zeros per spatial dim, possibly unequal."""
        pads = self.param("pads")
        well_formed = isinstance(pads, (list, tuple)) and len(pads) == self.spatial and all(
            isinstance(pair, (list, tuple)) and len(pair) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in pair)
            for pair in pads
        )
        if not well_formed:
            raise self.error(f"param 'pads' must be {self.spatial} [before, after] pair(s) of non-negative "
                             f"integers, found {pads!r}")
        return tuple((before, after) for before, after in pads)

    def pads_for(self, kernel) -> tuple[tuple[int, int], ...]:
        """(before, after) per spatial dim; 'same' splits like PyTorch (the extra one on the right)."""
        if self.explicit_pads is not None:
            return self.explicit_pads
        if self.padding == "valid":
            return ((0, 0),) * self.spatial
        if self.padding == "same":
            pads = []
            for k, d in zip(kernel, self.dilation):
                total = d * (k - 1)
                pads.append((total // 2, total - total // 2))
            return tuple(pads)
        return tuple((p, p) for p in self.padding)

    def prepare_weight(self, weight):
        out_channels, group_in = weight.shape[:2]
        if out_channels % self.groups:
            raise self.error(f"groups={self.groups} does not divide out_channels={out_channels}")
        matrix = self.xp.reshape(weight, (self.groups, out_channels // self.groups, -1))
        return PreparedWeight(matrix, out_channels, group_in * self.groups, tuple(weight.shape[2:]))

    def compute(self, x, weight, bias):
        self.check_input(x, weight.in_channels)
        pads = self.static_pads if weight is self.static_weight else self.pads_for(weight.kernel)
        self._check_padding(x.shape, pads)
        outs = [conv_output_size(size, k, s, sum(p), d)
                for size, k, s, p, d in zip(x.shape[2:], weight.kernel, self.stride, pads, self.dilation)]
        if x.shape[0] == 0 and all(o >= 1 for o in outs):
            # An empty batch gives an empty batch (as in PyTorch); the matmul reshapes cannot infer dims of it.
            return self.xp.zeros((0, weight.out_channels, *outs), dtype=x.dtype)
        if self.algorithm != "im2col" and weight is self.static_weight and x.dtype == weight.matrix.dtype:
            out = self.compute_fast(x)
            if out is not None:
                if bias is not None and self.algorithm != "winograd":
                    out += bias
                return out
        columns_bytes = weight.matrix.shape[-1] * self.groups * prod(outs) * dtypes.itemsize(x.dtype)  # per image
        images = max(1, IM2COL_CHUNK_BYTES // max(1, columns_bytes))
        if x.shape[0] <= images or not self.backend.cpu_cache_blocking:
            return self.compute_im2col(x, weight, bias)
        # A large batch in chunks of images, so that each chunk's columns stay in cache.
        out = None
        for start in range(0, x.shape[0], images):
            part = self.compute_im2col(x[start : start + images], weight, bias)
            if out is None:
                out = self.xp.empty((x.shape[0],) + tuple(part.shape[1:]), dtype=part.dtype)
            out[start : start + images, ...] = part
        return out

    def _check_padding(self, shape, pads) -> None:
        """The padded input fits the size budget; reflect pads < size and circular pads <= size (PyTorch's rule)."""
        check_size(tuple(shape[:2]) + tuple(size + sum(p) for size, p in zip(shape[2:], pads)), 8, self.node.describe())
        for axis, (size, p) in enumerate(zip(shape[2:], pads), start=2):
            too_wide = max(p) >= size if self.padding_mode == "reflect" else max(p) > size
            if self.padding_mode in ("reflect", "circular") and too_wide:
                raise ShapeError(f"{self.node.describe()}: {self.padding_mode} padding {p} is too wide for dim "
                                 f"{axis} of size {size} of input {tuple(shape)}")

    def compute_fast(self, x):
        """This op's fast path on x (static weight, same dtype), or None to use im2col for this call."""
        xp = self.xp
        pads = self.static_pads
        if self.algorithm == "pointwise":
            return algorithms.pointwise_conv2d(xp, x, self.static_weight.matrix, self.stride)
        if self.padding_mode != "zeros":
            x = self.backend.pad(x, ((0, 0), (0, 0)) + pads, self.padding_mode)
            pads = ((0, 0), (0, 0))
        if self.algorithm == "depthwise":
            kernel = self.static_weight.kernel
            spans_fit = all(k <= size + sum(p) for k, size, p in zip(kernel, x.shape[2:], pads))
            if not spans_fit:
                return None  # let im2col raise its ShapeError
            return algorithms.depthwise_conv2d(xp, x, self.static_weight.matrix, kernel, self.stride, pads,
                                               chunked=self.backend.cpu_cache_blocking)
        # winograd
        out_h = x.shape[2] + sum(pads[0]) - 2
        out_w = x.shape[3] + sum(pads[1]) - 2
        if out_h < 1 or out_w < 1:
            return None
        m = algorithms.winograd_tile_size(x.shape[0], out_h, out_w)
        if m is None or not is_tame(xp, x):
            return None  # few tiles; or NaN, +-inf or huge values, which the transforms would spread over a tile
        return algorithms.winograd_conv2d(xp, self.backend, x, self.winograd_weight(m), pads, self.static_bias_vector)

    def winograd_weight(self, m: int) -> algorithms.WinogradWeight:
        """The weight transformed for F(m x m, 3 x 3): once per tile size, kept for later calls."""
        def transform():
            weight = self.static_weight
            raw = self.xp.reshape(weight.matrix, (weight.out_channels, weight.in_channels) + weight.kernel)
            return algorithms.WinogradWeight(self.backend, raw, m)

        return self.cached(self.winograd_weights, m, transform)

    def compute_im2col(self, x, weight, bias):
        """The reference path: pad, gather sliding windows into columns, one batched matmul."""
        self.check_input(x, weight.in_channels)
        pads = self.static_pads if weight is self.static_weight else self.pads_for(weight.kernel)
        xp = self.xp
        n = self.spatial
        mode = "constant" if self.padding_mode == "zeros" else self.padding_mode
        x = self.backend.pad(x, ((0, 0), (0, 0)) + pads, mode)
        batch = x.shape[0]
        spatial_axes = tuple(range(2, 2 + n))
        span = tuple(d * (k - 1) + 1 for k, d in zip(weight.kernel, self.dilation))
        if any(s > size for s, size in zip(span, x.shape[2:])):
            raise ShapeError(f"{self.node.describe()}: kernel span {span} is larger than the padded input "
                             f"{tuple(x.shape[2:])}")
        windows = self.backend.sliding_window(x, span, spatial_axes)  # (N, C, *out_full, *span)
        index = (slice(None), slice(None)) + tuple(slice(None, None, s) for s in self.stride) + tuple(
            slice(None, None, d) for d in self.dilation
        )
        windows = windows[index]  # (N, C, *out, *kernel)
        out_shape = tuple(windows.shape[2 : 2 + n])
        # (N, C, *kernel, *out): channels and kernel taps become the contraction axis.
        order = (0, 1) + tuple(range(2 + n, 2 + 2 * n)) + tuple(range(2, 2 + n))
        columns = xp.reshape(xp.permute_dims(windows, order), (batch, self.groups, -1, prod(out_shape)))
        out = xp.matmul(weight.matrix, columns)  # (N, G, out/G, P)
        out = xp.reshape(out, (batch, weight.out_channels) + out_shape)
        if bias is not None:
            if bias.dtype == out.dtype:
                out += bias  # out is a fresh array
            else:
                out = out + bias
        return out


Conv1d, Conv2d, Conv3d = spatial_variants(ConvNd, "Conv{}d")
# The canonical ``Conv`` (params spatial_dims, stride, dilation, groups, pads; weight (out, in/groups,
# *kernel) as @weight or the second input) is served by the class with the 2-D fast paths, so
# compiled kernels that override it serve every frontend; other ranks take the generic path.
Conv2d.types = (*Conv2d.types, "Conv")
OPS = [Conv1d, Conv2d, Conv3d]
