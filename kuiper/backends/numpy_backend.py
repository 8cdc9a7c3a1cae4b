"""The NumPy CPU backend: the reference every other backend is compared with."""

from __future__ import annotations

import numpy as np
from array_api_compat import numpy as numpy_namespace

from ..hookspecs import hookimpl
from .numpy_like import NumPyLikeBackend

# A cache line; also what MKL/OpenBLAS ask for.  NumPy's matmul skips BLAS entirely for an
# operand that is not aligned to its itemsize (a float32 weight mapped from a zip entry at
# an odd offset), which made alexnet's Linear layers ~20x slower.
WEIGHT_ALIGNMENT = 64


class NumpyBackend(NumPyLikeBackend):
    name = "numpy"
    description = "CPU reference backend (NumPy; BLAS threads follow OMP_NUM_THREADS)"
    native = np
    xp = numpy_namespace

    def asarray(self, array, dtype=None):
        return np.asarray(array, dtype=dtype)

    def to_numpy(self, array):
        return np.asarray(array)

    def aligned(self, array):
        array = np.asarray(array)
        if array.ctypes.data % WEIGHT_ALIGNMENT == 0 and array.flags.c_contiguous:
            return array
        # Over-allocate and start the copy at the first aligned byte: copied once, at build time.
        buffer = np.empty(array.nbytes + WEIGHT_ALIGNMENT, dtype=np.uint8)
        start = -buffer.ctypes.data % WEIGHT_ALIGNMENT
        copy = buffer[start : start + array.nbytes].view(array.dtype).reshape(array.shape)
        copy[...] = array
        return copy

    def softmax_in_place(self, x, axis: int):
        """The compiled row loop (kuiper.numba_kernels.norm) over the last axis of float32 arrays."""
        from ..numba_kernels import available

        if available() and axis in (-1, x.ndim - 1):
            from ..numba_kernels.norm import softmax_last_axis

            if softmax_last_axis(x):
                return x
        return super().softmax_in_place(x, axis)

    def compile_elementwise(self, function):
        """Float32 math on every core through the compiled interpreter when numba is on
        (kuiper.numba_kernels.elementwise); the NumPy evaluation otherwise and for calls it does not take."""
        from ..numba_kernels import available

        if not available():
            return super().compile_elementwise(function)
        from ..numba_kernels.elementwise import CompiledElementwise

        return CompiledElementwise(function)


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
