"""Finding and loading oneDNN (libdnnl.so.3), and the part of its C API kuiper calls, through ctypes.

The library comes from the ``onednn-cpu-gomp`` wheel (installed with kuiper on Linux x86-64),
which puts it in ``<prefix>/lib``; ``KUIPER_ONEDNN_LIBRARY`` names another build.  ``KUIPER_ONEDNN=0``
switches it off.  Only oneDNN 3.x is taken: its C API and its argument numbers are stable
within a major version.

Enum values are looked up by name through the library's own ``dnnl_*2str`` functions, so a
build that numbers an enum differently still gets the right values.  The few constants with
no such function (argument and query numbers) are fixed by the 3.x ABI and written here.
"""

from __future__ import annotations

import ctypes
import functools
import os
import site
import sys
import threading

from ..config import switch_from_env
from ..errors import BackendUnavailableError
from . import fork_guard
from .signal_stack import SignalStack

DISABLE_ENV = "KUIPER_ONEDNN"
LIBRARY_ENV = "KUIPER_ONEDNN_LIBRARY"
SONAME = "libdnnl.so.3"
MAX_DIMS = 12  # DNNL_MAX_NDIMS: every dims argument is an array of this many int64

# Execution argument numbers (DNNL_ARG_*) and queries (dnnl_query_t) of the 3.x ABI.
ARG_SRC = 1
ARG_DST = 17
ARG_WEIGHTS = 33
ARG_BIAS = 41
ARG_SCALE = 51  # a normalization's scale and shift
ARG_SHIFT = 52
ARG_MEAN, ARG_VARIANCE = 49, 50  # a normalization's statistics (DNNL_ARG_MEAN, DNNL_ARG_VARIANCE of 3.x)
ARG_SCRATCHPAD = 80
ARG_MULTIPLE_SRC = 1024  # the first of a concatenation's inputs (1024 + i)
ARG_SRC_1 = 2  # a binary post-op's second operand, numbered with post_op_argument
ARG_MULTIPLE_POST_OP_BASE = 32768  # DNNL_ARG_ATTR_MULTIPLE_POST_OP_BASE of 3.x (2.x had 16384)
ARG_POST_OP_DW = 16384  # DNNL_ARG_ATTR_POST_OP_DW of 3.x: or-ed with ARG_WEIGHTS / ARG_BIAS of a fused depthwise conv
QUERY_IMPL_INFO = 8  # dnnl_query_impl_info_str
QUERY_EXEC_ARG_MD = 255  # dnnl_query_exec_arg_md: the memory descriptor of an argument
STREAM_IN_ORDER = 1  # dnnl_stream_in_order, the default flags
SOFTMAX_ALGORITHMS = range(0x30000, 0x30010)  # where 3.x numbers dnnl_softmax_accurate and _log (names checked)
BINARY_ALGORITHMS = range(0x1FFF0, 0x20000)  # where 3.x numbers dnnl_binary_add, _mul, ... (names checked)
USE_SCALE, USE_SHIFT = 0x2, 0x4  # dnnl_normalization_flags_t

Handle = ctypes.c_void_p
Dims = ctypes.c_int64 * MAX_DIMS


class ExecArg(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_int), ("memory", Handle)]


class _Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_int), ("minor", ctypes.c_int), ("patch", ctypes.c_int),
                ("hash", ctypes.c_char_p), ("cpu_runtime", ctypes.c_uint), ("gpu_runtime", ctypes.c_uint)]


