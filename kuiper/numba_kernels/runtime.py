"""Whether the compiled CPU kernels can run here, with how many threads, and where they are cached.

Numba is imported when a compiled loop first runs (``KernelModule``), not when a model
is built: its import costs 0.4-0.5 s and about 100 MiB, which a model whose ops all run on
oneDNN and BLAS (ResNet, MobileNetV2) need never pay.  A machine without numba only loses
speed.
``KUIPER_NUMBA=0`` (or off/false/no) switches the kernels off (to compare with, or to
rule them out); 1/on/true/yes or unset leaves them on.

Compiled kernels are cached on disk in ``NUMBA_CACHE_DIR`` when the user set it, else in
the ``numba`` folder of kuiper's cache directory (kuiper.config.cache_dir:
``KUIPER_CACHE_DIR`` or the user cache directory); never beside the modules, inside the
installed package.

Threads: the running model's ``kuiper.load(threads=N)`` (kuiper.thread_limits), else
``set_threads(n)`` (process-wide, for code outside a model), else ``OMP_NUM_THREADS``,
else every core numba sees.  Numba's thread count is a per-calling-thread setting, so
``launch_threads()`` applies it before every kernel call; each kernel gives every
output element to exactly one thread with a fixed order of operations, so results do
not depend on the count.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
import threading
import types
from pathlib import Path

from .. import onednn
from ..config import cache_dir, switch_from_env
from ..errors import BackendUnavailableError, ConfigError
from ..onednn import fork_guard
from ..thread_limits import requested as model_threads

DISABLE_ENV = "KUIPER_NUMBA"
NUMBA_CACHE_ENV = "NUMBA_CACHE_DIR"
# Work (element operations, roughly) from which a call is split over threads.  A parallel
# launch costs 45-200 us of thread wake-ups on numba's workqueue layer on this project's 2-core
# VMs (even for an empty loop), 4-33 us on OpenMP (threading_layer_choice).  Measured on
# MobileNetV2 and ResNet-18 at 2 threads on workqueue (docs/performance.md), thresholds of 2^21
# and above and all-serial were alike, and 2^18 was 5-15% slower; on OpenMP, 2^18 against 2^22
# moved eight zoo models by 0.89-1.11x, within this VM's noise, so 2^22 stays: it keeps the very
# large calls (batches, big feature maps) parallel.
PARALLEL_WORK_ENV = "KUIPER_PARALLEL_WORK"


def work_threshold(name: str, default: int) -> int:
    """A threshold of work (element operations) from environment variable ``name``, else ``default``."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    if not text.isdigit():
        raise ConfigError(f"{name}={text!r}: expected a whole number of element operations (0 or more)")
    return int(text)


PARALLEL_WORK = work_threshold(PARALLEL_WORK_ENV, 1 << 22)

_requested_threads: int | None = None
# The workqueue threading layer (numba's fallback when neither OpenMP nor TBB is
# found) aborts the process on concurrent launches: serialise them there.
_workqueue_lock = threading.Lock()
# Kernels are decorated on first use, maybe by two threads at once; numba's cache-folder
# setting is swapped around each decoration (Kernel._dispatcher), so one at a time.
_decorate_lock = threading.Lock()


@functools.cache
def availability() -> tuple[bool, str]:
    """(True, "numba X.Y") or (False, the reason the kernels are off), without importing numba."""
    if not switch_from_env(DISABLE_ENV, default=True):
        return False, f"switched off by {DISABLE_ENV}={os.environ[DISABLE_ENV]}"
    if importlib.util.find_spec("numba") is None:
        return False, "numba is not installed; `pip install numba` for the multi-threaded CPU kernels"
    return True, f"numba {importlib.metadata.version('numba')}"


class KernelsUnavailableError(BackendUnavailableError):
    """numba is installed but does not import (e.g. built for another NumPy)."""


@functools.cache
def _numba():
    """numba, imported and set up for kuiper once (KernelsUnavailableError: it does not import)."""
    try:
        import numba
    except Exception as exc:  # noqa: BLE001 - a broken numba names itself and the way around it
        raise KernelsUnavailableError(
            f"the compiled CPU kernels need numba, which is installed but failed to import "
            f"({type(exc).__name__}: {exc}); repair it, or set {DISABLE_ENV}=0 to run without them") from exc
    if "NUMBA_THREADING_LAYER" not in os.environ:
        numba.config.THREADING_LAYER, numba.config.THREADING_LAYER_PRIORITY = threading_layer_choice()
    return numba


