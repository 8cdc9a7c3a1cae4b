"""The CuPy GPU backend (installed by the ``gpu`` extra: ``pip install kuiper[gpu]``)."""

from __future__ import annotations

from ..hookspecs import hookimpl
from .numpy_like import NumPyLikeBackend


def _cupy_status():
    """(cupy module or None, reason it cannot be used)."""
    try:
        import cupy
    except ImportError as exc:
        return None, f"CuPy is not installed ({exc.msg}); install it with: pip install 'kuiper[gpu]'"
    except Exception as exc:  # a broken CUDA install raises all sorts of things on import
        return None, f"CuPy failed to import: {exc!r}"
    try:
        if not cupy.cuda.is_available():
            return None, "CuPy is installed but no CUDA GPU is visible (cupy.cuda.is_available() is False)"
    except Exception as exc:
        return None, f"CuPy cannot reach the CUDA driver: {exc!r}"
    return cupy, ""


class CupyBackend(NumPyLikeBackend):
    name = "cupy"
    description = "NVIDIA GPU backend (CuPy, CUDA 13) with fused elementwise kernels"

    @classmethod
    def availability(cls):
        cupy, reason = _cupy_status()
        return cupy is not None, reason

    def __init__(self):
        import array_api_compat.cupy as cupy_namespace
        import cupy

        self.native = cupy
        self.xp = cupy_namespace

    def asarray(self, array, dtype=None):
        return self.native.asarray(array, dtype=dtype)

    def to_numpy(self, array):
        if isinstance(array, self.native.ndarray):
            return self.native.asnumpy(array)
        import numpy

        return numpy.asarray(array)

    def synchronize(self) -> None:
        self.native.cuda.get_current_stream().synchronize()


@hookimpl
def kuiper_add_backends():
    return [CupyBackend]