_STATUS = ctypes.c_int
_FUNCTIONS = {
    # name: (result type, argument types)
    "dnnl_version": (ctypes.POINTER(_Version), []),
    "dnnl_status2str": (ctypes.c_char_p, [ctypes.c_int]),
    "dnnl_engine_kind2str": (ctypes.c_char_p, [ctypes.c_int]),
    "dnnl_dt2str": (ctypes.c_char_p, [ctypes.c_int]),
    "dnnl_fmt_tag2str": (ctypes.c_char_p, [ctypes.c_int]),
    "dnnl_prop_kind2str": (ctypes.c_char_p, [ctypes.c_int]),
    "dnnl_alg_kind2str": (ctypes.c_char_p, [ctypes.c_int]),
    "dnnl_scratchpad_mode2str": (ctypes.c_char_p, [ctypes.c_int]),
    "dnnl_engine_create": (_STATUS, [ctypes.POINTER(Handle), ctypes.c_int, ctypes.c_size_t]),
    "dnnl_stream_create": (_STATUS, [ctypes.POINTER(Handle), Handle, ctypes.c_uint]),
    "dnnl_stream_wait": (_STATUS, [Handle]),
    "dnnl_stream_destroy": (_STATUS, [Handle]),
    "dnnl_memory_desc_create_with_strides": (_STATUS, [ctypes.POINTER(Handle), ctypes.c_int, Dims, ctypes.c_int, Dims]),
    "dnnl_memory_desc_create_with_tag": (_STATUS, [ctypes.POINTER(Handle), ctypes.c_int, Dims, ctypes.c_int, ctypes.c_int]),
    "dnnl_memory_desc_destroy": (_STATUS, [Handle]),
    "dnnl_memory_desc_equal": (ctypes.c_int, [Handle, Handle]),
    "dnnl_memory_desc_get_size": (ctypes.c_size_t, [Handle]),
    "dnnl_memory_create": (_STATUS, [ctypes.POINTER(Handle), Handle, Handle, Handle]),
    "dnnl_memory_destroy": (_STATUS, [Handle]),
    "dnnl_memory_set_data_handle": (_STATUS, [Handle, Handle]),
    "dnnl_post_ops_create": (_STATUS, [ctypes.POINTER(Handle)]),
    "dnnl_post_ops_append_eltwise": (_STATUS, [Handle, ctypes.c_int, ctypes.c_float, ctypes.c_float]),
    "dnnl_post_ops_append_sum": (_STATUS, [Handle, ctypes.c_float, ctypes.c_int32, ctypes.c_int]),
    "dnnl_post_ops_append_binary": (_STATUS, [Handle, ctypes.c_int, Handle]),
    "dnnl_post_ops_append_dw": (_STATUS, [Handle, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int64,
                                          ctypes.c_int64, ctypes.c_int64]),
    "dnnl_post_ops_destroy": (_STATUS, [Handle]),
    "dnnl_primitive_attr_create": (_STATUS, [ctypes.POINTER(Handle)]),
    "dnnl_primitive_attr_set_post_ops": (_STATUS, [Handle, Handle]),
    "dnnl_primitive_attr_set_scratchpad_mode": (_STATUS, [Handle, ctypes.c_int]),
    "dnnl_primitive_attr_destroy": (_STATUS, [Handle]),
    "dnnl_convolution_forward_primitive_desc_create": (
        _STATUS, [ctypes.POINTER(Handle), Handle, ctypes.c_int, ctypes.c_int, Handle, Handle, Handle, Handle,
                  Dims, Dims, Dims, Dims, Handle]),
    "dnnl_pooling_forward_primitive_desc_create": (
        _STATUS, [ctypes.POINTER(Handle), Handle, ctypes.c_int, ctypes.c_int, Handle, Handle, Dims, Dims, Dims, Dims,
                  Dims, Handle]),
    "dnnl_deconvolution_forward_primitive_desc_create": (
        _STATUS, [ctypes.POINTER(Handle), Handle, ctypes.c_int, ctypes.c_int, Handle, Handle, Handle, Handle,
                  Dims, Dims, Dims, Dims, Handle]),
    "dnnl_matmul_primitive_desc_create": (
        _STATUS, [ctypes.POINTER(Handle), Handle, Handle, Handle, Handle, Handle, Handle]),
    "dnnl_layer_normalization_forward_primitive_desc_create": (
        _STATUS, [ctypes.POINTER(Handle), Handle, ctypes.c_int, Handle, Handle, Handle, ctypes.c_float, ctypes.c_uint,
                  Handle]),
    "dnnl_softmax_forward_primitive_desc_create": (
        _STATUS, [ctypes.POINTER(Handle), Handle, ctypes.c_int, ctypes.c_int, Handle, Handle, ctypes.c_int, Handle]),
    "dnnl_concat_primitive_desc_create": (
        _STATUS, [ctypes.POINTER(Handle), Handle, Handle, ctypes.c_int, ctypes.c_int, ctypes.POINTER(Handle), Handle]),
    "dnnl_reorder_primitive_desc_create": (_STATUS, [ctypes.POINTER(Handle), Handle, Handle, Handle, Handle, Handle]),
    "dnnl_primitive_desc_query": (_STATUS, [Handle, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]),
    "dnnl_primitive_desc_query_md": (Handle, [Handle, ctypes.c_int, ctypes.c_int]),
    "dnnl_primitive_desc_destroy": (_STATUS, [Handle]),
    "dnnl_primitive_create": (_STATUS, [ctypes.POINTER(Handle), Handle]),
    "dnnl_primitive_execute": (_STATUS, [Handle, Handle, ctypes.c_int, ctypes.POINTER(ExecArg)]),
    "dnnl_primitive_destroy": (_STATUS, [Handle]),
    # C = alpha op(A) op(B) + beta C, row-major, op 'N' or 'T': oneDNN's own GEMM, on its OpenMP threads.
    "dnnl_sgemm": (_STATUS, [ctypes.c_char, ctypes.c_char, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                             ctypes.c_float, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64,
                             ctypes.c_float, ctypes.c_void_p, ctypes.c_int64]),
}


