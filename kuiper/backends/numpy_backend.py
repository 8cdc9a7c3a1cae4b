"""The NumPy CPU backend: the reference every other backend is compared with.

Its arrays are NumPy arrays in host memory (capability ``numpy-arrays``), so the compiled
CPU kernels (kuiper.numba_kernels, a plugin of their own) replace ops and primitives here.
"""

from __future__ import annotations

import numpy as np

from ..hookspecs import hookimpl
from .base import NUMPY_ARRAYS, OUT_BUFFERS
from .numpy_like import NumPyLikeBackend
from .numpy_namespace import array_namespace

# A cache line; also what MKL/OpenBLAS ask for.  NumPy's matmul skips BLAS entirely for an
# operand that is not aligned to its itemsize (a float32 weight mapped from a zip entry at
# an odd offset), which made alexnet's Linear layers ~20x slower.
WEIGHT_ALIGNMENT = 64


class NumpyBackend(NumPyLikeBackend):
    name = "numpy"
    description = "CPU reference backend (NumPy; BLAS threads follow OMP_NUM_THREADS)"
    capabilities = frozenset({NUMPY_ARRAYS, OUT_BUFFERS})
    native = np
    xp = array_namespace()

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

    def broadcaster(self, sample, shape):
        """A broadcast view made by NumPy's array constructor over a contiguous input, strides worked
        out once from ``sample``'s shape and itemsize: 0.9 us against np.broadcast_to's 3.7 (an HLO
        program broadcasts every bias and every normalization statistic: ViT-Ti has 69)."""
        shape = tuple(shape)
        offset = len(shape) - sample.ndim
        item = sample.dtype.itemsize
        dense = [item * int(np.prod(sample.shape[axis + 1:], dtype=np.int64)) for axis in range(sample.ndim)]
        strides = tuple(0 if axis < offset or sample.shape[axis - offset] == 1 else dense[axis - offset]
                        for axis in range(len(shape)))
        if any(axis >= offset and sample.shape[axis - offset] not in (1, size)
               for axis, size in enumerate(shape)):
            return super().broadcaster(sample, shape)  # not broadcastable: np.broadcast_to says why

        def view(x):
            if not x.flags.c_contiguous:
                return np.broadcast_to(x, shape)
            result = np.ndarray(shape, x.dtype, buffer=x, strides=strides)
            result.flags.writeable = False
            return result

        return view


@hookimpl
def kuiper_add_backends():
    return [NumpyBackend]

