"""An alternate signal stack for each thread that runs oneDNN, so that a signal handler never writes
below the stack pointer of oneDNN's code (issue 49).

oneDNN 3.2's AVX-512 GEMM kernel (the JIT ``sgemm`` under its plain-layout convolutions) keeps data
below the stack pointer.  A signal handler that runs on the thread's own stack overwrites it: a
one-layer conv called in a loop while a sampling profiler's ``SIGPROF`` fired every millisecond
(``signal.setitimer(signal.ITIMER_PROF, 0.001, 0.001)``) corrupted the heap within seconds
("corrupted size vs. prev_size", "free(): invalid pointer"), and gave wrong numbers before that.
CPython installs its handlers with ``SA_ONSTACK``: they run on the thread's alternate stack where it
has one.  So a thread gets one (``STACK_BYTES``) when it first runs oneDNN, unless it has one already
(faulthandler's), and gives it up when it ends.

Blocking signals around each call was measured first: ``pthread_sigmask`` before and after a call
costs 4.1 us through ctypes and 7 us through ``signal.pthread_sigmask`` on the 2-core development
machine, a fifth of a small convolution's call.  The alternate stack costs nothing per call.  It does
not cover a handler that C code installs without ``SA_ONSTACK``.
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading

SS_DISABLE = 2  # ss_flags: the thread has no alternate stack
STACK_BYTES = 1 << 16  # a handler's frame with AVX-512 state is a few KiB; CPython's handler needs little more
_orphans: list = []  # stacks whose thread may still run when their owner object went in another thread


class _Stack(ctypes.Structure):
    _fields_ = [("ss_sp", ctypes.c_void_p), ("ss_flags", ctypes.c_int), ("ss_size", ctypes.c_size_t)]


@functools.cache
def _sigaltstack():
    """libc's ``sigaltstack``, or None where there is none (not POSIX)."""
    if os.name != "posix":
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).sigaltstack
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.POINTER(_Stack), ctypes.POINTER(_Stack)]
    function.restype = ctypes.c_int
    return function


class SignalStack:
    """The calling thread's alternate signal stack for as long as this object lives, where the thread had none.

    Made and dropped by the same thread (kept in a thread-local; CPython clears a thread's locals in
    that thread as it ends)."""

    def __init__(self):
        self.owner = threading.get_ident()
        self.buffer = None
        sigaltstack = _sigaltstack()
        if sigaltstack is None:
            return
        current = _Stack()
        if sigaltstack(None, ctypes.byref(current)) != 0 or not current.ss_flags & SS_DISABLE:
            return  # the thread has one already (faulthandler's, a caller's): leave it as it is
        buffer = ctypes.create_string_buffer(STACK_BYTES)
        if sigaltstack(ctypes.byref(_Stack(ctypes.addressof(buffer), 0, STACK_BYTES)), None) == 0:
            self.buffer = buffer

    @property
    def installed(self) -> bool:
        return self.buffer is not None

    def __del__(self):
        buffer, self.buffer = self.buffer, None
        if buffer is None:
            return
        if threading.get_ident() != self.owner:
            _orphans.append(buffer)  # its thread may still take signals on it: never freed
            return
        sigaltstack = _sigaltstack()
        if sigaltstack is not None:
            sigaltstack(ctypes.byref(_Stack(None, SS_DISABLE, 0)), None)
