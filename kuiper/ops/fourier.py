"""FourierTransform: the discrete Fourier transform over the last ``len(lengths)`` dims.

``kind`` is ``fft`` (complex to complex), ``ifft`` (its inverse, scaled by 1/n), ``rfft`` (real to
the n//2+1 non-negative frequencies of the innermost dim) or ``irfft`` (back to ``lengths``). The
result has the complex (or real) type matching the input's precision.
"""

from __future__ import annotations

from .base import Op
from .params import Choice, Ints

KINDS = ("fft", "ifft", "rfft", "irfft")
COMPLEX_OF = {"float32": "complex64", "float64": "complex128", "complex64": "complex64",
              "complex128": "complex128"}
REAL_OF = {"complex64": "float32", "complex128": "float64"}


class FourierTransform(Op):
    """The ``kind`` of transform over the last ``len(lengths)`` dims, to those lengths."""

    types = ("FourierTransform",)
    arity = 1
    fresh_output = True
    params = (Choice("kind", KINDS), Ints("lengths", low=0))

    def setup(self):
        if not 1 <= len(self.lengths) <= 3:
            raise self.error(f"param 'lengths' must hold 1 to 3 sizes, found {list(self.lengths)}")

    def forward(self, x):
        fft = self.xp.fft
        if len(self.lengths) > x.ndim:
            raise self.error(f"transforms {len(self.lengths)} dims of an input of rank {x.ndim}")
        axes = tuple(range(x.ndim - len(self.lengths), x.ndim))
        transform = getattr(fft, f"{self.kind}n")  # fft.fftn, ifftn, rfftn, irfftn
        result = transform(x, s=self.lengths, axes=axes)
        target = REAL_OF[str(x.dtype)] if self.kind == "irfft" else COMPLEX_OF[str(x.dtype)]
        return result.astype(target, copy=False)


OPS = [FourierTransform]
