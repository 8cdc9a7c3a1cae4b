"""Complex tensors: torch.complex, torch.real, torch.imag, torch.view_as_complex, torch.view_as_real.

A complex tensor is an array of the backend's complex64 (complex128 from float64),
like PyTorch's.  view_as_real adds a last dim of size 2 (real, imaginary) and
view_as_complex removes it; they give new arrays here, since kuiper never writes
into a tensor another op can see.
"""

from __future__ import annotations

from ..errors import ShapeError
from .base import Op


def complex_dtype(xp, dtype):
    """The complex dtype holding values of a real (or complex) dtype; integers go to complex64 as in PyTorch."""
    if xp.isdtype(dtype, "complex floating"):
        return dtype
    return xp.complex128 if dtype == xp.float64 else xp.complex64


def real_dtype(xp, dtype):
    """complex64 -> float32, complex128 -> float64; real dtypes stay."""
    if dtype == xp.complex64:
        return xp.float32
    return xp.float64 if dtype == xp.complex128 else dtype


def make_complex(xp, real, imag):
    dtype = complex_dtype(xp, xp.result_type(real, imag))
    return xp.astype(real, dtype) + xp.astype(imag, dtype) * 1j


class Complex(Op):
    types = ("Complex",)
    input_names = ("real", "imag")

    def forward(self, *inputs):
        xp = self.xp
        real, imag = self.ordered(inputs)
        if not (xp.isdtype(real.dtype, "real floating") and real.dtype == imag.dtype):
            raise ShapeError(f"{self.node.describe()}: needs two float tensors of one dtype, "
                             f"found {real.dtype} and {imag.dtype}")
        return make_complex(xp, real, imag)


class RealPart(Op):
    """torch.real: the real part; a real tensor is returned as it is."""

    types = ("RealPart",)
    arity = 1

    def forward(self, x):
        return self.xp.real(x) if self.xp.isdtype(x.dtype, "complex floating") else x


class ImagPart(Op):
    types = ("ImagPart",)
    arity = 1

    def forward(self, x):
        if not self.xp.isdtype(x.dtype, "complex floating"):
            raise ShapeError(f"{self.node.describe()}: needs a complex tensor, found {x.dtype}")
        return self.xp.imag(x)


class ViewAsComplex(Op):
    types = ("ViewAsComplex",)
    arity = 1

    def forward(self, x):
        xp = self.xp
        if x.ndim < 1 or x.shape[-1] != 2 or not xp.isdtype(x.dtype, "real floating"):
            raise ShapeError(f"{self.node.describe()}: needs a float tensor whose last dim is 2, "
                             f"found {tuple(x.shape)} {x.dtype}")
        return make_complex(xp, x[..., 0], x[..., 1])


class ViewAsReal(Op):
    types = ("ViewAsReal",)
    arity = 1

    def forward(self, x):
        xp = self.xp
        if not xp.isdtype(x.dtype, "complex floating"):
            raise ShapeError(f"{self.node.describe()}: needs a complex tensor, found {x.dtype}")
        return xp.stack([xp.real(x), xp.imag(x)], axis=-1)


OPS = [Complex, RealPart, ImagPart, ViewAsComplex, ViewAsReal]