def post_op_argument(index: int, argument: int) -> int:
    """The execution argument number of ``argument`` (``ARG_SRC_1``) of the post-op at ``index`` in the chain."""
    return ARG_MULTIPLE_POST_OP_BASE * (index + 1) | argument


class OneDnnError(BackendUnavailableError):
    """oneDNN refused a call (an unsupported shape, out of memory): the caller takes another path."""


def _candidates() -> list[str]:
    """Where to look for libdnnl, in order: the named file, the wheel's data folders, the system loader."""
    named = os.environ.get(LIBRARY_ENV, "").strip()
    if named:
        return [named]
    prefixes = [sys.prefix, sys.base_prefix, getattr(site, "USER_BASE", None) or ""]
    paths = [os.path.join(prefix, "lib", SONAME) for prefix in dict.fromkeys(prefixes) if prefix]
    return [path for path in paths if os.path.exists(path)] + [SONAME]


class Library:
    """The loaded libdnnl: its functions, the enum values kuiper uses, one CPU engine, a stream per thread."""

    def __init__(self, cdll: ctypes.CDLL, path: str):
        self.path = path
        for name, (result, arguments) in _FUNCTIONS.items():
            function = getattr(cdll, name)
            function.restype, function.argtypes = result, arguments
            setattr(self, name[len("dnnl_"):], function)
        version = self.version().contents
        self.version_text = f"{version.major}.{version.minor}.{version.patch}"
        if version.major != 3:
            raise OSError(f"oneDNN {self.version_text} at {path}: kuiper needs oneDNN 3.x")
        self.f32 = self.enum(self.dt2str, "f32")
        self.undefined_type = self.enum(self.dt2str, "undef")
        self.format_any = self.enum(self.fmt_tag2str, "any")
        self.forward_inference = self.enum(self.prop_kind2str, "forward_inference")
        self.forward_training = self.enum(self.prop_kind2str, "forward_training")  # also writes statistics
        self.convolution_direct = self.enum(self.alg_kind2str, "convolution_direct", limit=0x400)
        self.deconvolution_direct = self.enum(self.alg_kind2str, "deconvolution_direct", limit=0x400)
        self.scratchpad_user = self.enum(self.scratchpad_mode2str, "user")
        self.softmax_accurate = self.enum(self.alg_kind2str, "softmax_accurate", values=SOFTMAX_ALGORITHMS)
        self.binary_mul = self.enum(self.alg_kind2str, "binary_mul", values=BINARY_ALGORITHMS)
        self.binary_add = self.enum(self.alg_kind2str, "binary_add", values=BINARY_ALGORITHMS)
        self.openmp, self.openmp_name = _openmp(version.cpu_runtime)  # the runtime's library, its file name
        self.default_threads = self.openmp.omp_get_max_threads() if self.openmp is not None else None
        self.engine = Handle()
        self.check(self.engine_create(ctypes.byref(self.engine), self.enum(self.engine_kind2str, "cpu"), 0), "engine")
        self._streams = threading.local()
        self._format_tags: dict[str, int] = {}

    @property
    def stream(self) -> Handle:
        """This thread's stream: oneDNN streams are not to be shared by threads running at once (a model
        may run in several threads, e.g. Dask's); one per thread, destroyed as the thread ends."""
        state = getattr(self._streams, "state", None)
        if state is None:
            state = self._streams.state = _ThreadState(self)
        return state.stream

    @staticmethod
    def enum(to_text, name: str, limit: int = 256, values=None) -> int:
        """The value whose name ``to_text`` gives as ``name``, searched in ``values`` (else below ``limit``)."""
        for value in range(limit) if values is None else values:
            text = to_text(value)
            if text is not None and text.decode() == name:
                return value
        raise OSError(f"oneDNN has no enum value named {name!r}")

    def alg_kind(self, name: str) -> int:
        return self.enum(self.alg_kind2str, name, limit=0x400)

    def format_tag(self, name: str) -> int:
        """The value of a memory format tag (``aBcd16b``), looked up once."""
        value = self._format_tags.get(name)
        if value is None:
            value = self._format_tags[name] = self.enum(self.fmt_tag2str, name, limit=0x400)
        return value

    def threads(self, requested: int | None) -> int:
        """The thread count a call asking for ``requested`` gets (None: OpenMP's default)."""
        if self.openmp is None:
            return 1  # a build whose pool kuiper cannot size: its primitives are all made alike
        return fork_guard.thread_cap(requested or self.default_threads)

    def set_threads(self, threads: int) -> None:
        """oneDNN's threads for what follows in this thread: the primitives made, and the ones run.

        OpenMP's count is a setting of the calling thread, like numba's, so two models with
        different caps can run side by side in two threads.
        """
        if self.openmp is not None:
            fork_guard.note_threads(threads)
            self.openmp.omp_set_num_threads(threads)

    def check(self, status: int, what: str) -> None:
        if status != 0:
            text = self.status2str(status)
            raise OneDnnError(f"oneDNN {what}: {text.decode() if text else f'status {status}'}")


