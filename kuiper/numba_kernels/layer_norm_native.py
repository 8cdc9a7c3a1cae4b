"""nn.LayerNorm on oneDNN (kuiper.onednn.LayerNormalization), for the NumPy backend's kernels.

The compiled row loop (norm.py) runs on the calling thread at a transformer's sizes; oneDNN's
layer normalization runs on its OpenMP threads at the model's thread count.  Inputs the
compiled loop would not take (other dtypes) keep the reference op; weights given as inputs,
the fast variance and tensors too small to win back a oneDNN call keep the compiled loop.
"""

from __future__ import annotations

import numpy as np

from .. import onednn
from ..thread_limits import requested as model_threads
from .norm import CompiledLayerNorm

# Elements under which the compiled loop on the calling thread beats a oneDNN call, which costs
# about 25 us to enter (rows x width, compiled loop against oneDNN at 2 threads: 100x160 23 against
# 32 us, 197x192 50 against 42, 197x768 182 against 45, 3136x96 436 against 105).
NATIVE_ELEMENTS = 32 * 1024


class NativeLayerNorm(CompiledLayerNorm):
    """nn.LayerNorm: oneDNN for float32 tensors of at least NATIVE_ELEMENTS, else the compiled loop."""

    library = None  # oneDNN, when it runs this op's larger inputs
    native = None  # the oneDNN layer normalization, made on the first call that takes it

    def setup(self):
        super().setup()
        # oneDNN binds the weights when its primitive is made, and takes the variance in two passes:
        # weights given as inputs and the fast variance keep the compiled loop.
        self.library = None if self.weights_given or self.fast_variance else onednn.library()
        if self.library is not None:
            self.kernel_note = "oneDNN (float32), compiled loop for small tensors"

    def forward(self, *inputs):
        x = inputs[self.input_position()]
        if self.library is None or not self.takes(x):
            return super().forward(*inputs)  # the compiled loop, or the reference: other dtypes, its errors
        if x.size >= NATIVE_ELEMENTS:
            row_weight, row_bias = self.row_affine()  # made at the first call: the input bounds their size
            if self.native is None:
                self.native = onednn.LayerNormalization(self.library, row_weight, row_bias, self.eps)
            rows = np.reshape(x, (-1, row_weight.shape[0]))
            try:
                out, finite = self.native(rows, model_threads())
            except onednn.OneDnnError:
                pass  # a shape oneDNN refused: the compiled loop takes it
            else:
                # oneDNN sums squares in float32: a row with |x| above ~7e17 overflows (its variance is inf)
                # and comes out as the bias alone.  Such inputs, and rows holding NaN, take the compiled
                # loop, whose statistics are float64 (docs/reliability.md); oneDNN's variances tell them
                # apart (a check of the input beforehand cost a read of it: 1.6x on 8x197x768).
                if finite:
                    return np.reshape(out, x.shape)
        return self.compiled_forward(x)

    def specialized(self, inputs):
        """The compiled loop's direct form (``CompiledLayerNorm.specialized``) below NATIVE_ELEMENTS; above,
        ``forward`` keeps oneDNN and its check of the variances."""
        x = inputs[0] if inputs else None
        if self.library is not None and getattr(x, "size", 0) >= NATIVE_ELEMENTS:
            return None
        return super().specialized(inputs)


KERNELS = [NativeLayerNorm]
