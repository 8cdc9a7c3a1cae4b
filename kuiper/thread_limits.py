"""Threads per model: ``kuiper.load(path, threads=N)`` caps the CPU threads of each run of that model.

Two thread pools compute on the CPU, and both are capped for the duration of a run:

* the BLAS library NumPy calls (OpenBLAS, MKL, BLIS), through threadpoolctl: BLAS
  libraries keep one process-wide setting, so models running at the same time in
  several threads share whichever cap was set last.  OpenBLAS's count is changed only
  from one Python thread, the first that changed it (threadpoolctl ignores the others,
  since resizing OpenBLAS's pool during another thread's call can crash it): a model run
  from a second thread, such as Dask's threaded scheduler, caps its kernels but not
  BLAS, so such a process is best started with ``OPENBLAS_NUM_THREADS=1``;
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
import sys

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


def limited(threads: int | None, blas: int | None = None):
    """A context that caps the compiled kernels to ``threads``, and the BLAS pool to ``blas`` (else
    ``threads``), while it runs.

    A model whose kernels compute on a pool of their own (oneDNN's OpenMP threads) runs BLAS on
    one thread (``blas=1``): OpenBLAS's worker spins for a long while after each call, and on
    2 cores it took the core oneDNN's next convolution needed (ResNet-18 at 2 threads: 57-65 ms
    with OpenBLAS at 2 threads, 34-43 ms at 1; docs/performance.md).  Both None gives a
    do-nothing context (one shared object: a model without a cap pays nothing per call).
    """
    if threads is None and blas is None:
        return _NO_CAP
    return _capped(threads, threads if blas is None else blas)


_NO_CAP = contextlib.nullcontext()


class _capped:  # noqa: N801 - used as a function: ``with _capped(threads, blas):``
    """The cap of one run.  A class, not a generator: entered on every call of every capped model, where
    contextlib's machinery cost 1.3 of its 3.9 us (2.6 now, most of it reading and setting the BLAS count)."""

    __slots__ = ("threads", "blas", "token", "changed")

    def __init__(self, threads: int | None, blas: int | None):
        self.threads, self.blas = threads, blas

    def __enter__(self):
        self.token = _requested.set(self.threads)
        blas, self.changed = self.blas, []
        # Set only what differs (a Dask worker's models run with threads=1 chunk after chunk, its BLAS
        # already at 1): threadpoolctl's limit() re-reads and sets every library on each call, 92-131 us
        # a call on a loaded 2-core machine (docs/performance.md).
        for library in _blas_libraries() if blas is not None else ():
            count = library.get_num_threads()
            if count is not None and count != blas:
                library.set_num_threads(blas)
                self.changed.append((library, count))
        return self

    def __exit__(self, *exc_info):
        for library, count in self.changed:
            library.set_num_threads(count)
        _requested.reset(self.token)


_found_blas: tuple[int, tuple] = (-1, ())  # (len(sys.modules) when found, the controllers)


def _blas_libraries() -> tuple:
    """threadpoolctl's controllers of the loaded BLAS libraries.

    Finding them takes ~15 ms, so it is done again only after a module was imported: a library
    imported after the first capped run (SciPy brings an OpenBLAS of its own) is capped too, and a
    steady process pays one length test a call.  Two threads racing here at most find them twice."""
    global _found_blas
    modules = len(sys.modules)
    seen, libraries = _found_blas
    if seen != modules:
        libraries = tuple(ThreadpoolController().select(user_api="blas").lib_controllers)
        _found_blas = (modules, libraries)
    return libraries
