"""Scratch arrays a compiled partition reuses call after call, one set per call running at a time.

A partition's kernel needs buffers between its layers whose size depends on the call's shape.
Allocating them per call costs little on the host but is what a replayed call must not do; keeping
one set per partition would let two threads' calls write into each other's.  So a call takes a
set for its key from a free list (a new one when none is free: another thread's call holds it) and
gives it back when done: the sets in use at once bound the memory, not the calling threads.
"""

from __future__ import annotations

import threading
from typing import Callable

MAX_KEYS = 8  # shapes kept; a model called with many batch sizes drops the sets of the others


class ScratchPool:
    def __init__(self):
        self._free: dict = {}  # key -> sets given back
        self._lock = threading.Lock()

    def take(self, key, make: Callable[[], tuple]):
        """A set for ``key``: a free one, or ``make()``."""
        free = self._free.get(key)
        if free:
            try:
                return free.pop()
            except IndexError:  # another thread took the last one
                pass
        with self._lock:
            if key not in self._free and len(self._free) >= MAX_KEYS:
                self._free.clear()
            self._free.setdefault(key, [])
        return make()

    def give_back(self, key, scratch) -> None:
        self._free.setdefault(key, []).append(scratch)