def threading_layer_choice() -> tuple[str, list[str]]:
    """(numba's THREADING_LAYER, its THREADING_LAYER_PRIORITY) for kuiper's kernels.

    With oneDNN on GNU OpenMP: OpenMP first, so the kernels and oneDNN run on one pool of threads,
    and numba's own pool (workqueue) where numba's OpenMP layer does not load.  A launch on OpenMP
    costs 4-33 us against workqueue's 100-200 us on this project's 2-core VMs; BLAS then keeps to the
    calling thread (``blas_threads``), since OpenMP's workers spin after each region on the core
    OpenBLAS's worker wants (docs/performance.md, "One OpenMP pool").  Without oneDNN, BLAS keeps
    its threads, so the kernels keep numba's pool, whose workers sleep between launches (four conv
    layers on a busy 2-core machine: 17 ms on workqueue, 1.3-2.4 s on OpenMP beside OpenBLAS).
    Takes effect unless a parallel numba function has already run in this process.
    """
    if onednn.on_gnu_openmp():
        return "default", ["omp", "workqueue", "tbb"]
    return "workqueue", ["tbb", "omp", "workqueue"]


def blas_threads(default) -> int | None:
    """The ``blas_threads`` primitive of NumPy-array backends: 1 when oneDNN is found (its OpenMP pool, and
    then the kernels', owns the cores), else the backend's ``default()``."""
    return 1 if onednn.available() else default()


class KernelModule:
    """A module of compiled loops (``*_kernels.py``), imported on its first use.

    Those modules import numba.  The op classes name them through it, so that building a
    model imports numba only if one of its ops runs a compiled loop.  After the import the
    module's names are copied in, so later lookups cost what a module's do.
    """

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attribute: str):
        if attribute.startswith("__"):
            raise AttributeError(attribute)  # copy, pickle and inspect probe these: no import for them
        _numba()
        module = importlib.import_module(f"{__package__}.{self._name}")
        self.__dict__.update(vars(module))
        return getattr(module, attribute)


@functools.cache
def cache_location() -> tuple[str, bool]:
    """(the folder for numba's on-disk cache of the kernels, whether it can be written).

    The folder is named after the kernels' sources (``kernels_folder``).  Numba checks a cached
    function against its own file only, but a kernel inlines functions of other files
    (``conv_kernels`` calls ``elementwise_kernels``' exp): after an edit of one, or a kuiper
    upgrade, the others would load stale code.  A new folder per version of the sources
    cannot.  Unwritable: the kernels compile in every process instead, since numba would
    otherwise fall back to ``__pycache__`` beside the module, inside the installed package.
    """
    base = os.environ.get(NUMBA_CACHE_ENV, "").strip() or os.path.join(cache_dir(), "numba")
    folder = os.path.join(base, kernels_folder(Path(__file__).parent))
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError:
        return folder, False
    return folder, os.access(folder, os.W_OK)


