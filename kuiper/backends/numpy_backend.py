"""The NumPy CPU backend: the reference every other backend is compared with."""

from __future__ import annotations

import numpy as np
from array_api_compat import numpy as numpy_namespace

from ..hookspecs import hookimpl
from .numpy_like import NumPyLikeBackend


class NumpyBackend(NumPyLikeBackend):
    name = "numpy"
    description = "CPU reference backend (NumPy; BLAS threads follow OMP_NUM_THREADS)"
    native = np
    xp = numpy_namespace

    def asarray(self, array, dtype=None):
        return np.asarray(array, dtype=dtype)

    def to_numpy(self, array):
        return np.asarray(array)


@hookimpl
def kuiper_add_backends():
    return [NumpyBackend]


@hookimpl
def kuiper_add_kernels(backend_name):
    """Compiled multi-threaded kernels (kuiper.numba_kernels) when numba is installed; {} otherwise."""
    if backend_name != NumpyBackend.name:
        return None
    from ..numba_kernels import kernels

    return kernels()
