"""RaggedDot: a matmul whose lhs rows come in groups, each group with its own rhs matrix."""

from __future__ import annotations

from ..errors import ShapeError
from .base import Op
from .params import Choice


class RaggedDot(Op):
    """Inputs ``lhs, rhs, group_sizes (g,)``, the groups being runs ``[start_i, start_i + size_i)``.

    ``ragged="rows"``: lhs (m, k), rhs (g, k, n) -> (m, n): the rows of group i times ``rhs[i]``;
    rows past the last group are 0. ``ragged="contracting"``: lhs (m, k), rhs (k, n) -> (g, m, n):
    result i sums over group i of k only. (XLA's ragged-dot with a ragged lhs row or contracting dim.)
    """

    types = ("RaggedDot",)
    arity = 3
    fresh_output = True
    params = (Choice("ragged", ("rows", "contracting"), default="rows"),)

    def forward(self, lhs, rhs, group_sizes):
        if self.ragged == "contracting":
            return self.contracting(lhs, rhs, group_sizes)
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

    def contracting(self, lhs, rhs, group_sizes):
        xp = self.xp
        if lhs.ndim != 2 or rhs.ndim != 2 or group_sizes.ndim != 1 or lhs.shape[1] != rhs.shape[0]:
            raise ShapeError(f"{self.node.describe()}: needs lhs (m, k), rhs (k, n) and group sizes (g,), found "
                             f"{lhs.shape}, {rhs.shape} and {group_sizes.shape}")
        out = xp.zeros((group_sizes.shape[0], lhs.shape[0], rhs.shape[1]), dtype=lhs.dtype)
        start = 0
        for group, size in enumerate(int(s) for s in self.backend.to_numpy(group_sizes)):
            stop = min(max(start + size, start), lhs.shape[1])
            out[group] = xp.matmul(lhs[:, start:stop], rhs[start:stop]).astype(lhs.dtype, copy=False)
            start = stop
        return out


OPS = [RaggedDot]
