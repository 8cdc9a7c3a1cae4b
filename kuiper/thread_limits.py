"""Threads per model: ``kuiper.load(path, threads=N)`` caps the CPU threads of each run of that model.

Two thread pools compute on the CPU, and both are capped for the duration of a run:

* the BLAS library NumPy calls (OpenBLAS, MKL, BLIS), through threadpoolctl: BLAS
  libraries keep one process-wide setting, so models running at the same time in
  several threads share whichever cap was set last;
* the compiled kernels' numba pool (kuiper.numba_kernels): numba's thread count is a
  per-calling-thread setting, so the kernels read ``requested()`` (a context variable)
  before each launch, and two models with different caps can run side by side.

Without a cap (``threads=None``) nothing is touched: ``OMP_NUM_THREADS`` and the
libraries' defaults apply, as before.  Like ONNX Runtime's ``intra_op_num_threads`` and
PyTorch's ``set_num_threads``, the cap bounds the threads used inside one call; it does
not start threads of its own.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools

from threadpoolctl import ThreadpoolController

from .errors import ConfigError

_requested: contextvars.ContextVar[int | None] = contextvars.ContextVar("kuiper_threads", default=None)


def check_threads(value, where: str = "kuiper.load") -> int | None:
    """``value`` if it is None or a whole number >= 1; otherwise a ConfigError naming the argument."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where}(threads={value!r}): threads must be a whole number of at least 1 "
                          "(or None for the libraries' defaults)")
    return value


def requested() -> int | None:
    """The cap of the model running in this thread (None: no cap)."""
    return _requested.get()


@contextlib.contextmanager
def limited(threads: int | None):
    """Cap the BLAS pool and the compiled kernels to ``threads`` while the block runs."""
    if threads is None:
        yield
        return
    token = _requested.set(threads)
    try:
        with _blas_controller().limit(limits=threads, user_api="blas"):
            yield
    finally:
        _requested.reset(token)


@functools.cache
def _blas_controller() -> ThreadpoolController:
    """Finding the loaded BLAS libraries takes ~15 ms, so it is done once (NumPy's is loaded by then;
    two threads racing here at most find them twice)."""
    return ThreadpoolController()
