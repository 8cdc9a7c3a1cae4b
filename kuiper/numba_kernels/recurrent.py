"""nn.RNN, nn.LSTM and nn.GRU on the NumPy backend: each layer's time loop in one compiled call.

The reference op (kuiper.ops.recurrent) keeps params, weights, states, layout and
errors; this subclass replaces only the per-layer run.  The input projection of the
whole sequence stays one BLAS GEMM per direction; the recurrence then runs in
recurrent_kernels.py instead of a Python loop over time steps.  Float32 inputs and
weights take that path while a step's recurrent product is small (PER_STEP_WORK);
other dtypes, and layers so wide or batches so large that a step's GEMM dwarfs the
Python around it, take the reference path.  The input projection runs on oneDNN's matmul at the
model's thread count where it is large enough (``PROJECTION_WORK``): with any op on oneDNN in the
model, NumPy's BLAS has one thread (Sequencer2d-S's 36 bidirectional LSTMs over (32, 32, 192):
1.3-1.4 ms of each layer's 3-4 went to that projection).
"""

from __future__ import annotations

import numpy as np

from ..output_buffers import output_array
from .. import onednn
from ..onednn.primitives import PRODUCT_WORK
from ..ops import recurrent as reference
from ..thread_limits import requested as model_threads
from .runtime import KernelModule

kernels = KernelModule("recurrent_kernels")

# Multiply-adds of one step's recurrent product (batch * directions * state width * gates * hidden)
# up to which the compiled loop runs.  Its product reads a row's weights once per batch row and
# step, where BLAS's blocked GEMM reads them once per step: large batches favour BLAS.  One LSTM
# layer over 20 steps, 1 thread, compiled/reference time (tools/bench_call_overhead.py recurrent):
# hidden 64 batch 1 (16K) 0.11; 256x1 (262K) 0.46; 128x32 (2M) 0.82; 1024x1 (4M) 0.68;
# 512x8 (8M) 0.73; 128x128 (8M) 1.22; 256x64 (17M) 1.46.
PER_STEP_WORK = 1 << 22
# Multiply-adds of a direction's input projection from which it runs on oneDNN rather than NumPy's BLAS.
PROJECTION_WORK = PRODUCT_WORK


class _KernelWeights:
    """One layer's recurrent weights as the kernels take them: contiguous float32, stacked over directions."""

    def __init__(self, layer: reference.LayerWeights, directions: int, hidden: int):
        self.hh_t = np.ascontiguousarray(layer.hh_t, dtype=np.float32)  # (D, P, G*H)
        self.hr_t = (np.zeros((directions, 0, 0), np.float32) if layer.hr_t is None
                     else np.ascontiguousarray(layer.hr_t, dtype=np.float32))  # (D, H, P)
        self.hidden_bias = (np.zeros((directions, hidden), np.float32) if layer.hidden_bias is None
                            else np.ascontiguousarray(layer.hidden_bias[:, 0, :], dtype=np.float32))  # (D, H)


class CompiledRecurrent(reference.Recurrent):
    kernel_note = "compiled time loop (float32)"

    def setup(self):
        super().setup()
        self.float32_weights = all(
            np.asarray(array).dtype == np.float32
            for layer in self.layers
            for array in (*layer.ih_t, layer.hh_t)
        )
        if not self.float32_weights:
            self.kernel_note = "reference path: weights are not float32"
        elif not self.reset_after or self.peepholes:
            self.kernel_note = "reference path: the kernels compute PyTorch's cells (no peepholes, reset after)"
        self.kernel_weights = [_KernelWeights(layer, self.directions, self.hidden_size) for layer in self.layers]
        library = onednn.library() if self.float32_weights else None
        # Per layer, per direction: x @ W_ih^T + the folded biases on oneDNN (W_ih as the file gives it).
        self.projections = None if library is None else [
            [onednn.MatMul(library, np.asarray(ih_t).T, None if bias is None else np.asarray(bias, dtype=np.float32))
             for ih_t, bias in zip(layer.ih_t, layer.input_bias)]
            for layer in self.layers
        ]

    def _run(self, x, layer: int, h, c):
        batch = x.shape[1]
        gate_width = self.gates * self.hidden_size
        step_work = batch * self.directions * self.kernel_weights[layer].hh_t.shape[1] * gate_width
        if (not self.float32_weights or not self.reset_after or self.peepholes or step_work > PER_STEP_WORK
                or not all(isinstance(v, np.ndarray) and v.dtype == np.float32 for v in (x, h, c) if v is not None)):
            return super()._run(x, layer, h, c)
        projected = self._project(x, layer)
        weights = self.kernel_weights[layer]
        length, size = x.shape[0], self.out_size
        out = output_array((length, batch, size * self.directions), np.float32)
        h_n = output_array((self.directions, batch, size), np.float32)
        work = length * step_work if self.directions * batch > 1 else 0  # one task: nothing to share out
        h = np.ascontiguousarray(h)
        if self.kind == "LSTM":
            c_n = output_array((self.directions, batch, self.hidden_size), np.float32)
            kernels.lstm_sequence(work, projected, weights.hh_t, weights.hr_t, h, np.ascontiguousarray(c),
                                  out, h_n, c_n)
            return out, h_n, c_n
        if self.kind == "GRU":
            kernels.gru_sequence(work, projected, weights.hh_t, weights.hidden_bias, h, out, h_n)
        else:
            kernels.rnn_sequence(work, projected, weights.hh_t, self.nonlinearity == "relu", h, out, h_n)
        return out, h_n, None

    def _project(self, x, layer: int):
        """(D, L, N, G*H): x @ W_ih^T (+ the biases folded into it) per direction, each one GEMM."""
        length, batch, width = x.shape
        weights = self.layers[layer]
        rows = np.reshape(x, (length * batch, width))
        projected = np.empty((self.directions, length, batch, self.gates * self.hidden_size), np.float32)
        on_onednn = self.projections is not None and rows.size * projected.shape[-1] >= PROJECTION_WORK
        for d, (ih_t, bias) in enumerate(zip(weights.ih_t, weights.input_bias)):
            target = np.reshape(projected[d], (length * batch, -1))  # a view: projected is contiguous
            if on_onednn:
                try:
                    self.projections[layer][d](rows, model_threads(), out=target)
                    continue
                except onednn.OneDnnError:
                    on_onednn = False  # a shape oneDNN refused: NumPy's BLAS computes it
            np.matmul(rows, ih_t, out=target)
            if bias is not None:
                target += bias
        return projected


KERNELS = [CompiledRecurrent]
