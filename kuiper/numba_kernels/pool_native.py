"""nn.MaxPool1d, nn.MaxPool2d and nn.AvgPool2d on oneDNN, in its blocked layout between oneDNN
convolutions; an average pool of a plain float32 array too.

A pooling op between two convolutions (ResNet's stem, YOLO's SPPF block, an audio net's Conv1d
layers) would otherwise turn the tensor into a plain array and back.  Here it takes a ``Blocked``
input and, when the graph says its readers take it, gives a ``Blocked`` output
(kuiper/graph/native_layouts.py); a run of such layers may then run as one sequence
(conv_sequence.py).

An average pool of a plain input goes to oneDNN where oneDNN has a compiled kernel for plain
NCHW (``jit:avx512_core`` on an AVX-512 machine: PoolFormer's 3x3 token mixer 0.1 ms against
0.8 for the compiled loop, at 2-18 ns an element on small planes); where it has only its
reference loop (13.7 ms against 0.16 ms blocked for a 64x112x112 3x3/2 max pool, on AVX2) the
compiled loop takes it.  A 2-D max pool of a plain input goes there too, where the input holds
no NaN or infinity (oneDNN's max drops a NaN, and gives -inf as -FLT_MAX), one read of it:
with that read, a Flax CNN's 8x32x28x28 2x2 pool took 63 + 16 us against 137 for the compiled
loop, 1x64x112x112 3x3/2 240 + 49 against 489, 1x128x56x56 2x2 110 + 26 against 191 (1 thread,
AVX-512).  The compiled loop takes NaN and infinities, indices, an average whose divisors oneDNN
does not share (divisor_override; count_include_pad with a ceil_mode window hanging past the right
padding), and any input oneDNN refuses.
"""

from __future__ import annotations

import math

import numpy as np

from .. import onednn
from ..limits import check_size
from ..onednn.primitives import memory_ordered
from ..ops.pooling_adaptive import AdaptiveAvgPool2d
from ..ops.pooling_window import pool_output_size
from ..ops.special_values import FLOAT32_MAX, is_tame
from ..thread_limits import requested as model_threads
from .conv_native import BLOCK_CHANNELS, NATIVE_LAYOUT
from .pooling import CompiledAvgPool2d, CompiledMaxPool1d, CompiledMaxPool2d


def _pooling(algorithm: str, kernel, stride, dilation, padding):
    """A oneDNN pooling, or None where oneDNN is not installed."""
    library = onednn.library()
    return None if library is None else onednn.Pooling(library, algorithm, kernel, stride, dilation, padding)


