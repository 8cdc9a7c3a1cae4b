"""Determinant: the determinant of each square matrix in the last two dims (torch.linalg.det, ONNX Det).

Computed by LU factorization (the backend's linalg.det); half precision in float32, rounded once
(NumPy's linalg has no float16).
"""

from __future__ import annotations

from ..errors import ShapeError
from ..ir import dtypes
from .base import Op


class Determinant(Op):
    types = ("Determinant",)
    arity = 1
    fresh_output = True

    def forward(self, a):
        xp = self.xp
        if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
            raise ShapeError(f"{self.node.describe()}: needs square matrices in the last two dims, found shape "
                             f"{tuple(a.shape)}")
        if dtypes.name_of(a.dtype) == "float16":  # (the array API standard has no float16)
            return xp.astype(self.forward(xp.astype(a, xp.float32)), a.dtype)
        return xp.asarray(xp.linalg.det(a))


OPS = [Determinant]
