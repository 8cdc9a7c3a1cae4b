"""Which cluster to run on: a Client you pass, a scheduler address, the current client, or an embedded LocalCluster.

The embedded cluster has one worker process per core, each with one Dask thread and one
BLAS thread, so workers never oversubscribe the cores.  The BLAS thread count must be in
the environment before the worker process starts (OpenBLAS and MKL read it once, at
import), hence Dask's ``pre-spawn-environ`` rather than the worker's own env.

Its workers also keep glibc's own memory settings: Dask's default pre-spawn environment
sets ``MALLOC_TRIM_THRESHOLD_=65536`` (so that workers hand freed memory back to the
system), and setting any trim threshold also freezes glibc's mmap threshold at 128 KiB.
Every activation of a model run is then a fresh mmap, zero-filled by the kernel page by
page and unmapped when freed: ResNet-18 at 16 images a chunk took 1.7-1.8x the CPU time
per image (docs/performance.md, issue 27), which alone halves 2 workers' throughput.  With
glibc's defaults, the buffers of one chunk are reused by the next, as in a plain process.

GPU workers: start one worker per GPU with dask-cuda (``LocalCUDACluster()`` in Python or
``dask cuda worker ADDR`` on each machine) and run with backend ``cupy``; see the README.
"""

from __future__ import annotations

import contextlib
import os

from ..errors import KuiperError

BLAS_ENV_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
GLIBC_DEFAULTS_KEPT = ("MALLOC_TRIM_THRESHOLD_",)  # left unset in the workers (see the module docstring)


def local_cluster(workers: int | None = None, threads_per_worker: int = 1, blas_threads: int = 1,
                  dashboard_address: str | None = "127.0.0.1:8787"):
    """A LocalCluster of worker processes on the loopback address only, ``blas_threads`` BLAS threads each."""
    import dask
    from distributed import LocalCluster

    workers = workers or os.cpu_count() or 1
    environ = {name: str(blas_threads) for name in BLAS_ENV_VARS}
    # Each Nanny reads its pre-spawn environment when it is made, and a variable already in
    # this process's environment beats the config (an earlier cluster leaves its values
    # there), so both are set while the cluster is made.  Nannies keep what they read, so a
    # worker restarted after a crash gets the same values.
    spawn_config = {**dask.config.get("distributed.nanny.pre-spawn-environ", {}), **environ}
    for name in GLIBC_DEFAULTS_KEPT:
        spawn_config.pop(name, None)
    with dask.config.set({"distributed.nanny.pre-spawn-environ": spawn_config}), \
            _environment(environ, unset=GLIBC_DEFAULTS_KEPT):
        return LocalCluster(n_workers=workers, threads_per_worker=threads_per_worker, processes=True,
                            host="127.0.0.1", dashboard_address=dashboard_address)


@contextlib.contextmanager
def _environment(values: dict[str, str], unset: tuple[str, ...] = ()):
    """This process's environment with ``values`` set and ``unset`` removed while the block runs."""
    saved = {name: os.environ.get(name) for name in (*values, *unset)}
    os.environ.update(values)
    for name in unset:
        os.environ.pop(name, None)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def connect(client=None, scheduler: str | None = None, workers: int | None = None, echo=None):
    """Yield a Client: ``client`` unchanged, else one for ``scheduler``, else the current one, else a new local cluster.

    Only what this function started is closed on exit.  ``echo`` (e.g. ``print``) is told the
    dashboard link of a cluster it starts.
    """
    from distributed import Client

    if client is not None:
        yield client
        return
    if scheduler:
        try:
            started = Client(scheduler, timeout="10s")
        except OSError as exc:
            raise KuiperError(f"cannot reach the Dask scheduler at {scheduler} ({exc})") from None
        with started:
            yield started
        return
    current = _current_client() if workers is None else None
    if current is not None:
        yield current
        return
    with local_cluster(workers) as cluster, Client(cluster) as started:
        if echo is not None:
            echo(f"started a local Dask cluster on this machine: {len(cluster.workers)} worker process(es) x 1 thread; "
                 f"dashboard: {dashboard_link(started) or 'unavailable (pip install bokeh for one)'}")
        yield started


def _current_client():
    from distributed import default_client

    try:
        return default_client()
    except ValueError:  # no client in this process
        return None


def dashboard_link(client) -> str | None:
    """The dashboard URL, or None when it is not running (it needs bokeh)."""
    try:
        import bokeh  # noqa: F401
    except ImportError:
        return None
    return client.dashboard_link
