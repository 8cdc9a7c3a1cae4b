"""nn.ConvTranspose1d/2d/3d on oneDNN's deconvolution, for the NumPy backend.

The reference op (kuiper/ops/conv_transposed.py) runs one batched GEMM and then adds each
kernel tap's slice into the output, a NumPy pass per tap: the two ConvTranspose2d layers of a
small conv autoencoder took 0.42 ms of its 0.59 ms call.  A float32 transposed conv with a
constant weight runs on oneDNN here, taking its input in oneDNN's blocked layout and leaving
its output there when the readers take it, and running its epilogue (a ReLU or sigmoid after
it, a residual sum) as post-ops or after it, like the convolutions (conv_native.OneDnnPath).  One
whose weight is an input (JAX's ``conv_transpose``, weights passed per call) runs there too, its
weight reordered per call (conv_native.WeightInputPath).
Anything else (another dtype, an unbatched or empty input, a shape oneDNN refuses) takes the
reference, which also raises the errors.
"""

from __future__ import annotations

import numpy as np

from .. import onednn
from ..onednn.primitives import copied_in_memory_order
from ..ops import conv_transposed as reference
from . import conv_post_ops
from .conv_native import WeightInputPath, blocked_shape


class OneDnnConvTranspose(WeightInputPath):
    """The oneDNN path of a transposed conv op (mixed in before the op class)."""

    padding_mode = "zeros"  # the only one a transposed conv takes (as in PyTorch: the reference checks)

    @classmethod
    def takes_epilogue(cls, node) -> bool:
        """The fusion pass may give an nn.* transposed conv (constant weight, one input) its elementwise
        reader: oneDNN runs it as post-ops (or after the deconvolution where it has none), the
        reference after the op (kuiper/ops/epilogue.py).  The conv autoencoder's decoder ends each of
        its two with a ReLU or a sigmoid."""
        return "weight" in node.attrs and len(node.inputs) == 1

    def setup(self):
        super().setup()
        self.kernel_note = "reference path (one batched GEMM, then a pass per kernel tap)"
        if self.static_weight is None:
            self.kernel_note = self.weight_input_note()
        library = onednn.library()
        raw = self.node.attrs.get("weight") if self.static_weight is not None else None
        if library is None or raw is None or raw.dtype != np.float32:
            return
        # Without post-ops for the epilogue it runs after oneDNN's deconvolution: the reference, the
        # only other path, would run it after its own, slower, transposed conv.
        post_ops = conv_post_ops.post_ops_for(self.epilogue, getattr(self, "epilogue_operand", 0))
        self.epilogue_after = post_ops is None
        groups = self.groups
        in_channels, group_out, *kernel = raw.shape
        # PyTorch's (in, out/G, *k) -> oneDNN's (out, in/G, *k): in and out swap within each group.
        weight = np.reshape(np.swapaxes(np.reshape(raw, (groups, in_channels // groups, group_out, *kernel)), 1, 2),
                            (groups * group_out, in_channels // groups, *kernel))
        self.native = onednn.Convolution(library, weight, self.static_bias_vector, self.stride, self.dilation,
                                         [(p, p) for p in self.padding], groups, post_ops or (),
                                         output_padding=self.output_padding)
        self.kernel_note = "oneDNN deconvolution (its layout and kernel chosen per input shape)"
        if self.epilogue_after:
            self.kernel_note += "; epilogue after it (no post-ops for it)"

    def _fits(self, x_shape, weight_shape) -> bool:
        """PyTorch's (in, out/G, *k) weight: x brings its in channels."""
        return x_shape[1] == weight_shape[0] and weight_shape[0] % self.groups == 0

    def _onednn_weight(self, weight: np.ndarray) -> np.ndarray:
        """(in, out/G, *k) as oneDNN's (out, in/G, *k): in and out swap within each group (a view for one
        group, which the call's reorder reads from its strides)."""
        groups = self.groups
        if any(stride < 0 for stride in weight.strides):  # JAX's kernel, flipped (a Reverse op's view)
            weight = copied_in_memory_order(weight)
        if groups == 1:
            return np.swapaxes(weight, 0, 1)
        in_channels, group_out, *kernel = weight.shape
        grouped = np.reshape(weight, (groups, in_channels // groups, group_out, *kernel))
        return np.reshape(np.swapaxes(grouped, 1, 2), (groups * group_out, in_channels // groups, *kernel))

    def _native_for_weight(self, library, weight_shape) -> onednn.Convolution:
        bias = None if self.bias_pos is None else np.zeros(weight_shape[0], np.float32)
        return onednn.Convolution(library, np.zeros(weight_shape, np.float32), bias, self.stride, self.dilation,
                                  [(p, p) for p in self.padding], self.groups, self._weight_input_post_ops() or (),
                                  output_padding=self.output_padding)

    def _weight_input_budget(self, in_shape, native) -> tuple[int, ...]:
        """A deconvolution pads nothing: its input, channels blocked."""
        return blocked_shape(in_shape)

    def budget_shapes(self, in_shape, out_shape) -> tuple[tuple[int, ...], ...]:
        """The output as the reference names it, then with channels rounded up as oneDNN's blocked
        buffers hold them."""
        return out_shape, blocked_shape(out_shape)


class NativeConvTranspose1d(OneDnnConvTranspose, reference.ConvTranspose1d):
    """nn.ConvTranspose1d."""


class NativeConvTranspose2d(OneDnnConvTranspose, reference.ConvTranspose2d):
    """nn.ConvTranspose2d."""


class NativeConvTranspose3d(OneDnnConvTranspose, reference.ConvTranspose3d):
    """nn.ConvTranspose3d."""


KERNELS = [NativeConvTranspose1d, NativeConvTranspose2d, NativeConvTranspose3d]
