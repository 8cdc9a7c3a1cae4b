"""kuiper: run models exported by PNNX on NumPy (CPU) or CuPy (GPU).

    import kuiper
    model = kuiper.load("resnet18.pnnx.param")          # .bin found beside it
    logits = model(x)                                   # NumPy in, backend arrays out
"""

from __future__ import annotations

import os
from pathlib import Path

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
)
from .frontends import Frontend
from .graph import Model, StepObserver, TensorSpec
from .hookspecs import hookimpl

__version__ = "0.1.0"


def load(
    path: str | os.PathLike,
    bin_path: str | os.PathLike | None = None,
    backend: str | None = None,
    fuse: bool = True,
    *,
    format: str | None = None,  # noqa: A002 - the user-facing word
    **options,
) -> Model:
    """Load a model file and build it for one backend.

    The frontend is chosen by the file name (``x.pnnx.param``: PNNX; plugins add
    formats), or by ``format=NAME``.  ``bin_path`` is PNNX's weight file when it
    is not beside the param file; other ``options`` go to the frontend.
    ``backend`` None means: ``KUIPER_BACKEND``, then a ``kuiper.toml`` /
    ``[tool.kuiper]`` config file, then ``numpy``.  ``fuse=False`` keeps every
    elementwise op separate (for debugging and comparisons).

    The Model pickles as this call (path, resolved backend name, options), so
    it can be sent to other processes, which rebuild it from the file.
    """
    from .backends import get_backend
    from .frontends import frontend_for
    from .graph import build
    from .graph.model import Origin

    frontend = frontend_for(path, format)
    if bin_path is not None:
        options["bin_path"] = bin_path
    resolved = backend if not isinstance(backend, (str, type(None))) else get_backend(backend)
    model = build(frontend.load(Path(path), **options), backend=resolved, fuse=fuse)
    arguments = {"path": os.fspath(path), "backend": model.backend.name, "fuse": fuse, "format": frontend.name}
    arguments.update({key: os.fspath(value) if isinstance(value, os.PathLike) else value
                      for key, value in options.items()})
    model.origin = Origin(load, arguments)
    return model


def load_hlo(path_or_text: str | os.PathLike, backend: str | None = None, fuse: bool = True) -> Model:
    """Load XLA HLO text (a ``.hlo.txt`` file, or the text itself) and build its ENTRY computation.

    Inputs are the ENTRY parameters in order; a ROOT tuple gives one output per leaf.
    ``kuiper.load("prog.hlo.txt")`` does the same through the frontend hook.
    """
    from .hlo.load import load_hlo as load_hlo_module

    return load_hlo_module(path_or_text, backend=backend, fuse=fuse)


def backends():
    """Every registered backend with whether it can run here and, if not, why."""
    from .backends import backend_infos

    return backend_infos()


def to_numpy(array):
    """Bring an output of any backend back to a NumPy array."""
    import numpy as np

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
    "UnknownParamWarning",
]
