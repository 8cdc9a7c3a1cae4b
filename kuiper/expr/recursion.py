"""Room for the recursive passes over deep expression trees.

The parser caps parsed trees at 256 calls, but fusion composes expressions
(and lowering expands composites), so trees can get deeper; every recursive
pass runs inside ``deep_recursion()`` instead of each one being rewritten
with an explicit stack.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager

RECURSION_LIMIT = 20_000


@contextmanager
def deep_recursion(limit: int = RECURSION_LIMIT):
    previous = sys.getrecursionlimit()
    if previous < limit:
        sys.setrecursionlimit(limit)
    try:
        yield
    finally:
        if sys.getrecursionlimit() == max(previous, limit) and previous < limit:
            sys.setrecursionlimit(previous)