def kernels_folder(package: Path) -> str:
    """``kernels-<digest>``: a digest of every Python source in ``package``."""
    digest = hashlib.sha256()
    for path in sorted(package.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return f"kernels-{digest.hexdigest()[:16]}"


def available() -> bool:
    return availability()[0]


def set_threads(threads: int | None) -> None:
    """Threads for the compiled kernels (None: OMP_NUM_THREADS, else all cores)."""
    global _requested_threads
    if threads is not None and threads < 1:
        raise ValueError(f"threads must be at least 1, found {threads}")
    _requested_threads = threads


def threads() -> int:
    """The thread count the next kernel launch uses."""
    limit = _thread_limit()
    wanted = model_threads() or _requested_threads  # kuiper.load(threads=N) first, for the model running here
    if wanted is None:
        try:
            wanted = int(os.environ.get("OMP_NUM_THREADS", "") or limit)
        except ValueError:
            wanted = limit
    return fork_guard.thread_cap(max(1, min(wanted, limit)))  # 1 in a child forked after OpenMP started


def launch_width(work: int) -> int:
    """The threads a launch of ``work`` runs on: ``threads()`` once the work reaches PARALLEL_WORK,
    else 1 (the serial build, on the calling thread; the thread count is then not even asked)."""
    return threads() if work >= PARALLEL_WORK else 1


@functools.cache
def _thread_limit() -> int:
    """numba's pool size, fixed when numba is imported (asked per launch: cached)."""
    return _numba().config.NUMBA_NUM_THREADS


@contextlib.contextmanager
def launch_threads():
    """Run the enclosed kernel calls with ``threads()`` threads, serialised if the layer needs it.

    Numba's count is restored afterwards: it is a setting of the calling thread, which the
    caller's own numba code shares.
    """
    numba = _numba()  # picks the threading layer before the first launch
    callers = numba.get_num_threads()
    count = threads()
    numba.set_num_threads(count)
    try:
        if _threading_layer() == "workqueue":
            with _workqueue_lock:
                yield
        else:
            yield
    finally:
        numba.set_num_threads(callers)
        if _threading_layer() == "omp":  # known once the first launch has picked it
            fork_guard.note_threads(count)


def _threading_layer() -> str:
    try:
        return _numba().threading_layer()
    except ValueError:  # no parallel kernel has run yet: the first launch picks the layer
        return "workqueue"


def describe() -> str:
    """One line for ``kuiper info``: on with which numba and threads, or off and why."""
    ok, text = availability()
    if not ok:
        return f"compiled CPU kernels: off ({text})"
    folder, writable = cache_location()
    cache = f"cache {folder}" if writable else f"not cached: cannot write {folder}"
    return f"compiled CPU kernels: on ({text}, {threads()} thread(s), threading layer {_threading_layer()}, {cache})"


class Kernel:
    """A loop written with ``prange``, compiled twice: parallel, and serial on the calling thread.

    ``kernel(work, *args)`` launches the parallel version when more than one thread is
    wanted and ``work`` reaches PARALLEL_WORK, else runs the serial one, which costs
    under a microsecond to enter.  Both give every output element the same operations
    in the same order, so the result does not depend on the choice.

    Each version's numba dispatcher is made on its first use, not when the kernel modules
    are imported: a model uses a few of the kernels, mostly in one version (at batch 1 the
    serial one), and making all of them cost 12-17 ms of every start-up.
    """

    def __init__(self, function, options: dict):
        self.__doc__ = function.__doc__
        self._function = function
        self._options = options

    @functools.cached_property
    def parallel(self):
        return self._dispatcher(self._function, parallel=True)

    @functools.cached_property
    def serial(self):
        # A second name: numba's on-disk cache is named after the function.
        return self._dispatcher(_renamed(self._function, self._function.__name__ + "_serial"))

    def _dispatcher(self, function, **extra):
        numba = _numba()
        folder, cache = cache_location()
        # Numba picks a function's cache folder when it is decorated, from its global setting:
        # point that at kuiper's folder for these functions only, leaving the user's own alone.
        with _decorate_lock:
            user_setting = numba.config.CACHE_DIR
            numba.config.CACHE_DIR = folder
            try:
                return numba.njit(cache=cache, nogil=True, **extra, **self._options)(function)
            finally:
                numba.config.CACHE_DIR = user_setting

    @staticmethod
    def takes_parallel(work: int) -> bool:
        return launch_width(work) > 1

    def __call__(self, work: int, *args):
        return self.launch(self.takes_parallel(work), *args)

    def launch(self, parallel: bool, *args):
        """The parallel version on ``threads()`` threads, or the serial one on the calling thread: for a
        caller that has made the choice itself (with ``launch_width``, whose count it also needs)."""
        if parallel:
            with launch_threads():
                return self.parallel(*args)
        return self.serial(*args)


def kernel(**options):
    """Decorator: ``@kernel()`` turns a prange loop into a Kernel (numba's njit options pass through)."""
    return lambda function: Kernel(function, options)


def _renamed(function, name: str):
    """The same function under another name: numba's on-disk cache is named after the function,
    and the serial and parallel builds of one loop must not share a cache entry."""
    code = function.__code__
    code = code.replace(co_name=name, **({"co_qualname": name} if hasattr(code, "co_qualname") else {}))
    renamed = types.FunctionType(code, function.__globals__, name, function.__defaults__, function.__closure__)
    renamed.__qualname__ = name
    return renamed
