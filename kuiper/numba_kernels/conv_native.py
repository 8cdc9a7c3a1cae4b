"""Convolutions of every rank on oneDNN (kuiper.onednn), for the NumPy backend's kernels.

``OneDnnConv`` is mixed into a ConvNd subclass: a float32 conv with a constant weight and zero
padding runs on oneDNN when the library is found and has post-ops for its whole epilogue
(conv_post_ops.py), and hands its output to other oneDNN convs in oneDNN's blocked
layout when the graph allows (kuiper/graph/native_layouts.py).  Anything else (another
dtype, an unbatched or empty input, a shape oneDNN refuses) takes the class's other paths,
which also raise the reference's errors.

nn.Conv1d and nn.Conv3d have no compiled paths of their own, so here they are the reference
op plus oneDNN; nn.Conv2d's class (conv.py) puts oneDNN in front of its compiled paths.
"""

from __future__ import annotations

import numpy as np

from .. import onednn
from ..limits import check_size
from ..ops import conv as reference
from ..thread_limits import requested as model_threads
from . import conv_post_ops

NATIVE_LAYOUT = "onednn"  # the name other ops know oneDNN's blocked layout by (Op.native_layout)
BLOCK_CHANNELS = 16  # oneDNN's widest channel block (AVX-512); a blocked buffer rounds channels up to it


class OneDnnConv:
    """The oneDNN path of a convolution op (mixed in before the op class)."""

    native = None  # the oneDNN convolution (with the epilogue as post-ops), when it runs this conv

    def use_onednn(self) -> bool:
        """Run on oneDNN from now on if it is installed and takes this conv with its whole epilogue
        (as post-ops); whether it does.

        An epilogue oneDNN has no post-ops for stays on the class's other paths, which run it
        while each output plane is in cache: on oneDNN it would take a pass of its own over a
        plain copy of the output, which made the HLO conv net 1.3-1.4x slower when its epilogue
        (a broadcast bias, ReLU against a constant input) still reached the conv unfolded
        (docs/performance.md; kuiper/graph/constant_fold.py now folds both).
        """
        weight = self.static_weight
        library = onednn.library()
        if library is None or weight is None or self.padding_mode != "zeros" or weight.matrix.dtype != np.float32:
            return False
        post_ops = conv_post_ops.post_ops_for(self.epilogue, getattr(self, "epilogue_operand", 0))
        if post_ops is None:
            return False
        raw = np.reshape(weight.matrix, (weight.out_channels, weight.in_channels // self.groups) + weight.kernel)
        self.native = onednn.Convolution(library, raw, self.static_bias_vector, self.stride, self.dilation,
                                         self.static_pads, self.groups, post_ops)
        self.owns_thread_pool = True
        return True

    def native_layout(self) -> str | None:
        """oneDNN's blocked layout, when this conv runs there."""
        return NATIVE_LAYOUT if self.native is not None else None

    def takes_layout(self, position: int, layout: str) -> bool:
        """The input, and the residual of a sum post-op, may arrive in oneDNN's layout."""
        if layout != NATIVE_LAYOUT or self.native is None:
            return False
        return position == 0 or (position == 1 and self.native.adds_residual)

    def forward(self, *inputs):
        if self.native is not None:
            out = self._onednn_forward(inputs)
            if out is not None:
                return out
        # The other paths take plain arrays (and raise the reference's errors on bad inputs).
        return super().forward(*(np.asarray(v) if isinstance(v, onednn.Blocked) else v for v in inputs))

    def _onednn_forward(self, inputs):
        """The conv (and its epilogue) on oneDNN, or None where it does not apply to these inputs."""
        x, extras = inputs[0], inputs[1:]
        out_shape = native_output_shape(self, x)
        if out_shape is None:
            return None
        # The size budget, before anything of that size is made: the padded input (what the reference
        # makes) and the output, with channels rounded up to oneDNN's widest block (its buffers' size).
        padded = tuple(x.shape[:2]) + tuple(size + sum(p) for size, p in zip(x.shape[2:], self.static_pads))
        for shape in (padded, out_shape):
            check_size((shape[0], -(-shape[1] // BLOCK_CHANNELS) * BLOCK_CHANNELS) + tuple(shape[2:]), 4,
                       self.node.describe())
        residual = None
        if self.native.adds_residual:
            residual = extras[0]
            if tuple(residual.shape) != out_shape or residual.dtype != np.float32:
                return None  # a broadcast or another dtype: the other paths take it
        try:
            return self.native(x, model_threads(), residual=residual, blocked=self.output_layout == NATIVE_LAYOUT)
        except onednn.OneDnnError:
            return None  # oneDNN refused this input shape (once: it remembers)


def native_output_shape(op, x) -> tuple[int, ...] | None:
    """The output shape of ``op.native`` (a oneDNN convolution, plain or transposed) on ``x``, or None
    where x is not for oneDNN: not float32, unbatched or empty (the reference takes those, and raises
    its shape errors), or giving an empty output."""
    if not isinstance(x, onednn.Blocked) and not (isinstance(x, np.ndarray) and x.dtype == np.float32):
        return None
    if x.ndim != op.spatial + 2 or x.shape[0] == 0 or x.shape[1] != op.static_weight.in_channels:
        return None
    out_shape = op.native.output_shape(x.shape)
    return out_shape if min(out_shape[2:]) >= 1 else None


class OneDnnOrReference(OneDnnConv):
    """A conv on oneDNN where it applies, else the reference op (mixed in before the op class)."""

    @classmethod
    def takes_epilogue(cls, node) -> bool:
        """The fusion pass may give an nn.* conv (constant weight, one input) its elementwise reader:
        oneDNN runs it as post-ops, the reference after the conv (kuiper/ops/epilogue.py).  In
        small 1-D nets (M5 audio) a separate ReLU per conv was a fifth of the call."""
        return "weight" in node.attrs and len(node.inputs) == 1

    def setup(self):
        super().setup()
        self.kernel_note = ("oneDNN (its layout and kernel chosen per input shape)" if self.use_onednn()
                            else "reference path (im2col + one BLAS GEMM)")


class NativeConv1d(OneDnnOrReference, reference.Conv1d):
    """nn.Conv1d."""


class NativeConv3d(OneDnnOrReference, reference.Conv3d):
    """nn.Conv3d."""


KERNELS = [NativeConv1d, NativeConv3d]
