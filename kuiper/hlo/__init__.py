"""XLA HLO text: parse it (``parse``), draw its data-flow graph (``HloModule.dfg``), run it."""

from __future__ import annotations

from .module import HloComputation, HloInstruction, HloModule
from .parser import parse
from .plugin import (  # this package is the built-in plugin "hlo"
    kuiper_add_frontends,
    kuiper_add_ops,
)

__all__ = ["HloComputation", "HloInstruction", "HloModule", "parse"]
