"""XLA HLO text: parse it (``parse``), draw its data-flow graph (``build_dfg``), run it (``kuiper.load_hlo``).

This package is also the built-in plugin "hlo": it registers the HLO frontend, which translates
instructions into kuiper's canonical op set (it has no ops of its own).
"""

from __future__ import annotations

from .dfg import build_dfg
from .module import HloComputation, HloInstruction, HloModule
from .parser import parse
from .plugin import kuiper_add_frontends

__all__ = [
    "HloComputation", "HloInstruction", "HloModule", "build_dfg", "kuiper_add_frontends", "parse",
]
