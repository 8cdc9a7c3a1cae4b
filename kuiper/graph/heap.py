"""Keep freed activation memory in the process heap between model calls (glibc only).

A model call allocates and frees megabyte-sized arrays all the time (activations and the
ops' NumPy temporaries).  glibc's malloc serves them from the heap once its adaptive mmap
threshold has grown, but it gives the top of the heap back to the kernel whenever more
than its trim threshold (twice the mmap threshold) lies free there; the next call then
touches those pages anew, one page fault per 4 KiB.  In ConvNeXt-V2, PVT-v2, MaxViT and
Swin that was 1,600 to 8,400 faults per call, 4 us each on this project's VMs: 18 ms of
PVT-v2's 75 ms (docs/models.md).

``keep_freed_memory()`` fixes both thresholds at the largest the adaptive rule reaches
(mmap 32 MiB, glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit) and trims only above 128 MiB
free.  Peak RSS does not change (the pages were in use at the peak); what changes is that
up to 128 MiB of freed heap stays mapped between calls.  Setting any threshold through
mallopt switches the adaptive rule off, so the mmap threshold must be set along with the
trim threshold: raising the trim threshold alone sends every array above 128 KiB to mmap
(14,000 faults per call).

Nothing is changed where the process already chose: when ``MALLOC_MMAP_THRESHOLD_``,
``MALLOC_TRIM_THRESHOLD_`` or ``MALLOC_TOP_PAD_`` is set, with ``KUIPER_KEEP_FREED_MEMORY=0``,
or on a C library other than glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import threading

from ..config import switch_from_env

SWITCH_ENV = "KUIPER_KEEP_FREED_MEMORY"
GLIBC_SETTINGS_ENV = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 128 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameter numbers (malloc.h)

_lock = threading.Lock()
_outcome: str | None = None  # what the first call decided, for every later one


def keep_freed_memory() -> str:
    """Set glibc's thresholds once per process (see the module docstring); returns what was
    done: 'set', or why not."""
    global _outcome
    with _lock:
        if _outcome is None:
            _outcome = _decide_and_set()
        return _outcome


def _decide_and_set() -> str:
    if not switch_from_env(SWITCH_ENV, True):
        return f"off: {SWITCH_ENV}=0"
    chosen = [name for name in GLIBC_SETTINGS_ENV if os.environ.get(name)]
    if chosen:
        return f"off: the process sets {', '.join(chosen)}"
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return "off: not glibc"
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return "off: no mallopt in the C library"
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # mallopt returns 1 on success.
    if mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) != 1 or mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) != 1:
        return "off: mallopt refused the thresholds"
    return "set"


def give_back_freed_memory() -> bool:
    """Return the heap's freed memory to the system now (glibc's ``malloc_trim(0)``), where
    ``keep_freed_memory`` set the thresholds: before a memory plan's arena is made, the values of the
    calls before it lie freed in the heap, and the arena (above the mmap threshold: mapped apart from the
    heap) would otherwise come on top of them (YOLOv5 at batch 8: peak RSS 763 MiB against 703 without a
    plan).  The calls after it allocate nothing the heap must keep.  Whether memory was given back."""
    if _outcome != "set":
        return False
    try:
        trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return False
    trim.argtypes = (ctypes.c_size_t,)
    trim.restype = ctypes.c_int
    return bool(trim(0))
