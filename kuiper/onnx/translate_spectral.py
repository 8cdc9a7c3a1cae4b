"""ONNX DFT -> the canonical FourierTransform over the signal axis, moved innermost and back; STFT -> STFT;
MelWeightMatrix -> elementwise ops on position counters (Iota).

ONNX holds a signal's real and imaginary parts in a last dim of 2 (or 1: real), the canonical op
complex numbers: ViewAsComplex and ViewAsReal cross between the two. ``onesided`` keeps the n//2+1
non-negative frequencies of a real signal (``rfft``); with ``inverse`` it goes back to a real signal
(``irfft``).
"""

from __future__ import annotations

import numpy as np

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


def translate_stft(site: Site) -> list[OpNode]:
    """The canonical STFT without centering (frames start at 0, every frame_step samples, and end inside
    the signal), its window as long as a frame and its transform as long as a frame; its (B, bins, frames,
    2) result transposed to ONNX's (B, frames, bins, 2)."""
    shape = site.static_shape(0)
    dtype = site.dtype(0)
    if dtype not in COMPLEX_OF or len(shape) != 3 or shape[-1] not in (1, 2):
        raise site.error(f"needs a float32/float64 signal [batch, length, 1 or 2], found {dtype} {list(shape)}")
    step = site.constant_ints(1, "frame_step")[0]
    if site.has_input(3):
        length = site.constant_ints(3, "frame_length")[0]
    elif site.has_input(2):
        length = site.static_shape(2)[0]
    else:
        length = shape[1]
    if site.has_input(2) and list(site.static_shape(2)) != [length]:
        raise site.error(f"the window {list(site.static_shape(2))} must be as long as a frame ({length})")
    if step < 1 or not 1 <= length <= shape[1]:
        raise site.error(f"needs frame_step >= 1 and 1 <= frame_length <= the signal's {shape[1]} samples, "
                         f"found {step} and {length}")
    onesided = bool(site.int_("onesided", 1))
    real = shape[-1] == 1
    if onesided and not real:
        raise site.error("a one-sided STFT needs a real signal (its last dim 1)")
    emit = Emit(site)
    signal = emit.op("Squeeze", [site.input(0)], {"dim": [2]}, dtype=dtype) if real else \
        emit.op("ViewAsComplex", [site.input(0)], dtype=COMPLEX_OF[dtype])
    inputs, keys = [signal], ["input"]
    if site.has_input(2):
        inputs.append(emit.convert(site.input(2), dtype))
        keys.append("window")
    params = {"n_fft": length, "hop_length": step, "win_length": length, "center": False, "onesided": onesided,
              "normalized": False, "return_complex": False}
    spectrum = emit.op("STFT", inputs, params, dtype=dtype)
    emit.ops[-1].input_keys = keys
    emit.op("Transpose", [spectrum], {"dims": [0, 2, 1, 3]}, dtype=dtype, out=site.outputs[0])
    return emit.ops


def _floor_divide(emit: Emit, a: str, b: str) -> str:
    """a // b for floats as Python computes it: from the remainder, so that a quotient rounded up to an
    integer does not step past the true floor."""
    remainder = emit.fn("remainder", [a, b])
    quotient = emit.fn("divide", [emit.fn("subtract", [a, remainder]), b])
    zero = emit.const(0.0, emit.dtype(a))
    signs_differ = emit.compare("ne", emit.compare("lt", b, zero), emit.compare("lt", remainder, zero))
    sign_differs = emit.fn("and", [emit.compare("ne", remainder, zero), signs_differ])
    quotient = emit.fn("select", [sign_differs, emit.fn("subtract", [quotient, emit.const(1.0, "float64")]), quotient])
    floor = emit.fn("floor", [quotient])
    above_half = emit.compare("gt", emit.fn("subtract", [quotient, floor]), emit.const(0.5, "float64"))
    return emit.fn("select", [above_half, emit.fn("add", [floor, emit.const(1.0, "float64")]), floor])


