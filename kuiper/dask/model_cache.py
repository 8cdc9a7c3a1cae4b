"""What a worker needs to load a model itself, and the per-process cache of loaded models.

The client never sends weights: it sends a ``ModelSpec`` (a path, the files' modification
times, the backend name and the load options, a few hundred bytes) with every task, and
each worker process loads the model from that path once and reuses it for every chunk.
The backend is resolved on the client, so a worker's environment variables or working
directory (kuiper.config) cannot silently pick another one.

Threads: a task's model runs with ``threads=1`` (BLAS and the compiled kernels on one
core) unless the load options name ``threads``.  Dask already runs one task per worker
thread; a model that threaded its own work too would put 2 x 2 threads on 2 cores (a
cluster whose workers were started without ``OMP_NUM_THREADS=1``, as ``dask worker`` and
``LocalCluster()`` start them), and every barrier would then wait for a time slice.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import choose_backend
from ..errors import InputError, KuiperError

TASK_THREADS = 1  # threads of one task's model run, unless the load options say otherwise


@dataclass(frozen=True)
class ModelSpec:
    """A model by reference: small, hashable, and the cache key on every worker.

    ``loader(path=path, backend=backend, **options)`` builds the model (``kuiper.load``
    unless the Model came from another loader, see ``Model.origin``).  ``mtimes_ns``
    makes a rewritten model file a new key, so a long-lived worker loads the new weights
    instead of serving the old ones.
    """

    path: str
    mtimes_ns: tuple[int, ...]
    backend: str
    options: tuple[tuple[str, Any], ...] = ()
    loader: Callable | None = None  # None: kuiper.load

    def load(self, backend: str | None = None):
        """The model, built with ``threads=TASK_THREADS`` unless the options name threads."""
        import kuiper

        loader = self.loader or kuiper.load
        options = {"threads": TASK_THREADS, **dict(self.options)}
        return loader(path=self.path, backend=backend or self.backend, **options)

    def __str__(self) -> str:
        return f"{self.path} (backend '{self.backend}')"


def _model_files(path: Path, options: dict) -> list[Path]:
    """The files whose change means new weights: the model file and its PNNX .bin."""
    files = [path]
    bin_path = options.get("bin_path")
    if bin_path is not None:
        files.append(Path(bin_path))
    elif path.name.endswith(".param"):
        files.append(path.with_name(path.name[: -len(".param")] + ".bin"))
    return [f for f in files if f.exists()]


def make_spec(path: str | os.PathLike, backend: str | None, options: dict, loader: Callable | None = None) -> ModelSpec:
    path = Path(path).resolve()
    if not path.is_file():
        raise InputError(f"{path}: model file not found")
    if options.get("bin_path") is not None:
        options = {**options, "bin_path": str(Path(options["bin_path"]).resolve())}
    mtimes = tuple(f.stat().st_mtime_ns for f in _model_files(path, options))
    return ModelSpec(str(path), mtimes, choose_backend(backend).name, tuple(sorted(options.items())), loader)


def _backend_for_checking_here(backend: str) -> str:
    """``backend`` if it runs on the client; NumPy when it is registered but not usable here (e.g. no GPU)."""
    import kuiper

    from ..backends import get_backend

    infos = {info.name: info for info in kuiper.backends()}
    if backend not in infos:
        get_backend(backend)  # raises the error that names the registered backends
    return backend if infos[backend].available else "numpy"


def resolve_model(model, backend: str | None = None, load_options: dict | None = None):
    """Client side: (ModelSpec for the workers, a Model loaded here).

    Loading here makes a broken or unsupported model fail before any task is
    submitted, and gives the declared input and output specs.  When the chosen
    backend cannot run on the client (a CPU-only client driving GPU workers), the
    client checks the model on the NumPy backend instead.
    """
    from ..graph import Model

    load_options = dict(load_options or {})
    local = None
    if isinstance(model, Model):
        spec = _spec_of_built_model(model, backend, load_options)
        if spec.backend == model.backend.name:
            local = model
    elif isinstance(model, (str, os.PathLike)):
        spec = make_spec(model, backend, load_options)
    else:
        raise InputError(f"model must be a path or a kuiper Model, got {type(model).__name__}")
    if local is None:
        # From the cache: a second predict or map_files over the same model file (a client
        # looping over datasets) does not load it again; the load is on the critical path,
        # before any task is submitted.
        local = cached_model(spec, _backend_for_checking_here(spec.backend))
    return spec, local


def _spec_of_built_model(model, backend: str | None, load_options: dict) -> ModelSpec:
    """A built Model travels as the loader call that made it (``model.origin``), never as its weights."""
    if model.origin is None:
        raise KuiperError(
            f"{model.source or 'model'}: this Model was built from an in-memory graph, so workers cannot load it; "
            "load it from a file (kuiper.load) or pass the model's path"
        )
    arguments = dict(model.origin.arguments)
    path = arguments.pop("path")
    recorded_backend = arguments.pop("backend", None)
    return make_spec(path, backend or recorded_backend, {**arguments, **load_options}, model.origin.loader)


# -- the per-process cache (in each worker process, and the client's checked models) ---
_models: dict[tuple[ModelSpec, str], Any] = {}
_loads: Counter = Counter()
_lock = threading.Lock()


def cached_model(spec: ModelSpec, backend: str | None = None):
    """The model for ``spec`` (on ``backend``, default the spec's), loaded at most once per process.

    Threads wait for the first load.
    """
    key = (spec, backend or spec.backend)
    with _lock:
        model = _models.get(key)
        if model is None:
            # A new version of the same file replaces the old one instead of piling up.
            for old in [k for k in _models if k[0].path == spec.path and k[0].mtimes_ns != spec.mtimes_ns]:
                del _models[old]
            model = spec.load(backend)
            _models[key] = model
            _loads[spec] += 1
        return model


def load_counts() -> dict[ModelSpec, int]:
    """How many times this process has loaded each model; for tests and diagnostics (``client.run(load_counts)``)."""
    with _lock:
        return dict(_loads)
