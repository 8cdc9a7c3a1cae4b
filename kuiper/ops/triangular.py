"""Triangular factorisation and solves over the last two dims: Cholesky, TriangularSolve.

Each reads only the triangle it is told to (``lower``), as XLA's cholesky and triangular-solve do,
so whatever the other triangle holds cannot change the result. Half precision is computed in
float32 and rounded once (NumPy's linalg has no float16).
"""

from __future__ import annotations

from ..errors import InputError
from .base import Op
from .params import Bool, Choice


def _triangle(xp, a, lower: bool):
    return xp.tril(a) if lower else xp.triu(a)


def _adjoint(xp, a):
    return xp.conj(xp.swapaxes(a, -1, -2))


class Cholesky(Op):
    """``a = l @ adjoint(l)`` with l lower (``lower``) or ``a = adjoint(u) @ u``; the other triangle is 0.

    A matrix that is not positive definite gives NaNs (as XLA's CPU backend does), not an error.
    """

    types = ("Cholesky",)
    arity = 1
    fresh_output = True
    params = (Bool("lower"),)

    def forward(self, a):
        xp = self.xp
        if a.dtype == xp.float16:  # NumPy's linalg has no half precision: factor in f32, round once
            return xp.astype(self.forward(xp.astype(a, xp.float32)), xp.float16)
        part = _triangle(xp, a, self.lower)
        strict = xp.tril(part, -1) if self.lower else xp.triu(part, 1)
        hermitian = part + _adjoint(xp, strict)  # the one triangle read, mirrored
        lower = self._factor(hermitian)
        return lower if self.lower else _adjoint(xp, lower)

    def _factor(self, hermitian):
        xp = self.xp
        try:
            return xp.linalg.cholesky(hermitian)
        except ValueError:  # NumPy's LinAlgError: a matrix of the batch is not positive definite
            if hermitian.ndim == 2:
                return xp.full(hermitian.shape, xp.nan, dtype=hermitian.dtype)
            return xp.stack([self._factor(matrix) for matrix in hermitian])


class TriangularSolve(Op):
    """Inputs ``a, b``: x with ``op(a) @ x = b`` (``left_side``) or ``x @ op(a) = b``.

    ``op`` is ``transpose_a`` (``none``, ``transpose``, ``adjoint``) applied to a's ``lower`` or
    upper triangle, its diagonal taken as ones when ``unit_diagonal``.
    """

    types = ("TriangularSolve",)
    arity = 2
    fresh_output = True
    params = (Bool("left_side"), Bool("lower"), Bool("unit_diagonal", default=False),
              Choice("transpose_a", ("none", "transpose", "adjoint"), default="none"))

    def forward(self, a, b):
        xp = self.xp
        if a.dtype == xp.float16:  # NumPy's linalg has no half precision: solve in f32, round once
            return xp.astype(self.forward(xp.astype(a, xp.float32), xp.astype(b, xp.float32)), xp.float16)
        a = _triangle(xp, a, self.lower)
        if self.unit_diagonal:
            size = a.shape[-1]
            eye = xp.eye(size, dtype=a.dtype)
            a = a * (1 - eye) + eye
        if self.transpose_a != "none":
            a = xp.swapaxes(a, -1, -2)
            if self.transpose_a == "adjoint":
                a = xp.conj(a)
        if self.left_side:
            return self._solve(a, b)
        # x @ a = b  <=>  a^T @ x^T = b^T
        return xp.swapaxes(self._solve(xp.swapaxes(a, -1, -2), xp.swapaxes(b, -1, -2)), -1, -2)

    def _solve(self, a, b):
        try:
            return self.xp.linalg.solve(a, b).astype(b.dtype, copy=False)
        except ValueError:  # NumPy's LinAlgError
            raise InputError(f"{self.node.describe()}: the triangular matrix has a zero on its diagonal "
                             "(it is singular)") from None


OPS = [Cholesky, TriangularSolve]
