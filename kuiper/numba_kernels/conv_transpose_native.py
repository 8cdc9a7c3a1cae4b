"""nn.ConvTranspose1d/2d/3d on oneDNN's deconvolution, for the NumPy backend.

The reference op (kuiper/ops/conv_transposed.py) runs one batched GEMM and then adds each
kernel tap's slice into the output, a NumPy pass per tap: the two ConvTranspose2d layers of a
small conv autoencoder took 0.42 ms of its 0.59 ms call.  A float32 transposed conv with a
constant weight runs on oneDNN here, taking its input in oneDNN's blocked layout and leaving
its output there when the readers take it, and running its epilogue (a ReLU or sigmoid after
it, a residual sum) as post-ops, like the convolutions (conv_native.py).  Anything else (another
dtype, an unbatched or empty input, a shape oneDNN refuses, an epilogue with no post-ops) takes
the reference, which also raises the errors.
"""

from __future__ import annotations

import numpy as np

from .. import onednn
from ..limits import check_size
from ..ops import conv_transposed as reference
from ..thread_limits import requested as model_threads
from . import conv_post_ops
from .conv_native import BLOCK_CHANNELS, NATIVE_LAYOUT, native_output_shape


class OneDnnConvTranspose:
    """The oneDNN path of a transposed conv op (mixed in before the op class)."""

    native = None  # the oneDNN transposed convolution, when it runs this op

    @classmethod
    def takes_epilogue(cls, node) -> bool:
        """The fusion pass may give an nn.* transposed conv (constant weight, one input) its elementwise
        reader: oneDNN runs it as post-ops, the reference after the op (kuiper/ops/epilogue.py).  The
        conv autoencoder's decoder ends each of its two with a ReLU or a sigmoid."""
        return "weight" in node.attrs and len(node.inputs) == 1

    def setup(self):
        super().setup()
        self.kernel_note = "reference path (one batched GEMM, then a pass per kernel tap)"
        library = onednn.library()
        raw = self.node.attrs.get("weight") if self.static_weight is not None else None
        post_ops = conv_post_ops.post_ops_for(self.epilogue, getattr(self, "epilogue_operand", 0))
        if library is None or raw is None or raw.dtype != np.float32 or post_ops is None:
            return
        groups = self.groups
        in_channels, group_out, *kernel = raw.shape
        # PyTorch's (in, out/G, *k) -> oneDNN's (out, in/G, *k): in and out swap within each group.
        weight = np.reshape(np.swapaxes(np.reshape(raw, (groups, in_channels // groups, group_out, *kernel)), 1, 2),
                            (groups * group_out, in_channels // groups, *kernel))
        self.native = onednn.Convolution(library, weight, self.static_bias_vector, self.stride, self.dilation,
                                         [(p, p) for p in self.padding], groups, post_ops,
                                         output_padding=self.output_padding)
        self.owns_thread_pool = True
        self.kernel_note = "oneDNN deconvolution (its layout and kernel chosen per input shape)"

    def native_layout(self) -> str | None:
        return NATIVE_LAYOUT if self.native is not None else None

    def takes_layout(self, position: int, layout: str) -> bool:
        """The input, and the residual of a sum post-op, may arrive in oneDNN's layout."""
        if layout != NATIVE_LAYOUT or self.native is None:
            return False
        return position == 0 or (position == 1 and self.native.adds_residual)

    def forward(self, *inputs):
        if self.native is not None:
            out = self._onednn_forward(inputs[0], inputs[1:])
            if out is not None:
                return out
        return super().forward(*(np.asarray(v) if isinstance(v, onednn.Blocked) else v for v in inputs))

    def _onednn_forward(self, x, extras):
        """The transposed conv (and its epilogue) on oneDNN, or None where it does not apply to these inputs."""
        out_shape = native_output_shape(self, x)
        if out_shape is None:
            return None
        residual = None
        if self.native.adds_residual:
            residual = extras[0]
            if tuple(residual.shape) != out_shape or residual.dtype != np.float32:
                return None  # a broadcast or another dtype: the reference takes it
        # The size budget before anything is made: the output as the reference names it, then with
        # channels rounded up as a blocked buffer holds them.
        check_size(out_shape, 4, self.node.describe())
        check_size((out_shape[0], -(-out_shape[1] // BLOCK_CHANNELS) * BLOCK_CHANNELS) + tuple(out_shape[2:]), 4,
                   self.node.describe())
        try:
            return self.native(x, model_threads(), residual=residual, blocked=self.output_layout == NATIVE_LAYOUT)
        except onednn.OneDnnError:
            return None  # oneDNN refused this input shape (once: it remembers)


class NativeConvTranspose1d(OneDnnConvTranspose, reference.ConvTranspose1d):
    """nn.ConvTranspose1d."""


class NativeConvTranspose2d(OneDnnConvTranspose, reference.ConvTranspose2d):
    """nn.ConvTranspose2d."""


class NativeConvTranspose3d(OneDnnConvTranspose, reference.ConvTranspose3d):
    """nn.ConvTranspose3d."""


KERNELS = [NativeConvTranspose1d, NativeConvTranspose2d, NativeConvTranspose3d]