class OneDnnPooling:
    """The oneDNN path of a 2-D pooling op (mixed in before the compiled op class)."""

    native = None  # the oneDNN pooling, when it runs this op
    dilation = (1, 1)  # average pooling has none
    drops_nan = False  # whether oneDNN's algorithm loses a NaN that PyTorch's keeps, or an -inf (its max does)
    pools_plain_inputs = False  # whether a plain input goes to oneDNN too, not only a Blocked one

    def use_native(self, algorithm: str | None) -> None:
        """Run on oneDNN with ``algorithm`` (None: never) from now on, if it is installed."""
        if algorithm is not None:
            self.native = _pooling(algorithm, self.kernel, self.stride, self.dilation, self.padding)
        if self.native is not None:
            self.kernel_note = ("oneDNN (in the input's layout; plain inputs where it has a compiled kernel for them)"
                                if self.pools_plain_inputs else
                                "oneDNN (pools in its blocked layout), compiled loop for plain inputs")

    def native_layout(self) -> str | None:
        return NATIVE_LAYOUT if self.native is not None else None

    def takes_layout(self, position: int, layout: str) -> bool:
        return position == 0 and layout == NATIVE_LAYOUT and self.native is not None

    def forward(self, x):
        blocked = isinstance(x, onednn.Blocked)
        plain = self.pools_plain_inputs and isinstance(x, np.ndarray) and x.dtype == np.float32
        if self.native is not None and (blocked or plain):
            out = self._onednn_forward(x)
            if out is not None:
                return out
        if blocked:
            x = np.asarray(x)  # the compiled loop and the reference take plain arrays
        return super().forward(x)

    def _onednn_forward(self, x):
        """x pooled on oneDNN, or None where this path does not apply to it."""
        if x.ndim != len(self.kernel) + 2 or x.shape[0] == 0:
            return None
        out_size = self._out_size(x.shape)
        if min(out_size) < 1 or not self.onednn_divides_alike(x.shape, out_size):
            return None
        # The size budget, with channels rounded up as a blocked buffer holds them.
        check_size((x.shape[0], -(-x.shape[1] // BLOCK_CHANNELS) * BLOCK_CHANNELS) + out_size, 4,
                   self.node.describe())
        # A Blocked input whose producer bounded its norm below float32's largest value holds only finite
        # numbers: nothing is read.
        known = x.norm_bound if isinstance(x, onednn.Blocked) else None
        if self.drops_nan and not (known is not None and known < FLOAT32_MAX) and not is_tame(
                np, x.buffer if isinstance(x, onednn.Blocked) else memory_ordered(x)):
            return None  # a NaN the max would drop, or -inf it would give as -FLT_MAX: the compiled loop is exact
        blocked = self.output_layout == NATIVE_LAYOUT
        try:
            out = self.native(x, out_size, model_threads(), blocked=blocked)
        except onednn.OneDnnError:
            return None  # oneDNN refused this input (once: the plan remembers)
        if blocked and known is not None:
            out.norm_bound = self.bound_through([x.shape], [known])
        return out

    def onednn_divides_alike(self, shape, out_size) -> bool:
        """Whether oneDNN divides each window as PyTorch does, for this input and output size."""
        return True

    def _out_size(self, shape) -> tuple[int, ...]:
        return tuple(pool_output_size(size, k, s, p, d, self.ceil_mode) for size, k, s, p, d in
                     zip(shape[2:], self.kernel, self.stride, self.padding, self.dilation))

    def bound_through(self, in_shapes, norms) -> float | None:
        """A bound on the output's norm for an input whose norm is at most ``norms[0]`` (a run of layers as one
        sequence: conv_sequence.py).  Each output is at most the largest magnitude in its window (a max, or an
        average), and each input element lies in at most ``overlap`` windows, so the output's squares sum to
        at most ``overlap`` times the input's.  A finite bound also passes the max's NaN guard (every element
        finite), which then reads nothing."""
        overlap = math.prod(min(k, -(-((k - 1) * d + 1) // s))
                            for k, s, d in zip(self.kernel, self.stride, self.dilation))
        return math.sqrt(overlap) * norms[0]

    def emit_call(self, builder, inputs, threads: int, blocked: bool):
        """Add this pooling's oneDNN call to a sequence (``Pooling.emit``): (value, layout, shape) of the
        output, or None where the op's own path would not run it on oneDNN."""
        (value, layout, shape), = inputs
        if layout is None and not self.pools_plain_inputs or len(shape) != len(self.kernel) + 2 or not shape[0]:
            return None
        out_size = self._out_size(shape)
        if min(out_size) < 1 or not self.onednn_divides_alike(shape, out_size):
            return None
        emitted = self.native.emit(builder, value, layout, shape, out_size, threads, blocked)
        return None if emitted is None else (*emitted, tuple(shape[:2]) + out_size)


class NativeMaxPool2d(OneDnnPooling, CompiledMaxPool2d):
    """nn.MaxPool2d / F.max_pool2d, and an HLO reduce-window that is one (kuiper/hlo/translate_reduce.py)."""

    drops_nan = True
    pools_plain_inputs = True

    def setup(self):
        super().setup()
        self.use_native(None if self.return_indices else "max")


class NativeMaxPool1d(OneDnnPooling, CompiledMaxPool1d):
    """nn.MaxPool1d / F.max_pool1d: between the Conv1d layers of audio nets (M5), in their blocked layout."""

    drops_nan = True

    def setup(self):
        super().setup()
        self.use_native(None if self.return_indices else "max")


class NativeAvgPool2d(OneDnnPooling, CompiledAvgPool2d):
    """nn.AvgPool2d / F.avg_pool2d, where oneDNN divides each window's sum by what PyTorch does.

    PyTorch divides by the window clipped to the padded input with count_include_pad, else by
    the input elements under it (oneDNN's exclude-padding rule).  With no padding the two are
    the same.  oneDNN's include-padding rule divides by the whole window, which is PyTorch's
    wherever no window hangs past the right padding (always, unless ceil_mode).
    """

    pools_plain_inputs = True

    def setup(self):
        super().setup()
        self.include_padding = self.count_include_pad and any(self.padding)
        algorithm = "average_include_padding" if self.include_padding else "average_exclude_padding"
        self.use_native(algorithm if self.divisor_override is None and self.plain_window else None)

    def onednn_divides_alike(self, shape, out_size) -> bool:
        if not self.include_padding:
            return True
        return all(after <= p for after, p in zip(self.native.pads_after(shape, out_size), self.padding))


class NativeAdaptiveAvgPool2d(AdaptiveAvgPool2d):
    """nn.AdaptiveAvgPool2d: a global average (output 1x1) of a Blocked input on oneDNN, in its layout.

    The last convolution of a classifier (ResNet's, MobileNet's) then keeps its blocked output and no
    reorder to a plain array follows it, and the average runs on the model's threads over the data
    each thread just wrote: on one core, reading the other core's freshly written half of MobileNetV2's
    1280 x 7 x 7 took 110-140 us in the model against 19 warm (batch 1, 2 threads; the reorder before it
    25-40 us more).  Each window is the whole map, so the average is the adaptive one; anything else
    (other output sizes, plain inputs) takes the op's own path."""

    def setup(self):
        super().setup()
        self.global_average = onednn.available() and all(size == 1 for size in self.output_size)
        self._poolings: dict = {}  # (height, width) -> the oneDNN pooling of one whole map
        if self.global_average:
            self.kernel_note = "oneDNN for a Blocked input (in its layout), else one matrix-vector product"

    def native_layout(self) -> str | None:
        return None  # its output is plain: the flatten or Linear after it reads plain arrays

    def takes_layout(self, position: int, layout: str) -> bool:
        return position == 0 and layout == NATIVE_LAYOUT and self.global_average

    def forward(self, x):
        if isinstance(x, onednn.Blocked):
            pooling = self._pooling(x.shape)
            if pooling is not None:
                try:
                    return pooling(x, (1, 1), model_threads())
                except onednn.OneDnnError:
                    pass  # oneDNN refused this input (once: the plan remembers)
            x = np.asarray(x)  # the op's own path takes plain arrays, and raises its errors
        return super().forward(x)

    def _pooling(self, shape):
        """The oneDNN pooling of one whole map of a batch of ``shape``; None where this path does not apply."""
        if not self.global_average or len(shape) != 4 or not shape[0] or min(shape[2:]) < 1:
            return None
        window = tuple(shape[2:])
        pooling = self._poolings.get(window)
        if pooling is None:
            pooling = self._poolings[window] = onednn.Pooling(onednn.library(), "average_exclude_padding", window,
                                                              window, (1, 1), (0, 0))
        return pooling

    def bound_through(self, in_shapes, norms) -> float:
        """Each output is a map's mean, at most its 2-norm over the square root of its size: the output's norm
        is at most the input's (a run of layers as one sequence carries it on: conv_sequence.py)."""
        return norms[0]

    def emit_call(self, builder, inputs, threads: int, blocked: bool):
        """Add the pooling of a Blocked input to a sequence (``Pooling.emit``); its output is plain."""
        (value, layout, shape), = inputs
        pooling = None if layout is None else self._pooling(shape)
        emitted = None if pooling is None else pooling.emit(builder, value, layout, shape, (1, 1), threads)
        return None if emitted is None else (*emitted, tuple(shape[:2]) + (1, 1))


KERNELS = [NativeMaxPool1d, NativeMaxPool2d, NativeAvgPool2d, NativeAdaptiveAvgPool2d]
