"""ONNX DFT -> the canonical FourierTransform over the signal axis, moved innermost and back.

ONNX holds a signal's real and imaginary parts in a last dim of 2 (or 1: real), the canonical op
complex numbers: ViewAsComplex and ViewAsReal cross between the two. ``onesided`` keeps the n//2+1
non-negative frequencies of a real signal (``rfft``); with ``inverse`` it goes back to a real signal
(``irfft``).
"""

from __future__ import annotations

from ..model_ir import OpNode
from .emit import Emit
from .site import Site

COMPLEX_OF = {"float32": "complex64", "float64": "complex128"}


def translate_dft(site: Site) -> list[OpNode]:
    shape = site.static_shape(0)
    rank = len(shape)
    dtype = site.dtype(0)
    if dtype not in COMPLEX_OF or shape[-1] not in (1, 2):
        raise site.error(f"needs float32/float64 input whose last dim is 1 (real) or 2 (complex), found {dtype} "
                         f"{list(shape)}")
    if site.opset >= 20:
        axis = site.constant_ints(2, "axis")[0] if site.has_input(2) else -2
    else:
        axis = site.int_("axis", 1)
    axis %= rank
    if axis == rank - 1:
        raise site.error("the axis must not be the last dim (it holds the real and imaginary parts)")
    inverse, onesided = site.int_("inverse", 0), site.int_("onesided", 0)
    if site.has_input(1):
        length = site.constant_ints(1, "dft_length")[0]
    else:  # a one-sided spectrum of m bins comes from a signal of 2 (m - 1)
        length = 2 * (shape[axis] - 1) if inverse and onesided else shape[axis]
    real = shape[-1] == 1
    emit = Emit(site)
    complex_dtype = COMPLEX_OF[dtype]
    parts = site.input(0)
    if real and not onesided:  # a zero imaginary part: the full transform of a real signal
        zeros = {"low": [0] * rank, "high": [0] * (rank - 1) + [1], "value": 0.0}
        parts, real = emit.op("Pad", [parts], zeros, dtype=dtype), False
    signal = emit.op("Squeeze", [parts], {"dim": [rank - 1]}, dtype=dtype) if real else \
        emit.op("ViewAsComplex", [parts], dtype=complex_dtype)
    inner = rank - 1  # the signal's rank without its parts dim
    order = [d for d in range(inner) if d != axis] + [axis]
    back = sorted(range(inner), key=order.__getitem__)
    if order != list(range(inner)):
        signal = emit.op("Transpose", [signal], {"dims": order}, dtype=emit.dtype(signal))
    if inverse and onesided:
        kind, result_dtype = "irfft", dtype
        if real:
            raise site.error("an inverse one-sided DFT needs a complex (one-sided) input")
    elif onesided:
        if not real:
            raise site.error("a one-sided DFT needs a real input")
        kind, result_dtype = "rfft", complex_dtype
    else:
        kind, result_dtype = ("ifft" if inverse else "fft"), complex_dtype
    spectrum = emit.op("FourierTransform", [signal], {"kind": kind, "lengths": [length]}, dtype=result_dtype)
    if order != list(range(inner)):
        spectrum = emit.op("Transpose", [spectrum], {"dims": back}, dtype=result_dtype)
    if kind == "irfft":
        emit.op("Unsqueeze", [spectrum], {"dim": inner}, dtype=dtype, out=site.outputs[0])
    else:
        emit.op("ViewAsReal", [spectrum], dtype=dtype, out=site.outputs[0])
    return emit.ops


TRANSLATORS = {"DFT": translate_dft}
