"""Whether a peer's outputs agree with kuiper's: the largest difference, against float32 noise."""

from __future__ import annotations

import numpy as np


def max_abs_difference(reference: list[np.ndarray], other: list[np.ndarray]) -> float:
    """Largest |reference - other| over all outputs; inf when counts or shapes do not match."""
    if len(reference) != len(other):
        return float("inf")
    worst = 0.0
    for ref, got in zip(reference, other):
        got = np.asarray(got)
        if ref.shape != got.shape:
            return float("inf")
        if ref.size:
            worst = max(worst, float(np.max(np.abs(ref.astype(np.float64) - got.astype(np.float64)))))
    return worst


def agreement_tolerance(scale: float) -> float:
    """float32 engines differ by summation order: allow 1e-3 of the largest output magnitude, at least 1e-4."""
    return max(1e-4, 1e-3 * scale)


def agrees(diff: float, scale: float) -> bool:
    return diff <= agreement_tolerance(scale)
