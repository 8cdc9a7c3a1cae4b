"""RaggedDot: a matmul whose lhs rows come in groups, each group with its own rhs matrix."""

from __future__ import annotations

from ..errors import ShapeError
from .base import Op


class RaggedDot(Op):
    """Inputs ``lhs (m, k), rhs (g, k, n), group_sizes (g,)``: rows ``[start_i, start_i + size_i)`` of
    lhs times ``rhs[i]``; rows past the last group are 0 (XLA's ragged-dot with a ragged lhs row dim)."""

    types = ("RaggedDot",)
    fresh_output = True

    def setup(self):
        self.require_inputs(3)

    def forward(self, lhs, rhs, group_sizes):
        xp = self.xp
        if lhs.ndim != 2 or rhs.ndim != 3 or group_sizes.shape != (rhs.shape[0],) or lhs.shape[1] != rhs.shape[1]:
            raise ShapeError(f"{self.node.describe()}: needs lhs (m, k), rhs (g, k, n) and group sizes (g,), found "
                             f"{lhs.shape}, {rhs.shape} and {group_sizes.shape}")
        out = xp.zeros((lhs.shape[0], rhs.shape[2]), dtype=lhs.dtype)
        start = 0
        for group, size in enumerate(int(s) for s in self.backend.to_numpy(group_sizes)):
            stop = min(max(start + size, start), lhs.shape[0])
            out[start:stop] = xp.matmul(lhs[start:stop], rhs[group]).astype(lhs.dtype, copy=False)
            start = stop
        return out


OPS = [RaggedDot]
