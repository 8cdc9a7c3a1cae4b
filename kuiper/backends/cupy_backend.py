"""The CuPy GPU backend (installed by the ``gpu`` extra: ``pip install kuiper[gpu]``, CUDA 13).

Ops run through the same ``xp`` declarations as on NumPy (CuPy mirrors
NumPy's API, so the shared primitives in numpy_like.py apply: padding,
sliding windows for im2col, einsum).  Convolutions are im2col + cuBLAS GEMM
(``cupy.matmul``); the 1x1 case is a plain GEMM.  What this backend adds:

* every expression and fused elementwise chain runs as ONE
  ``cupy.ElementwiseKernel`` generated from the tensor IR
  (kuiper.ir.codegen_cuda), cached by kernel source, so a model builds each
  kernel once and CuPy compiles it once;
* feeds may be NumPy arrays, CuPy arrays, or anything with DLPack /
  ``__cuda_array_interface__``;
* out-of-memory becomes a DeviceMemoryError that says what was asked and what is free.
"""

from __future__ import annotations

from ..errors import DeviceMemoryError, KuiperError
from ..hookspecs import hookimpl
from .base import CUDA_SOURCE, OUT_BUFFERS
from .numpy_like import NumPyLikeBackend


def _cupy_status():
    """(cupy module or None, the reason it cannot be used)."""
    try:
        import cupy
    except ImportError as exc:
        return None, f"CuPy is not installed ({exc.msg}); install it with: pip install 'kuiper[gpu]'"
    except Exception as exc:  # a broken CUDA install raises all sorts of things on import
        return None, f"CuPy failed to import: {exc!r}"
    try:
        # is_available() returns False without a GPU; getDeviceCount() would raise instead.
        if not cupy.cuda.is_available():
            return None, "CuPy is installed but no CUDA GPU is visible (cupy.cuda.is_available() is False)"
    except Exception as exc:
        return None, f"CuPy cannot reach the CUDA driver: {exc!r}"
    return cupy, ""


class CupyBackend(NumPyLikeBackend):
    name = "cupy"
    description = "NVIDIA GPU backend (CuPy for CUDA 13) with fused elementwise kernels"
    capabilities = frozenset({CUDA_SOURCE, OUT_BUFFERS})
    cpu_cache_blocking = False

    @classmethod
    def availability(cls):
        cupy, reason = _cupy_status()
        return cupy is not None, reason

    def __init__(self):
        import array_api_compat.cupy as cupy_namespace
        import cupy

        self.native = cupy
        self.xp = cupy_namespace
        self._kernels: dict[str, object] = {}

    # -- arrays in and out -----------------------------------------------------------
    def asarray(self, array, dtype=None):
        cupy = self.native
        if isinstance(array, cupy.ndarray) or hasattr(array, "__cuda_array_interface__"):
            return cupy.asarray(array, dtype=dtype)
        if hasattr(array, "__dlpack__") and not hasattr(array, "__array__"):
            array = cupy.from_dlpack(array)
            return array if dtype is None else array.astype(dtype, copy=False)
        return cupy.asarray(array, dtype=dtype)  # NumPy arrays and Python scalars: one host-to-device copy

    def to_numpy(self, array):
        if isinstance(array, self.native.ndarray):
            return self.native.asnumpy(array)
        import numpy

        return numpy.asarray(array)

    def sliding_window(self, x, window, axes):
        # CuPy's sliding_window_view checks the window through a device array and reads the answer
        # back: a host synchronisation per call (two per convolution).  The view is stride
        # arithmetic on host integers, done here as NumPy's does it.
        shape, strides = list(x.shape), list(x.strides)
        for size, axis in zip(window, axes):
            if not 0 <= size <= shape[axis]:
                raise ValueError(f"window {tuple(window)} does not fit axis {axis} of shape {tuple(x.shape)}")
            shape[axis] -= size - 1
        return self.native.lib.stride_tricks.as_strided(
            x, shape=tuple(shape) + tuple(window), strides=tuple(strides) + tuple(x.strides[axis] for axis in axes)
        )

    def scatter_add(self, target, indices, values):
        cupy = self.native
        if target.dtype.kind != "c":
            cupy.add.at(target, indices, values)
            return target
        # CuPy's add.at takes real types only: add the real and the imaginary parts through a real
        # view of the (contiguous, 1-D) target, where element i is [2i] and [2i + 1].
        values = cupy.asarray(values, dtype=target.dtype)
        parts = target.view(values.real.dtype)
        cupy.add.at(parts, 2 * indices, values.real)
        cupy.add.at(parts, 2 * indices + 1, values.imag)
        return target

    # -- fused elementwise kernels ---------------------------------------------------
    def compile_elementwise(self, function):
        from ..ir.codegen_cuda import elementwise_kernel_spec

        generic = super().compile_elementwise(function)
        try:
            spec = elementwise_kernel_spec(function)
        except KuiperError:
            # Shape arithmetic (size(), lists) is host-side work: no kernel for it.
            return generic
        kernel = self._kernels.get(spec.name)
        if kernel is None:
            kernel = self.native.ElementwiseKernel(**spec.elementwise_kernel_args())
            self._kernels[spec.name] = kernel
        ndarray = self.native.ndarray

        def run(*inputs, out=None):
            # A kernel needs at least one array to take its shape from.
            if not any(isinstance(value, ndarray) for value in inputs):
                return generic(*inputs, out=out) if out is not None else generic(*inputs)
            # ElementwiseKernel takes output arrays positionally, after the inputs.
            return kernel(*inputs, out) if out is not None else kernel(*inputs)

        return run

    # -- errors and timing ---------------------------------------------------------------
    def device_error(self, exc: BaseException):
        cupy = self.native
        if isinstance(exc, cupy.cuda.memory.OutOfMemoryError):
            try:
                free, total = cupy.cuda.runtime.memGetInfo()
                state = f"{free / 2**20:,.0f} MiB free of {total / 2**20:,.0f} MiB on the GPU"
            except Exception:  # the driver may be in no state to answer
                state = "free memory unknown"
            pool = cupy.get_default_memory_pool()
            return DeviceMemoryError(
                f"GPU out of memory: {exc} ({state}; kuiper's CuPy pool holds {pool.total_bytes() / 2**20:,.0f} MiB). "
                "Try a smaller batch."
            )
        return None

    def synchronize(self) -> None:
        self.native.cuda.get_current_stream().synchronize()


@hookimpl
def kuiper_add_backends():
    return [CupyBackend]
