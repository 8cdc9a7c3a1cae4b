"""GNU OpenMP's one rule kuiper keeps by hand: no parallel region in a child forked after the pool started.

libgomp keeps its pool of threads across ``fork()``, but only the forking thread lives on in the
child, so a parallel region there waits forever for workers that do not exist (a model run in a
``multiprocessing`` worker started with 'fork' hung).  So once a region of more than one thread
has run here (``note_threads``), a child forked afterwards runs oneDNN and the compiled kernels on
its calling thread (``thread_cap``) and says so once (a RuntimeWarning).  Workers started
with 'spawn' or 'forkserver' (Dask's way) are fresh processes and keep every core.
"""

from __future__ import annotations

import os
import warnings

_pool_started = False  # a region of several OpenMP threads has run in this process
_forked_after_start = False  # this process is a child forked after that
_told = False


def note_threads(threads: int) -> None:
    """Record that OpenMP regions of ``threads`` threads run from now on."""
    global _pool_started
    if threads > 1:
        _pool_started = True


def thread_cap(threads: int) -> int:
    """``threads``, or 1 in a child forked after the OpenMP pool started."""
    global _told
    if not _forked_after_start or threads <= 1:
        return threads
    if not _told:
        _told = True
        warnings.warn("kuiper: this process was forked after its OpenMP threads started, and GNU OpenMP cannot "
                      "run them in a forked child; models here run on one thread. Start worker processes with "
                      "multiprocessing's 'spawn' or 'forkserver' method to use every core.", RuntimeWarning,
                      stacklevel=2)
    return 1


def _after_fork_in_child() -> None:
    global _forked_after_start
    _forked_after_start = _forked_after_start or _pool_started


os.register_at_fork(after_in_child=_after_fork_in_child)
