"""nn.Conv2d on the NumPy backend: the reference algorithms with their gathers and transforms compiled.

The op chooses its algorithm exactly as ``kuiper.ops.conv`` does (see
conv_algorithms.py); this subclass runs the non-GEMM parts of four of them with the
multi-threaded loops in conv_kernels.py:

* ``depthwise``: one direct loop over the taps (no columns, no matmul);
* ``winograd``: the tile gather (padding read as zeros) and the output scatter (crop, bias) in
  loops; the transforms and the alpha^2 products stay the same BLAS matmuls as the reference's;
* ``im2col``: the column gather in a loop, the GEMM in BLAS (any stride, dilation, groups);
* ``pointwise`` (1x1): the GEMM in BLAS, then the bias in a compiled loop.

Where oneDNN is installed (kuiper.onednn), it runs every one of these convolutions instead:
its kernels (direct, SIMD-blocked, the ones PyTorch's CPU convolutions use) beat the four
paths below on every layer of ResNet-18, MobileNetV2 and the YOLO fixture
(docs/performance.md); an input shape oneDNN refuses takes them as before.

Each adds the bias and runs the conv's epilogue (kuiper/ops/epilogue.py) per output plane,
in the same compiled loop: the depthwise taps and the Winograd scatter right after
writing a plane, the GEMM paths right after each GEMM.  A weight given as an input (JAX's)
runs on oneDNN, reordered per call (conv_native.OneDnnConv), and takes one-input epilogues only,
as oneDNN post-ops where it has them.  Everything else (another padding mode, a dtype other than
float32) takes the reference path, and an epilogue the kernels cannot take runs after the conv
(``reference.ConvNd``); ``kernel_note`` says which path an op takes and why, for ``kuiper info``.
"""

from __future__ import annotations

import math

import numpy as np

from ..output_buffers import output_array
from .. import onednn
from ..limits import check_size
from ..ops import conv as reference
from ..ops import conv_algorithms as algorithms
from ..ops.special_values import is_tame
from .conv_native import OneDnnConv
from .conv_epilogue import NONE as NO_EPILOGUE
from .conv_epilogue import Epilogue
from .runtime import KernelModule

kernels = KernelModule("conv_kernels")

COMPILED = ("depthwise", "winograd", "im2col", "pointwise")


