"""Whole-sequence recurrent loops: one compiled call per layer runs every time step of every direction.

The reference op (kuiper/ops/recurrent.py) steps through time in Python, a handful of
NumPy calls per step (~40 us on small layers, more than the arithmetic).  Here the
input projection of the whole sequence is still one GEMM, made by the caller
(``projected``, biases included); each kernel then runs the recurrence itself:
per step, the recurrent product ``h @ W_hh^T`` and the gate math, fused.

Each (direction, batch row) pair is an independent task (a batch row's recurrence
never reads another row's), so the tasks are the ``prange`` axis; direction 1 walks
time backwards.  Shapes, with D directions, L steps, N rows, H hidden, P = the
state's width (H, or an LSTM's proj_size), G gates:

    projected (D, L, N, G*H)   hh_t (D, P, G*H)   h0 (D, N, P)
    out (L, N, D*P): direction d writes columns d*P:(d+1)*P     h_n (D, N, P)

Everything is float32, products accumulated in a fixed order (as BLAS would, per
element), so nothing depends on the thread count.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .elementwise_kernels import vector_exp
from .runtime import kernel


@njit(inline="always")
def _add_product(state, weights, acc):
    """acc[j] += sum over k of state[k] * weights[k, j]; rows of weights are contiguous, so the
    inner loop is a vectorised multiply-add over the gate columns."""
    columns = acc.shape[0]
    for k in range(state.shape[0]):
        value = state[k]
        row = weights[k]
        for j in range(columns):
            acc[j] += value * row[j]


ONE = np.float32(1.0)
TWO = np.float32(2.0)


@njit(inline="always")
def _exp_of_negated(target, pre, scale, count, scratch):
    """target[k] = exp(-scale * pre[k]) for k < count, by the vectorised float32 exp.

    Every gate function is a logistic of that: sigmoid(x) = 1 / (1 + exp(-x)), and
    tanh(x) = 2 / (1 + exp(-2x)) - 1, so one vectorised exp over a step's gates replaces
    one scalar exp or tanh call per gate (six times faster at hidden size 64).
    """
    argument = scratch[3].view(np.float32)
    for k in range(count):
        argument[k] = -scale * pre[k]
    vector_exp(target, argument, count, scratch)


@njit(inline="always")
def _logistic(exp_of_negated):
    return ONE / (ONE + exp_of_negated)


@njit(inline="always")
def _tanh(exp_of_doubled_negated):
    return TWO / (ONE + exp_of_doubled_negated) - ONE


@njit(inline="always")
def _time(step, length, direction):
    """The time index of a direction's step: forwards, or backwards for direction 1."""
    return length - 1 - step if direction else step


@kernel(error_model="numpy")
def rnn_sequence(projected, hh_t, relu, h0, out, h_n):
    """Elman RNN: h = act(projected[t] + h @ W_hh^T), act tanh or (relu=True) max(., 0)."""
    directions, length, batch, hidden = projected.shape
    for task in prange(directions * batch):
        d, n = task // batch, task % batch
        h = h0[d, n].copy()
        acc = np.empty(hidden, np.float32)
        exps = np.empty(hidden, np.float32)
        scratch = np.empty((4, hidden), np.int32)
        for step in range(length):
            t = _time(step, length, d)
            acc[:] = projected[d, t, n]
            _add_product(h, hh_t[d], acc)
            if relu:
                for j in range(hidden):
                    h[j] = 0.0 if acc[j] < 0.0 else acc[j]  # NaN stays NaN, as np.maximum keeps it
            else:
                _exp_of_negated(exps, acc, TWO, hidden, scratch)
                for j in range(hidden):
                    h[j] = _tanh(exps[j])
            out[t, n, d * hidden:(d + 1) * hidden] = h
        h_n[d, n] = h


@kernel(error_model="numpy")
def lstm_sequence(projected, hh_t, hr_t, h0, c0, out, h_n, c_n):
    """LSTM, gates i, f, g, o: c = f*c + i*g; h = o*tanh(c), then h @ W_hr^T when hr_t (D, H, P) has rows.

    Without a projection hr_t is (D, 0, 0) and P = H.
    """
    directions, length, batch, width = projected.shape
    hidden = width // 4
    projecting = hr_t.shape[1] > 0
    size = h0.shape[2]
    for task in prange(directions * batch):
        d, n = task // batch, task % batch
        h = h0[d, n].copy()
        c = c0[d, n].copy()
        full = np.empty(hidden, np.float32)  # o * tanh(c) before the projection
        acc = np.empty(width, np.float32)
        exps = np.empty(width, np.float32)
        cell_exps = np.empty(hidden, np.float32)
        scratch = np.empty((4, width), np.int32)
        for step in range(length):
            t = _time(step, length, d)
            acc[:] = projected[d, t, n]
            _add_product(h, hh_t[d], acc)
            for j in range(2 * hidden, 3 * hidden):
                acc[j] *= TWO  # g is a tanh: exp(-2x)
            _exp_of_negated(exps, acc, ONE, width, scratch)
            for j in range(hidden):
                c[j] = _logistic(exps[hidden + j]) * c[j] + _logistic(exps[j]) * _tanh(exps[2 * hidden + j])
            _exp_of_negated(cell_exps, c, TWO, hidden, scratch)
            for j in range(hidden):
                full[j] = _logistic(exps[3 * hidden + j]) * _tanh(cell_exps[j])
            if projecting:
                h[:] = 0.0
                _add_product(full, hr_t[d], h)
            else:
                h[:] = full
            out[t, n, d * size:(d + 1) * size] = h
        h_n[d, n] = h
        c_n[d, n] = c


@kernel(error_model="numpy")
def gru_sequence(projected, hh_t, hidden_bias, h0, out, h_n):
    """GRU, gates r, z, n: projected holds x @ W_ih^T + b_ih, plus b_hh for r and z; hidden_bias
    (D, H) is b_hn, inside the reset: n = tanh(x_n + r * (h @ W_hn^T + b_hn)); h = n + z * (h - n)."""
    directions, length, batch, width = projected.shape
    hidden = width // 3
    for task in prange(directions * batch):
        d, n = task // batch, task % batch
        h = h0[d, n].copy()
        acc = np.empty(width, np.float32)
        exps = np.empty(width, np.float32)
        candidate = np.empty(hidden, np.float32)
        scratch = np.empty((4, width), np.int32)
        for step in range(length):
            t = _time(step, length, d)
            source = projected[d, t, n]
            acc[:2 * hidden] = source[:2 * hidden]
            acc[2 * hidden:] = hidden_bias[d]
            _add_product(h, hh_t[d], acc)
            _exp_of_negated(exps, acc, ONE, 2 * hidden, scratch)  # r and z
            for j in range(hidden):
                candidate[j] = source[2 * hidden + j] + _logistic(exps[j]) * acc[2 * hidden + j]
            _exp_of_negated(exps[2 * hidden:], candidate, TWO, hidden, scratch)
            for j in range(hidden):
                new = _tanh(exps[2 * hidden + j])
                h[j] = new + _logistic(exps[hidden + j]) * (h[j] - new)
            out[t, n, d * hidden:(d + 1) * hidden] = h
        h_n[d, n] = h
