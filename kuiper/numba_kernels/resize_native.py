"""Nearest 2x upsampling (nn.Upsample, F.interpolate) of float32 maps as one compiled pass, in oneDNN's
channel-blocked layout where the convolutions around it keep that.

YOLOv5's neck upsamples conv outputs 2x and joins each with another conv's output.  The reference op
gathers along each axis in turn: two passes and two fresh arrays, from a plain array, so the conv run
before it had to hand over a plain array and the join after it had to convert the upsampled map back
to oneDNN's layout.  Here each input row is written twice into its two output rows, in one pass into
the one output, on the model's threads; a ``Blocked`` input in a channel-blocked layout (``aBcd16b`` or
``aBcd8b``: channels in blocks of 16 or 8, each block's values side by side) is upsampled as it lies,
into the same layout, when the graph says the readers take it (kuiper/graph/native_layouts.py).

Only where the reference's source index is ``dst // 2`` on both axes: mode ``nearest``, 2-D, each
output dim exactly twice the input's (ATen's ``nearest_idx``; see ops/resize.py).  Every value is
copied, none computed: the output equals the reference's bit for bit, NaN and infinities too, and a
Blocked output's norm bound is twice its input's (each value appears four times).  Anything else
(other sizes or modes, other dtypes or ranks, another blocked layout) takes the reference path.
"""

from __future__ import annotations

import numpy as np

from ..output_buffers import output_array
from .. import onednn
from ..limits import check_size
from ..onednn.primitives import Layout
from ..ops.resize import Interpolate, UpsampleNearest
from .conv_native import NATIVE_LAYOUT, blocked_shape
from .runtime import PARALLEL_WORK, KernelModule

kernels = KernelModule("resize_kernels")
FACTOR = 2
# Output elements from which the compiled kernel does the copy (on the model's threads); below, NumPy's
# broadcast copy does it, 2x slower (0.17 against 0.08 ms for YOLOv5's (1, 16, 20, 20) blocks) but with no
# numba start-up: in a model whose other steps need no compiled kernel (YOLOv5 at batch 1) that start-up,
# 0.45-0.6 s once per process, was most of the first call (0.65-0.82 s against 0.22-0.29 before).
COMPILED_ELEMENTS = PARALLEL_WORK
BLOCKED_TAGS = {16: "aBcd16b", 8: "aBcd8b"}  # block width: oneDNN's format tag for (N, C, H, W) in such blocks


class CompiledNearest2x:
    """The compiled path of a nearest 2x upsampling (mixed in before the reference op class)."""

    takes_blocked = False  # whether a Blocked input may come (the graph asks takes_layout)

    def setup(self):
        super().setup()
        if self.mode != "nearest":
            return
        self.kernel_note = "compiled (float32, 2-D, 2x nearest), reference path otherwise"
        doubles = self.scale_factor is None or all(scale == FACTOR for scale in self.scale_factor)
        if onednn.available() and self.size_index is None and doubles:
            self.takes_blocked = True
            self.kernel_note = "compiled (float32, 2-D, 2x nearest; in oneDNN's channel blocks too)"
            self._layouts = {}  # (shape, block) -> oneDNN's layout of that shape in blocks of that width

    def native_layout(self) -> str | None:
        return NATIVE_LAYOUT if self.takes_blocked else None

    def takes_layout(self, position: int, layout: str) -> bool:
        return position == self.data_index and layout == NATIVE_LAYOUT and self.takes_blocked

    def forward(self, *inputs):
        x = inputs[self.data_index]
        if isinstance(x, onednn.Blocked):
            out = self._blocked_forward(x, inputs) if self.output_layout == NATIVE_LAYOUT else None
            if out is not None:
                return out
            x = np.asarray(x)
            inputs = tuple(x if position == self.data_index else value for position, value in enumerate(inputs))
        if (self.mode == "nearest" and isinstance(x, np.ndarray) and x.dtype == np.float32 and x.ndim == 4
                and x.size and self._doubled(x.shape, inputs)):
            out_shape = tuple(x.shape[:2]) + (FACTOR * x.shape[2], FACTOR * x.shape[3])
            check_size(out_shape, 4, self.node.describe())  # before the output is allocated
            out = output_array(out_shape, np.float32)
            _copy_doubled(np.ascontiguousarray(x)[..., None], out[..., None])
            return out
        return super().forward(*inputs)

    def _doubled(self, shape, inputs) -> bool:
        """Whether the output's spatial dims are twice the input's (``shape``)."""
        out_size = tuple(size for size, _ in self.output_plan(tuple(shape[2:]), inputs))
        return out_size == (FACTOR * shape[2], FACTOR * shape[3])

    def _blocked_forward(self, x, inputs):
        """x upsampled in its channel blocks, as a Blocked tensor; None where x is in another layout."""
        if x.ndim != 4 or not x.shape[0] or not x.shape[1] or not self._doubled(x.shape, inputs):
            return None
        block = next((width for width in BLOCKED_TAGS if x.layout == self._layout(x.shape, width)), None)
        if block is None:
            return None
        n, c, h, w = x.shape
        out_shape = (n, c, FACTOR * h, FACTOR * w)
        check_size(blocked_shape(out_shape), 4, self.node.describe())
        blocks = -(-c // block)
        layout = self._layout(out_shape, block)
        out = layout.output()
        if x.buffer.size != n * blocks * h * w * block or out.size != FACTOR * FACTOR * x.buffer.size:
            return None  # a buffer holding more than the blocks (oneDNN pads nothing else in these layouts)
        source = x.buffer.reshape(n, blocks, h, w, block)  # the padded channels of the last block too
        _copy_doubled(source, out.reshape(n, blocks, FACTOR * h, FACTOR * w, block))
        bound = None if x.norm_bound is None else FACTOR * x.norm_bound
        return onednn.Blocked(x.library, out_shape, layout, out, norm_bound=bound)

    def _layout(self, shape, block: int):
        key = (tuple(shape), block)
        layout = self._layouts.get(key)
        if layout is None:
            if len(self._layouts) >= 16:  # a few shapes per model: keep the latest
                self._layouts.pop(next(iter(self._layouts)))
            layout = self._layouts[key] = Layout.tagged(onednn.library(), shape, BLOCKED_TAGS[block])
        return layout


def _copy_doubled(source, target) -> None:
    """target[n, c, i, j, k] = source[n, c, i // 2, j // 2, k] for C-contiguous source (N, C, H, W, B) and
    target (N, C, 2H, 2W, B): the compiled kernel from COMPILED_ELEMENTS, else NumPy's copy of a broadcast
    view (the same values either way: nothing is computed)."""
    if target.size >= COMPILED_ELEMENTS:
        kernels.nearest_2x(target.size, source, target)
        return
    n, c, h, w, b = source.shape
    np.copyto(target.reshape(n, c, h, FACTOR, w, FACTOR, b), source[:, :, :, None, :, None, :])


class CompiledInterpolate(CompiledNearest2x, Interpolate):
    """F.interpolate / nn.Upsample."""


class CompiledUpsampleNearest(CompiledNearest2x, UpsampleNearest):
    """nn.UpsamplingNearest2d."""


KERNELS = [CompiledInterpolate, CompiledUpsampleNearest]
