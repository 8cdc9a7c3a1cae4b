"""The ``window={size=3x3 stride=2x2 pad=1_1x0_0 lhs_dilate=1x1 rhs_dilate=2x2 rhs_reversal=0x1}`` attribute."""

from __future__ import annotations

from collections.abc import Callable

from ..errors import KuiperError


def parse_window(window, rank: int, error: Callable[[str], KuiperError]) -> dict:
    """Each field as ``rank`` numbers (pads as (low, high) pairs); absent fields take XLA's defaults."""
    if not isinstance(window, dict):
        raise error(f"window={window!r} is not a window description")

    def numbers(key, default):
        text = window.get(key)
        if text is None:
            return [default] * rank
        parts = str(text).split("x")
        if len(parts) != rank:
            raise error(f"window {key}={text} has {len(parts)} dims, expected {rank}")
        try:
            return [tuple(int(v) for v in p.split("_")) if "_" in p else int(p) for p in parts]
        except ValueError:
            raise error(f"window {key}={text} is not numbers joined by 'x'") from None

    return {
        "size": numbers("size", 1),
        "stride": numbers("stride", 1),
        "pad": numbers("pad", (0, 0)),
        "lhs_dilate": numbers("lhs_dilate", 1),
        "rhs_dilate": numbers("rhs_dilate", 1),
        "rhs_reversal": numbers("rhs_reversal", 0),
    }
