"""What a compiled loop body would cost: a Flax LSTM iteration (OptimizedLSTMCell(128), input 64) as one
Numba function, against kuiper's 12 plan steps and XLA (issue 44, docs/performance.md "Loop bodies").

    taskset -c 0 python tools/measure_compiled_lstm_body.py

A study, not kuiper code: the two gemvs by ``np.dot`` inside Numba (SciPy's BLAS), the gates through the
compiled interpreter's own vectorisable exp and tanh (kuiper/numba_kernels/elementwise_kernels.py), the
result checked against a float64 NumPy loop.  It prints the compile times (the iteration, then the loop
calling it), the time per iteration called once per iteration from Python (what a compiled body under
today's While would cost) and with the whole loop compiled, and the two gemvs alone in NumPy.
"""

from __future__ import annotations

import time

import numpy as np
from numba import njit

from kuiper.bench.timing import best_microseconds
from kuiper.numba_kernels import elementwise_kernels

STEPS, INPUT, HIDDEN = 32, 64, 128
vector_exp, vector_tanh = elementwise_kernels.vector_exp, elementwise_kernels._tanh  # the interpreter's own


@njit(nogil=True, error_model="numpy")
def sigmoid(out, x, scratch):
    n = x.size
    for k in range(n):
        out[k] = -x[k]
    vector_exp(out, out, n, scratch)
    for k in range(n):
        out[k] = np.float32(1.0) / (out[k] + np.float32(1.0))


@njit(nogil=True, error_model="numpy")
def gate_input(pre, gx, gh, b, first, n):
    for k in range(n):
        pre[k] = gx[0, first + k] + (gh[0, first + k] + b[first + k])


@njit(nogil=True, error_model="numpy")
def iteration(xs, t, h, c, wi, wh, b, ys, scratch, work):
    """One LSTM step: h, c from xs[t], h, c; ys[t] = h."""
    gx = np.dot(xs[t], wi)
    gh = np.dot(h, wh)
    n = h.shape[1]
    pre, i, f, g, o = work[0], work[1], work[2], work[3], work[4]
    gate_input(pre, gx, gh, b, 0, n)
    sigmoid(i, pre, scratch)
    gate_input(pre, gx, gh, b, n, n)
    sigmoid(f, pre, scratch)
    gate_input(pre, gx, gh, b, 2 * n, n)
    vector_tanh(g, pre, n, scratch)
    gate_input(pre, gx, gh, b, 3 * n, n)
    sigmoid(o, pre, scratch)
    c_new, h_new = np.empty_like(c), np.empty_like(h)
    for k in range(n):
        c_new[0, k] = f[k] * c[0, k] + i[k] * g[k]
    vector_tanh(pre, c_new[0], n, scratch)
    for k in range(n):
        h_new[0, k] = o[k] * pre[k]
    ys[t, 0, :] = h_new[0]
    return h_new, c_new


@njit(nogil=True, error_model="numpy")
def whole_loop(xs, h, c, wi, wh, b, ys, scratch, work):
    for t in range(xs.shape[0]):
        h, c = iteration(xs, t, h, c, wi, wh, b, ys, scratch, work)
    return h, c


def float64_loop(xs, wi, wh, b):
    h, c, out = np.zeros((1, HIDDEN)), np.zeros((1, HIDDEN)), np.zeros((STEPS, 1, HIDDEN))
    sigmoid64 = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    for t in range(STEPS):
        z = xs[t].astype(np.float64) @ wi + h @ wh + b
        i, f, g, o = (z[:, k * HIDDEN:(k + 1) * HIDDEN] for k in range(4))
        c = sigmoid64(f) * c + sigmoid64(i) * np.tanh(g)
        h = sigmoid64(o) * np.tanh(c)
        out[t] = h
    return out


def main() -> None:
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((STEPS, 1, INPUT)).astype(np.float32)
    wi = (rng.standard_normal((INPUT, 4 * HIDDEN)) / 8).astype(np.float32)
    wh = (rng.standard_normal((HIDDEN, 4 * HIDDEN)) / 11).astype(np.float32)
    b = rng.standard_normal(4 * HIDDEN).astype(np.float32)
    h, c = np.zeros((1, HIDDEN), np.float32), np.zeros((1, HIDDEN), np.float32)
    ys = np.zeros((STEPS, 1, HIDDEN), np.float32)
    scratch, work = np.empty((3, HIDDEN), np.int32), np.empty((5, HIDDEN), np.float32)
    start = time.time()
    iteration(xs, 0, h, c, wi, wh, b, ys, scratch, work)
    print(f"compiling the iteration: {time.time() - start:.2f} s")
    start = time.time()
    whole_loop(xs, h, c, wi, wh, b, ys, scratch, work)
    print(f"compiling the loop around it: {time.time() - start:.2f} s")

    def python_loop():
        state_h, state_c = h, c
        for t in range(STEPS):
            state_h, state_c = iteration(xs, t, state_h, state_c, wi, wh, b, ys, scratch, work)

    per_call = best_microseconds(python_loop, 300)
    print(f"a compiled iteration per Python iteration: {per_call:.1f} us a call, {per_call / STEPS:.2f} an iteration")
    per_call = best_microseconds(lambda: whole_loop(xs, h, c, wi, wh, b, ys, scratch, work), 300)
    print(f"the whole loop compiled: {per_call:.1f} us a call, {per_call / STEPS:.2f} an iteration")
    gemvs = best_microseconds(lambda: np.dot(xs[0], wi), 3000) + best_microseconds(lambda: np.dot(h, wh), 3000)
    print(f"the two gemvs alone (NumPy): {gemvs:.2f} us")
    ys[:] = 0
    whole_loop(xs, h, c, wi, wh, b, ys, scratch, work)
    print(f"max |difference| from a float64 loop: {np.abs(ys - float64_loop(xs, wi, wh, b)).max():.2e}")


if __name__ == "__main__":
    main()
