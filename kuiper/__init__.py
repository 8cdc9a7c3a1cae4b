"""kuiper: run models exported by PNNX on NumPy (CPU) or CuPy (GPU).

    import kuiper
    model = kuiper.load("resnet18.pnnx.param")          # .bin found beside it
    logits = model(x)                                   # NumPy in, backend arrays out
"""

from __future__ import annotations

import os

from .errors import (
    BackendUnavailableError,
    ConfigError,
    DeviceMemoryError,
    ExpressionSyntaxError,
    GraphError,
    InputError,
    KuiperError,
    ModelFormatError,
    OperatorParamError,
    PluginError,
    ShapeError,
    UnsupportedOperatorError,
)
from .graph import Model, TensorSpec
from .hookspecs import hookimpl

__version__ = "0.1.0"


def load(
    param_path: str | os.PathLike,
    bin_path: str | os.PathLike | None = None,
    backend: str | None = None,
    fuse: bool = True,
) -> Model:
    """Load a PNNX model and build it for one backend.

    ``backend`` None means: ``KUIPER_BACKEND``, then a ``kuiper.toml`` /
    ``[tool.kuiper]`` config file, then ``numpy``.  ``fuse=False`` keeps every
    elementwise op separate (for debugging and comparisons).
    """
    from .formats.pnnx import load_pnnx
    from .graph import build

    return build(load_pnnx(param_path, bin_path), backend=backend, fuse=fuse)


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
    "backends",
    "to_numpy",
    "hookimpl",
    "Model",
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
]
