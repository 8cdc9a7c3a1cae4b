"""Room for the recursive passes over deep expression trees.

The parser caps parsed trees at 256 calls, but fusion composes expressions
(and lowering expands composites), so trees can get deeper; every recursive
pass runs inside ``deep_recursion()`` instead of each one being rewritten
with an explicit stack.  The limit is raised while any pass (in any thread)
is inside, and put back when the last one leaves.
"""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager

RECURSION_LIMIT = 20_000

_lock = threading.Lock()
_active = 0
_saved_limit: int | None = None


@contextmanager
def deep_recursion():
    global _active, _saved_limit
    with _lock:
        if _active == 0 and sys.getrecursionlimit() < RECURSION_LIMIT:
            _saved_limit = sys.getrecursionlimit()
            sys.setrecursionlimit(RECURSION_LIMIT)
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0 and _saved_limit is not None:
                sys.setrecursionlimit(_saved_limit)
                _saved_limit = None
