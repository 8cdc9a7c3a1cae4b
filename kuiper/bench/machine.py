"""The machine around the timings: numpy's thread pools, and how busy the CPUs already are."""

from __future__ import annotations

import os
from typing import Any

THREAD_ENV_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def limit_numpy_threads(threads: int | None) -> tuple[Any, str]:
    """Limit numpy's BLAS/OpenMP pools; returns (a handle to keep alive, a note for the report)."""
    try:
        from threadpoolctl import threadpool_info, threadpool_limits  # optional: pip install threadpoolctl
    except ImportError:
        if threads is None:
            return None, "numpy BLAS threads: library default (threadpoolctl not installed to report them)"
        for var in THREAD_ENV_VARS:  # reaches only libraries loaded from now on
            os.environ[var] = str(threads)
        return None, (f"numpy BLAS threads NOT limited to {threads}: threadpoolctl is not installed and numpy is "
                      f"already imported (pip install threadpoolctl, or start with "
                      f"OMP_NUM_THREADS={threads} OPENBLAS_NUM_THREADS={threads})")
    handle = None if threads is None else threadpool_limits(limits=threads)
    pools = [f"{p.get('internal_api', '?')} {p.get('num_threads', '?')}" for p in threadpool_info()]
    return handle, "numpy thread pools: " + (", ".join(pools) or "none found")


def machine_note() -> str:
    """CPU count and load: other busy processes make every number here noisy."""
    cpus = os.cpu_count() or 0
    try:
        load = os.getloadavg()[0]
    except OSError:
        return f"machine: {cpus} CPUs"
    note = f"machine: {cpus} CPUs, 1-minute load average {load:.2f} before the run"
    if cpus and load > 0.5 * cpus:
        note += " (busy: other processes, or a benchmark just before this one, compete for the CPUs)"
    return note