def translate_mel_weight_matrix(site: Site) -> list[OpNode]:
    """Triangular filters over the (dft_length // 2 + 1) frequency bins, one per mel bin, as ONNX defines
    them: num_mel_bins + 2 points evenly spaced on the mel scale (mel = 2595 log10(1 + hz / 700), the step
    a (num_mel_bins + 2)-th of the range) mapped back to hertz and to bins, floor((dft_length + 1) hz /
    sample_rate); filter i rises from point i to point i + 1 (1 there) and falls to 0 at point i + 2.
    Computed in float64 from the run-time rate and edges; the two sizes must be known at load."""
    mels, dft_length = site.constant_ints(0, "num_mel_bins")[0], site.constant_ints(1, "dft_length")[0]
    if mels < 1 or dft_length < 1:
        raise site.error(f"needs num_mel_bins >= 1 and dft_length >= 1, found {mels} and {dft_length}")
    bins = dft_length // 2 + 1
    emit = Emit(site)
    wide = "float64"

    def scalar(index: int) -> str:
        return emit.op("Reshape", [emit.convert(site.input(index), wide)], {"shape": []}, dtype=wide)

    rate, lower, upper = scalar(2), scalar(3), scalar(4)
    ln10 = emit.const(np.log(10.0), wide)

    def to_mel(hertz: str) -> str:
        return emit.fn("divide", [emit.fn("multiply", [emit.const(2595.0, wide), emit.fn(
            "log1p", [emit.fn("divide", [hertz, emit.const(700.0, wide)])])]), ln10])

    low = to_mel(lower)
    step = emit.fn("divide", [emit.fn("subtract", [to_mel(upper), low]), emit.const(float(mels + 2), wide)])
    counter = emit.op("Iota", [], {"shape": [mels + 2], "dim": 0, "dtype": wide}, dtype=wide)
    mel_points = emit.fn("add", [emit.fn("multiply", [counter, step]), low])
    hertz = emit.fn("multiply", [emit.const(700.0, wide), emit.fn(
        "expm1", [emit.fn("multiply", [emit.fn("divide", [mel_points, emit.const(2595.0, wide)]), ln10])])])
    points = _floor_divide(emit, emit.fn("multiply", [emit.const(float(dft_length + 1), wide), hertz]), rate)

    def edge(first: int) -> str:  # points first .. first + mels - 1, as a row (1, mels)
        part = emit.op("Slice", [points], {"starts": [first], "limits": [first + mels]}, dtype=wide)
        return emit.op("Reshape", [part], {"shape": [1, mels]}, dtype=wide)

    left, center, right = edge(0), edge(1), edge(2)
    j = emit.op("Iota", [], {"shape": [bins, mels], "dim": 0, "dtype": wide}, dtype=wide)
    zero, one = emit.const(0.0, wide), emit.const(1.0, wide)
    rise_width, fall_width = emit.fn("subtract", [center, left]), emit.fn("subtract", [right, center])
    flat = emit.compare("eq", rise_width, zero)  # the filter's left point is its center: 1 at the center
    rise = emit.fn("select", [flat, one, emit.fn("divide", [emit.fn("subtract", [j, left]),
                                                            emit.fn("select", [flat, one, rise_width])])])
    rising = emit.fn("and", [emit.compare("ge", j, left), emit.compare("le", j, center)])
    falling = emit.fn("and", [emit.compare("gt", j, center), emit.compare("lt", j, right)])
    safe_fall = emit.fn("select", [emit.compare("gt", fall_width, zero), fall_width, one])
    fall = emit.fn("divide", [emit.fn("subtract", [right, j]), safe_fall])
    weights = emit.fn("add", [emit.fn("select", [rising, rise, zero]), emit.fn("select", [falling, fall, zero])])
    emit.convert(weights, site.out_dtype(0), out=site.outputs[0])
    return emit.ops


TRANSLATORS = {"DFT": translate_dft, "STFT": translate_stft, "MelWeightMatrix": translate_mel_weight_matrix}
