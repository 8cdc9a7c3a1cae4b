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


def dim_labels_problem(text: str) -> str | None:
    """What is wrong with convolution ``dim_labels`` (``b01f_01io->b01f``), or None.

    The input and output name the batch ``b``, the features ``f`` and spatial dims ``0``, ``1`` ...
    once each; the kernel its input ``i`` and output ``o`` features and the same spatial dims.
    """
    parts = text.split("->")
    if len(parts) != 2 or len(parts[0].split("_")) != 2:
        return f"dim_labels={text!r} is not like b01f_01io->b01f"
    lhs, rhs = parts[0].split("_")
    digits = [str(d) for d in range(len(lhs) - 2)]
    if sorted(lhs) != sorted(["b", "f", *digits]) or sorted(rhs) != sorted(["i", "o", *digits]) \
            or sorted(parts[1]) != sorted(["b", "f", *digits]):
        return f"dim_labels={text!r} must name b, f / i, o and spatial dims 0..{len(digits) - 1}, each once"
    return None


def split_dim_labels(text: str, error: Callable[[str], KuiperError]) -> tuple[str, str, str]:
    """``b01f_01io->b01f`` as (input, kernel, output) labels (an ``error`` where dim_labels_problem finds one)."""
    problem = dim_labels_problem(text)
    if problem:
        raise error(problem)
    operands, out = text.split("->")
    lhs, rhs = operands.split("_")
    return lhs, rhs, out
