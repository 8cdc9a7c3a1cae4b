"""kuiper: run models exported by PNNX on NumPy (CPU) or CuPy (GPU).

    import kuiper
    model = kuiper.load("resnet18.pnnx.param")          # .bin found beside it
    logits = model(x)                                   # NumPy in, backend arrays out
"""

from __future__ import annotations

import logging
import os
from importlib import metadata
import time
from typing import BinaryIO

from .errors import (
    BackendUnavailableError,
    ConfigError,
    DeviceMemoryError,
    ExpressionSyntaxError,
    GraphError,
    HloSyntaxError,
    InputError,
    IRError,
    KuiperError,
    ModelFormatError,
    OperatorParamError,
    PluginError,
    ShapeError,
    SizeLimitError,
    TESyntaxError,
    UnknownParamWarning,
    UnsupportedOperatorError,
    UsageError,
    WeightDroppedError,
)
import numpy as np

from .backends import backend_infos, get_backend
from .frontends import Frontend, is_content, is_model_object, read_model
from .graph import Model, StepObserver, TensorSpec, build
from .graph.model import Origin
from .hookspecs import hookimpl
from .thread_limits import check_threads

def _installed_version() -> str:
    """The version pip installed (setup.cfg's, read back from the package metadata: one source)."""
    try:
        return metadata.version("kuiper")
    except metadata.PackageNotFoundError:
        return "0+unknown (not installed: run from a source tree)"


__version__ = _installed_version()

# Library messages go to the "kuiper" logger (INFO: the slow first run's note; DEBUG: loads);
# an application or the CLI decides whether and where they appear.
logger = logging.getLogger(__name__)
logger.addHandler(logging.NullHandler())


def load(
    path: str | os.PathLike | bytes | BinaryIO,
    bin_path: str | os.PathLike | bytes | BinaryIO | None = None,
    backend: str | None = None,
    fuse: bool = True,
    *,
    format: str | None = None,  # noqa: A002 - the user-facing word
    threads: int | None = None,
    providers: bool = True,
    **options,
) -> Model:
    """Load a model file (or model text) and build it for one backend.

    The frontend is chosen by the file name (``x.pnnx.param``: PNNX; ``x.hlo.txt``: HLO;
    plugins add formats), or by ``format=NAME``.  HLO text may also be given as the
    string itself, as JAX prints it (``jax.jit(f).lower(x).as_text()``).  ``bin_path`` is PNNX's weight file when it
    is not beside the param file; other ``options`` go to the frontend.
    ``backend`` None means: ``KUIPER_BACKEND``, then a ``kuiper.toml`` /
    ``[tool.kuiper]`` config file, then ``numpy``.  ``fuse=False`` keeps every
    elementwise op separate (for debugging and comparisons).  ``threads=N`` caps
    the CPU threads each run of this model uses (BLAS and the compiled kernels, as
    ONNX Runtime's ``intra_op_num_threads``); None keeps the libraries' defaults.
    ``providers=False`` runs every step as its own op: no execution provider compiles a run of
    them into one call (kuiper/graph/providers.py; for comparisons, like ``fuse=False``).

    A PNNX model can also be loaded from memory: ``path`` is then the ``.pnnx.param``'s
    content and ``bin_path`` the ``.pnnx.bin``'s (or its path), each as bytes or a
    binary file object::

        kuiper.load(param_bytes, bin_path=bin_bytes)
        with open("m.pnnx.param", "rb") as param, open("m.pnnx.bin", "rb") as weights:
            model = kuiper.load(param, bin_path=weights)

    A model loaded from files pickles as this call (path, resolved backend name,
    options), so it can be sent to other processes, which rebuild it from the file;
    one loaded from memory does not pickle.
    """
    threads = check_threads(threads)
    started = time.perf_counter()
    if bin_path is not None:
        options["bin_path"] = bin_path
    frontend, ir = read_model(path, format, **options)
    resolved = backend if not isinstance(backend, (str, type(None))) else get_backend(backend)
    model = build(ir, backend=resolved, fuse=fuse, providers=providers)
    model.threads = threads
    logger.debug("loaded %s (%s): %d nodes on backend %s in %.0f ms", model.source, frontend.name, len(model.steps),
                 model.backend.name, (time.perf_counter() - started) * 1e3)
    if is_content(path) or is_content(bin_path) or is_model_object(path):
        return model  # no origin: the content is not kept, so the Model cannot be rebuilt elsewhere
    arguments = {"path": os.fspath(path), "backend": model.backend.name, "fuse": fuse, "format": frontend.name}
    if threads is not None:
        arguments["threads"] = threads
    if not providers:
        arguments["providers"] = False
    arguments.update({key: os.fspath(value) if isinstance(value, os.PathLike) else value
                      for key, value in options.items()})
    model.origin = Origin(load, arguments)
    return model


def load_hlo(path_or_text: str | os.PathLike, backend: str | None = None, fuse: bool = True, *,
             threads: int | None = None, providers: bool = True, constants=None) -> Model:
    """``kuiper.load(path_or_text, format="hlo", threads=threads)``: XLA HLO text (a file, or the text itself).

    Inputs are the ENTRY parameters in order; a ROOT tuple gives one output per leaf.
    ``constants={number or name: array}`` binds those parameters to arrays once, at load time (JAX
    passes weights as arguments: bound, they are prepared once, as constant weights are); the
    Model's inputs are then the parameters left, in order.
    """
    options = {} if constants is None else {"constants": constants}
    return load(path_or_text, backend=backend, fuse=fuse, format="hlo", threads=threads, providers=providers,
                **options)


def backends():
    """Every registered backend with whether it can run here and, if not, why."""
    return backend_infos()


def to_numpy(array):
    """Bring an output of any backend back to a NumPy array."""
    if isinstance(array, np.ndarray):
        return array
    if hasattr(array, "get"):  # CuPy arrays
        return array.get()
    return np.asarray(array)


__all__ = [
    "load",
    "load_hlo",
    "backends",
    "to_numpy",
    "hookimpl",
    "Frontend",
    "Model",
    "StepObserver",
    "TensorSpec",
    "KuiperError",
    "ModelFormatError",
    "ExpressionSyntaxError",
    "OperatorParamError",
    "UnsupportedOperatorError",
    "GraphError",
    "InputError",
    "ShapeError",
    "BackendUnavailableError",
    "ConfigError",
    "PluginError",
    "DeviceMemoryError",
    "HloSyntaxError",
    "TESyntaxError",
    "IRError",
    "SizeLimitError",
    "UsageError",
    "WeightDroppedError",
    "UnknownParamWarning",
]
