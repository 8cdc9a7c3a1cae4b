"""Shape and data movement: ops that rearrange elements without arithmetic."""

from __future__ import annotations

from .base import Op, normalize_axis


class Flatten(Op):
    types = ("torch.flatten",)

    def setup(self):
        self.require_inputs(1)
        self.start_dim = self.int_param("start_dim", default=0)
        self.end_dim = self.int_param("end_dim", default=-1)

    def forward(self, x):
        if x.ndim == 0:
            return self.xp.reshape(x, (1,))
        start = normalize_axis(self.start_dim, x.ndim, self)
        end = normalize_axis(self.end_dim, x.ndim, self)
        if start > end:
            raise self.error(f"start_dim {self.start_dim} comes after end_dim {self.end_dim} for rank {x.ndim}")
        shape = tuple(x.shape[:start]) + (-1,) + tuple(x.shape[end + 1 :])
        return self.xp.reshape(x, shape)


OPS = [Flatten]