class CompiledConv2d(OneDnnConv, reference.Conv2d):
    """nn.Conv2d / F.conv2d with compiled loops around BLAS where the weight is constant float32."""

    @classmethod
    def takes_epilogue(cls, node) -> bool:
        """The fusion pass may give this node an epilogue, 2-D: in the nn.* form (constant weight, one
        input), or with the weight (and bias) as positional inputs, as JAX passes them, where it may be
        one-input math only (``unary_epilogues_only``): oneDNN runs a ReLU after it as a post-op, as
        it does for a constant weight (a Flax CNN's 8 x 32 x 28 x 28 ReLU: 27-35 us as a step of its own)."""
        if node.params.get("spatial_dims", 2) != 2:
            return False
        if "weight" in node.attrs:
            return len(node.inputs) == 1
        return len(node.inputs) in (2, 3) and not any(node.input_keys)

    @classmethod
    def unary_epilogues_only(cls, node) -> bool:
        """A conv whose weight is an input takes no epilogue inputs after its own (fusion.py asks)."""
        return "weight" not in node.attrs

    def weights_are_constant(self) -> bool:
        """Whether no input after x is the op's own, or none is the epilogue's (``unary_epilogues_only``):
        either way each input is where the op reads it (kuiper/ops/epilogue.py)."""
        return super().weights_are_constant() or self.epilogue.arity == 1

    def setup(self):
        super().setup()
        self.compiled = None
        weight = self.static_weight
        if weight is None:
            self.kernel_note = self.weight_input_note()
        elif self.padding_mode != "zeros":
            self.kernel_note = f"reference path: padding_mode={self.padding_mode!r}"
        elif weight.matrix.dtype != np.float32:
            self.kernel_note = f"reference path: {weight.matrix.dtype} weight (compiled kernels take float32)"
        elif self.algorithm not in COMPILED:
            self.kernel_note = f"{self.algorithm}: one BLAS GEMM"
        else:
            self.compiled = self.algorithm
            notes = {"winograd": " (im2col on maps with few tiles)", "pointwise": " (one BLAS GEMM, bias compiled)"}
            self.kernel_note = f"{self.algorithm}: compiled{notes.get(self.algorithm, '')}"
            self.bias_vector = (np.zeros(weight.out_channels, np.float32) if self.static_bias_vector is None
                                else np.ascontiguousarray(self.static_bias_vector, dtype=np.float32))
            if self.compiled == "depthwise":
                self.taps = np.ascontiguousarray(np.reshape(weight.matrix, (weight.out_channels,) + weight.kernel))
            if self.use_onednn():
                self.kernel_note = "oneDNN (its layout and kernel chosen per input shape)"
            elif self.epilogue is not None and self.fuses_epilogue_elsewhere():
                self.kernel_note += " (not on oneDNN, which has no post-ops for this epilogue)"
        if self.epilogue is not None:
            members = ", ".join(self.node.params.get("epilogue_members", []))
            where = "after the conv"
            if self.native is not None:
                where = "after the oneDNN conv" if self.epilogue_after else "as oneDNN post-ops"
            elif weight is None and onednn.available() and self._weight_input_post_ops() is not None:
                where = "as oneDNN post-ops (else after the conv)"
            elif self.compiled:
                where = "on each output plane"
            self.kernel_note = f"{self.kernel_note}; epilogue ({members}) {where}"

    def fuses_epilogue_elsewhere(self) -> bool:
        return self.compiled in ("depthwise", "pointwise")

    def compute(self, x, weight, bias):
        out = self._compiled_call(x, weight, None)
        return super().compute(x, weight, bias) if out is None else out

    def compute_with_epilogue(self, x, extras):
        return self._compiled_call(x, self.static_weight, extras)

    def _compiled_call(self, x, weight, extras):
        """The compiled path's result (with the epilogue over ``extras`` unless that is None), or None
        when the reference must run (and raise what it raises)."""
        if (self.compiled is None or weight is not self.static_weight or not isinstance(x, np.ndarray)
                or x.dtype != np.float32 or x.ndim != 4 or x.shape[0] == 0):
            return None  # the reference handles these (empty batches too)
        self.check_input(x, weight.in_channels)
        (top, bottom), (left, right) = self.static_pads
        height, width = x.shape[2] + top + bottom, x.shape[3] + left + right
        spans = [d * (k - 1) + 1 for k, d in zip(weight.kernel, self.dilation)]
        if spans[0] > height or spans[1] > width:
            return None  # the reference raises its ShapeError
        out_h = (height - spans[0]) // self.stride[0] + 1
        out_w = (width - spans[1]) // self.stride[1] + 1
        out_shape = (x.shape[0], weight.out_channels, out_h, out_w)
        epilogue = None
        if extras is not None:
            _, run = self.compiled_epilogue(("float32",) * (len(extras) + 1))
            epilogue = Epilogue.prepare(run, self.epilogue_operand, extras, out_shape)
            if epilogue is None:
                return None  # the caller runs the conv, then the epilogue as the elementwise op did
        # The same budget the reference path checks, before anything of that size is made.
        check_size((x.shape[0], x.shape[1], height, width), x.dtype.itemsize, self.node.describe())
        check_size(out_shape, x.dtype.itemsize, self.node.describe())
        x = np.ascontiguousarray(x)
        if self.compiled == "depthwise":
            out = output_array(out_shape, np.float32)
            arguments = _arguments(epilogue, out)
            work = out.size * (self.taps[0].size + len(arguments[0]))  # taps, then the epilogue's rows
            kernels.depthwise_conv2d(work, x, self.taps, self.bias_vector, self.stride[0], self.stride[1], top, left,
                                     out, arguments)
            return out
        if self.compiled == "pointwise":
            out = algorithms.pointwise_conv2d(np, x, weight.matrix, self.stride)
            self._finish(out, epilogue)
            return out
        if self.compiled == "winograd":
            m = algorithms.winograd_tile_size(x.shape[0], out_h, out_w)
            # NaN, +-inf or huge values go to im2col: Winograd's transforms would spread one over a tile.
            if m is not None and is_tame(np, x):
                return self._winograd(x, m, out_h, out_w, epilogue)
        return self._im2col(x, weight, out_h, out_w, epilogue)

    def _finish(self, out, epilogue, first_image=0):
        """Bias and epilogue over a GEMM's output planes, in one pass."""
        bias = _NO_BIAS if self.static_bias_vector is None else self.bias_vector
        if epilogue is None and bias is _NO_BIAS:
            return
        arguments = _arguments(epilogue, out, first_image)
        kernels.bias_epilogue(out.size * (1 + len(arguments[0])), out, bias, arguments)

    def _winograd(self, x, m, out_h, out_w, epilogue):
        """F(m x m, 3 x 3) as algorithms.winograd_conv2d computes it, in chunks of whole images.

        The tile gather and the output scatter (with the bias and the epilogue) are compiled
        loops; the transforms and the products stay the same BLAS matmuls, so the result is
        the reference's up to where the bias is added.
        """
        prepared = self.winograd_weight(m)
        alpha = m + 2
        (top, _), (left, _) = self.static_pads
        batch, channels = x.shape[:2]
        out_channels = prepared.out_channels
        tiles_h, tiles_w = math.ceil(out_h / m), math.ceil(out_w / m)
        out = output_array((batch, out_channels, out_h, out_w), np.float32)
        chunk = max(1, algorithms.WINOGRAD_CHUNK_TILES // (tiles_h * tiles_w))
        for start in range(0, batch, chunk):
            stop = min(batch, start + chunk)
            tiles = (stop - start) * tiles_h * tiles_w
            data = np.empty((alpha * alpha, channels, tiles), np.float32)
            kernels.winograd_gather(data.size, x[start:stop], alpha, m, top, left, tiles_h, tiles_w, data)
            transformed = np.matmul(prepared.input_transform, np.reshape(data, (alpha * alpha, -1)))
            products = np.matmul(prepared.filters, np.reshape(transformed, (alpha * alpha, channels, tiles)))
            result = np.matmul(prepared.output_transform, np.reshape(products, (alpha * alpha, -1)))
            part = out[start:stop]
            arguments = _arguments(epilogue, part, start)
            kernels.winograd_scatter(result.size * (1 + len(arguments[0])), np.reshape(result, (m * m, out_channels, tiles)),
                                     self.bias_vector, m, tiles_h, tiles_w, part, arguments)
        return out

    def _im2col(self, x, weight, out_h, out_w, epilogue):
        """Columns gathered by the compiled loop, in chunks of images that stay in cache, then one GEMM
        each, its bias and epilogue while the chunk's output is in cache."""
        (top, _), (left, _) = self.static_pads
        batch = x.shape[0]
        rows = weight.matrix.shape[-1] * self.groups
        images = max(1, reference.IM2COL_CHUNK_BYTES // max(1, rows * out_h * out_w * 4))
        columns = np.empty((min(batch, images), rows, out_h * out_w), np.float32)
        (kh, kw), (sh, sw), (dh, dw) = weight.kernel, self.stride, self.dilation
        out = None
        for start in range(0, batch, images):
            stop = min(batch, start + images)
            part = columns[: stop - start]
            kernels.im2col(part.size, x[start:stop], kh, kw, sh, sw, dh, dw, top, left, out_w, part)
            grouped = np.reshape(part, (stop - start, self.groups, rows // self.groups, out_h * out_w))
            products = np.reshape(np.matmul(weight.matrix, grouped), (stop - start, weight.out_channels, out_h, out_w))
            self._finish(products, epilogue, start)
            if stop - start == batch:
                out = products  # one chunk: the GEMM's result is the output
            else:
                if out is None:
                    out = output_array((batch, weight.out_channels, out_h, out_w), np.float32)
                out[start:stop] = products
        return out


_NO_BIAS = np.empty(0, np.float32)


def _arguments(epilogue, out, first_image=0) -> tuple:
    return NO_EPILOGUE if epilogue is None else epilogue.arguments(out, first_image)


KERNELS = [CompiledConv2d]
