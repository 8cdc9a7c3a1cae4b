"""XLA HLO text: parse it (``parse``), draw its data-flow graph (``build_dfg``), run it (``kuiper.load_hlo``).

Its module ``plugin`` is the built-in plugin "hlo": it registers the HLO frontend, which translates
instructions into kuiper's canonical op set (it has no ops of its own).  Plugin discovery imports
that module for every ``kuiper.load``, whatever the format, so this package imports nothing more;
the lexer, parser, verifier and translators (about 25 ms) are imported when HLO is first read, or
when one of the names below is first asked for.
"""

from __future__ import annotations

import importlib

# Public name -> the module defining it, imported on first access (PEP 562).
_DEFINED_IN = {
    "HloComputation": ".module", "HloInstruction": ".module", "HloModule": ".module",
    "build_dfg": ".dfg", "parse": ".parser",
}

__all__ = ["HloComputation", "HloInstruction", "HloModule", "build_dfg", "parse"]


def __getattr__(name: str):
    module = _DEFINED_IN.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_DEFINED_IN))