RUNTIME_OPENMP = 2  # dnnl_version_t.cpu_runtime of an OpenMP build (DNNL_RUNTIME_OMP)
OPENMP_LIBRARIES = ("libgomp.so.1", "libiomp5.so", "libomp.so")


def _openmp(cpu_runtime: int):
    """(the OpenMP runtime a build threads with, already loaded beside it, and its file name), or
    (None, None): threads are then not capped."""
    if cpu_runtime != RUNTIME_OPENMP:
        return None, None
    for name in OPENMP_LIBRARIES:
        try:
            library = ctypes.CDLL(name)
            library.omp_get_max_threads.restype = ctypes.c_int
            library.omp_set_num_threads.argtypes = [ctypes.c_int]
            return library, name
        except (OSError, AttributeError):
            continue
    return None, None


class _ThreadState:
    """What one thread keeps for running oneDNN: its stream, and an alternate signal stack
    (signal_stack.py).  Kept in a thread-local, so both go when the thread ends: a server that
    calls a model from a new thread per request does not grow."""

    def __init__(self, library: Library):
        self.library = library
        self.signal_stack = SignalStack()
        self.stream = Handle()
        library.check(library.stream_create(ctypes.byref(self.stream), library.engine, STREAM_IN_ORDER), "stream")

    def __del__(self):
        if self.stream:
            self.library.stream_destroy(self.stream)


@functools.cache
def loaded() -> tuple[Library | None, str]:
    """(the library, "oneDNN X.Y.Z (path)") or (None, why it is off)."""
    if not switch_from_env(DISABLE_ENV, default=True):
        return None, f"switched off by {DISABLE_ENV}={os.environ[DISABLE_ENV]}"
    failures = []
    for path in _candidates():
        try:
            library = Library(ctypes.CDLL(path), path)
        except (OSError, AttributeError, OneDnnError) as exc:
            failures.append(f"{path}: {exc}")
            continue
        return library, f"oneDNN {library.version_text} ({path})"
    return None, ("oneDNN not found (`pip install onednn-cpu-gomp==2023.2.0` for the fast CPU convolutions, "
                  "Linear layers and attention, "
                  "Linux x86-64); tried "
                  + "; ".join(failures))
