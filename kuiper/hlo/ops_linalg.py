"""What is left of the HLO dot/convolution ops (now translated into MatMul and Conv): the window
reader that ops_reduce's reduce-window still imports from here, until that op is translated too."""

from __future__ import annotations

from .windows import parse_window as parse_window_attribute


def parse_window(op, rank: int) -> dict:
    """The ``window`` attribute of an HLO op (see kuiper.hlo.windows)."""
    return parse_window_attribute(op.attribute("window", {}), rank, op.error)
