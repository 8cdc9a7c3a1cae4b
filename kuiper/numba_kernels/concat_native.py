"""torch.cat along channels on oneDNN, so that joined conv branches stay in oneDNN's layout.

The op is the reference ``Concat`` (kuiper.ops.concat.Cat) where oneDNN is absent or the
inputs are anything but float32 tensors of one rank joined along dim 1: then Blocked inputs
are made plain first, and the reference raises its errors.
"""

from __future__ import annotations

import math

import numpy as np

from .. import onednn
from ..limits import check_size
from ..ops.concat import Cat
from ..thread_limits import requested as model_threads
from .conv_native import BLOCK_CHANNELS, NATIVE_LAYOUT

CHANNELS = 1  # the dim joined here (PNNX writes torch.cat(..., dim=1) of NCHW tensors so)


class NativeConcat(Cat):
    """Concat along channels of float32 tensors, in oneDNN's layout where the graph keeps it."""

    def setup(self):
        super().setup()
        library = onednn.library()
        self.native = onednn.Concatenation(library, CHANNELS) if library is not None and self.dim == CHANNELS else None
        self.kernel_note = "oneDNN (joins tensors in its blocked layout)" if self.native else "reference path"

    def native_layout(self) -> str | None:
        return NATIVE_LAYOUT if self.native is not None else None

    def takes_layout(self, position: int, layout: str) -> bool:
        return layout == NATIVE_LAYOUT and self.native is not None

    def forward(self, *tensors):
        in_onednn_layout = self.output_layout == NATIVE_LAYOUT or any(isinstance(t, onednn.Blocked) for t in tensors)
        if self.native is not None and in_onednn_layout and self._takes(tensors):
            out_shape = list(tensors[0].shape)
            out_shape[CHANNELS] = sum(t.shape[CHANNELS] for t in tensors)
            # The size budget, with channels rounded up as a blocked buffer holds them.
            out_shape[CHANNELS] = -(-out_shape[CHANNELS] // BLOCK_CHANNELS) * BLOCK_CHANNELS
            check_size(out_shape, 4, self.node.describe())
            try:
                return self.native(list(tensors), model_threads(), blocked=self.output_layout == NATIVE_LAYOUT)
            except onednn.OneDnnError:
                pass  # oneDNN refused these inputs: the reference joins them
        return super().forward(*(np.asarray(t) if isinstance(t, onednn.Blocked) else t for t in tensors))

    def bound_through(self, in_shapes, norms) -> float:
        """The output's norm from its inputs': the square root of the sum of their squares (no guard here; a
        run of layers as one sequence carries it on: conv_sequence.py)."""
        return math.sqrt(sum(norm * norm for norm in norms))

    def emit_call(self, builder, inputs, threads: int, blocked: bool):
        """Add this op's oneDNN call to a sequence (``Concatenation.emit``), where ``forward`` would make it:
        (value, layout, shape) of the output, or None."""
        shapes = [tuple(shape) for _, _, shape in inputs]
        first = shapes[0]
        if (self.native is None or not (blocked or any(layout is not None for _, layout, _ in inputs))
                or not 3 <= len(first) <= 5 or not first[0]
                or any(len(shape) != len(first) or shape[:1] + shape[2:] != first[:1] + first[2:] for shape in shapes)):
            return None
        out_shape = (first[0], sum(shape[CHANNELS] for shape in shapes)) + first[2:]
        value, layout = self.native.emit(builder, inputs, threads, blocked)
        return value, layout, out_shape

    @staticmethod
    def _takes(tensors) -> bool:
        """float32 tensors of one rank (3 to 5) that agree on every dim but channels."""
        first = tensors[0]
        for t in tensors:
            if not (isinstance(t, onednn.Blocked) or (isinstance(t, np.ndarray) and t.dtype == np.float32)):
                return False
            if t.ndim != first.ndim or not 3 <= t.ndim <= 5 or t.shape[0] == 0:
                return False
            if tuple(t.shape[:1]) + tuple(t.shape[2:]) != tuple(first.shape[:1]) + tuple(first.shape[2:]):
                return False
        return True


KERNELS = [NativeConcat]
