"""The Backend interface: where arrays live and the few primitives the array API lacks.

A backend knows nothing of operators, kernels or their params.  Ops compute with
``backend.xp`` (an array-API namespace: see numpy_namespace.py, array-api-compat for CuPy) plus the
primitives below.  Kernel plugins (kuiper.numba_kernels, third parties) replace
whole op types (``kuiper_add_kernels``) or primitives (``kuiper_add_primitives``)
on the backends whose ``capabilities`` suit them; callers likewise choose a path
by a backend's capabilities, never by its name.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, ClassVar, Sequence

from ..ir import bitcast, codegen_numpy
from . import standard

# Capabilities a backend may advertise in ``Backend.capabilities``.
# Its arrays are numpy.ndarray in host memory: kernels written for NumPy (Numba, C extensions) take them.
NUMPY_ARRAYS = "numpy-arrays"
# It compiles and launches CUDA C++ source at run time (CuPy's RawModule): te runs its generated CUDA there.
CUDA_SOURCE = "cuda-source"
# Its functions write into a given array (``out=``) and its arrays tell whether they are contiguous and
# writeable (``flags``), as NumPy's and CuPy's do: the graph lends an elementwise op the buffer of an
# input nothing else reads, to write its result into.  The standard has neither, so other namespaces
# get a fresh array per result.
OUT_BUFFERS = "out-buffers"

# The methods a kernel plugin may replace through the ``kuiper_add_primitives`` hook.
PRIMITIVES = ("pad", "sliding_window", "einsum", "scatter_add", "put", "bitcast", "erf", "softmax_in_place", "compile_elementwise",
              "blas_threads")


class Backend:
    """Subclass and register with the ``kuiper_add_backends`` hook."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    capabilities: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def availability(cls) -> tuple[bool, str]:
        """(True, "") when the backend can run here, else (False, the reason for a user)."""
        return True, ""

    # The array-API namespace ops compute with.
    xp: Any = None

    # Whether ops block their work for a CPU's caches: large temporaries (im2col columns, pooling
    # windows, depthwise taps) in cache-sized chunks of images, and Winograd for 3x3 convolutions.
    # A GPU backend says False: one large launch beats many small ones (ResNet-18 at batch 64 made
    # 5,902 launches in chunks, on an H200), and its BLAS's GEMM on im2col columns outruns Winograd's
    # extra passes over memory while rounding less.
    cpu_cache_blocking: ClassVar[bool] = True

    # -- arrays in and out -------------------------------------------------
    def asarray(self, array, dtype=None):
        """Put ``array`` (NumPy, a Python scalar, or anything the backend accepts) on this backend."""
        raise NotImplementedError

    def to_numpy(self, array):
        """Bring an array of this backend back as a NumPy array."""
        raise NotImplementedError

    def aligned(self, array):
        """``asarray(array)`` whose data starts on a 64-byte boundary, for weights that reach BLAS.

        Device backends copy every host array into their own (aligned) allocations, so
        the default is plain ``asarray``; a host backend copies only a misaligned view.
        """
        return self.asarray(array)

    def is_array(self, value) -> bool:
        """True for arrays of this backend (as opposed to Python scalars and lists)."""
        raise NotImplementedError

    # -- primitives ------------------------------------------------------------
    # The defaults are written in the array API standard (standard.py): any namespace runs them.
    # A backend whose library has a faster or view-returning version overrides them.
    def pad(self, x, pads: Sequence[tuple[int, int]], mode: str = "constant", value: float = 0.0):
        """Pad every axis by (before, after); mode is constant, reflect, replicate or circular."""
        return standard.pad(self.xp, x, pads, mode, value)

    def sliding_window(self, x, window: Sequence[int], axes: Sequence[int]):
        """x with the window dimensions appended (like NumPy's sliding_window_view; a view where the
        backend can make one: callers never write into it)."""
        return standard.sliding_window(self.xp, x, window, axes)

    def einsum(self, equation: str, *operands):
        return standard.einsum(self.xp, equation, *operands)

    def broadcaster(self, sample, shape: Sequence[int]) -> Callable:
        """``f(x)``: ``x`` broadcast to ``shape`` (read-only), made once for arrays like ``sample`` (its
        shape and dtype; a specialized Broadcast step calls it with no other)."""
        broadcast_to, shape = self.xp.broadcast_to, tuple(shape)
        return lambda x: broadcast_to(x, shape)

    def scatter_add(self, target, indices, values):
        """Add ``values`` into the 1-D array ``target`` at ``indices`` (1-D, same length), in place;
        repeated indices accumulate.  Returns ``target``."""
        return standard.scatter_add(self.xp, target, indices, values)

    def put(self, target, indices, values):
        """Write ``values`` into the 1-D array ``target`` at ``indices`` (1-D, same length), in place;
        of repeated indices the last value stays.  Returns ``target``.  (The standard's assignment
        takes slices and integers, not index arrays.)"""
        return standard.put(self.xp, target, indices, values)

    def bitcast(self, x, dtype):
        """The bits of the C-contiguous ``x`` read as ``dtype`` (a narrower or wider one splits or joins
        the last axis, as NumPy's ``view`` does).  The default, written in the standard (which has no
        bitcast), reads integers and float32/float64 of one width as each other, NaN payloads aside."""
        return bitcast.bitcast(self.xp, x, dtype)

    def erf(self, x):
        """The error function, elementwise (GELU needs it; the array API has none)."""
        from ..ir.erf import erf

        return erf(getattr(self, "native", None) or self.xp, x)

    def softmax_in_place(self, x, axis: int):
        """softmax along ``axis``, written over ``x`` (a fresh float array the caller owns) where the
        backend can: attention scores (N, heads, L, S) are then not copied three times.  The default
        returns a new array (the standard has no ``out=``); callers use what it returns."""
        return standard.softmax(self.xp, x, axis)

    def compile_elementwise(self, function):
        """Turn a kuiper.ir elementwise Function into a callable ``f(*inputs) -> array``."""
        return codegen_numpy.compile_elementwise(function, self.native if hasattr(self, "native") else self.xp)

    def floating_point_warnings_off(self):
        """A context a whole model call runs in: NumPy's floating-point warnings off once, for every op
        (PyTorch gives none), so that the compiled functions inside need not each turn them off."""
        return codegen_numpy.floating_point_warnings_off()

    def blas_threads(self) -> int | None:
        """The threads NumPy's BLAS may use while a model runs here; None leaves the library's own setting.

        A kernel plugin whose kernels compute on a thread pool of their own says 1 (kuiper.numba_kernels,
        when oneDNN is found): two pools on the same cores fight, each spinning on the core the
        other's next call needs.
        """
        return None

    def use_primitives(self, primitives: dict[str, Callable]) -> None:
        """Replace primitives of this instance by plugin functions ``function(default, *args)``,
        where ``default`` is the backend's own method (for the calls the plugin does not take)."""
        for name, function in primitives.items():
            setattr(self, name, functools.partial(function, getattr(self, name)))

    def device_error(self, exc: BaseException):
        """A KuiperError explaining a device failure (e.g. out of memory), or None if ``exc`` is not one."""
        return None

    def synchronize(self) -> None:
        """Wait until queued work is finished (timing); a no-op on synchronous backends."""

    def __repr__(self) -> str:
        return f"<kuiper backend {self.name!r}>"
