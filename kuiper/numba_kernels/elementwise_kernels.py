"""One compiled interpreter for fused elementwise float32 programs.

A fused chain (``kuiper.Elementwise``: SiLU, residual add + ReLU, GELU ...) is a
program of a few register operations (``elementwise.py`` lowers the IR to it).
NumPy evaluates such a chain one whole-tensor pass per operation, on one core.
This kernel runs the whole program over ``CHUNK`` elements at a time, in registers
that stay in cache: one read of each input and one write of the output.  The
tensor is split into blocks, which run on separate threads when the work is large
enough to pay for a parallel launch (``runtime.Kernel``).

The kernel is fixed, compiled once (numba's on-disk cache); a model's math is
only data (an int64 code table and a float32 constant table).  Nothing is
generated or executed from model data.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange, types
from numba.extending import overload

from ..ir.erf import ERFC_FIT
from .kernel_codes import (ABS, ADD, CEIL, CHUNK, COPY, COS, DIV, EQ, ERF, EXP, EXPM1, FLOOR, GE,
                           GT, LE, LOAD, LOG, LOG1P, LT, MAX, MIN, MUL, MULADD, NE, NEG, NOT, POW,
                           SELECT, SIN, SQRT, STORE, SUB, TANH, TO_BOOL, TRUNC)
from .runtime import kernel


@kernel(error_model="numpy")
def run_program(code, constant_registers, constant_values, registers, blocks, x0, x1, x2, x3, x4, x5, x6, x7, out):
    """Evaluate ``code`` over every element of ``out`` (1-D, float32), in ``blocks`` tasks;
    the inputs x0..x7 (PROGRAM_INPUTS slots: an LSTM cell's gates read seven) have its size."""
    size = out.size
    per_block = ((size + blocks - 1) // blocks + CHUNK - 1) // CHUNK * CHUNK
    for block in prange(blocks):
        _run_range(code, constant_registers, constant_values, registers, block * per_block,
                   min(size, (block + 1) * per_block), x0, x1, x2, x3, x4, x5, x6, x7, out)


@kernel(error_model="numpy")
def run_small(code, constant_registers, constant_values, registers, x0, x1, x2, x3, x4, x5, x6, x7, out):
    """``run_program`` on the calling thread (its ``serial`` build only) for a small call, the inputs as the
    caller has them: each of ``out``'s shape, any rank, read flat here (one in another order copied to C
    order first, as NumPy's ravel does).  False, with nothing written, where an input has another shape.
    Flattening and checking here, not in Python, saves ~1 us of a Flax LSTM cell's 4.4 (seven inputs)."""
    shape = out.shape
    if (x0.shape != shape or x1.shape != shape or x2.shape != shape or x3.shape != shape or x4.shape != shape
            or x5.shape != shape or x6.shape != shape or x7.shape != shape):
        return False
    _run_range(code, constant_registers, constant_values, registers, 0, out.size, x0.ravel(), x1.ravel(),
               x2.ravel(), x3.ravel(), x4.ravel(), x5.ravel(), x6.ravel(), x7.ravel(), out.reshape(-1))
    return True


@njit(nogil=True, error_model="numpy")
def _run_range(code, constant_registers, constant_values, registers, first, stop, x0, x1, x2, x3, x4, x5, x6, x7,
               out):
    """``run_chunks`` over out[first:stop] with eight input slots; the registers only as wide as the range
    (a call on 128 elements filled 4096-element registers: a third of its time)."""
    regs, scratch = workspace(constant_registers, constant_values, registers, stop - first)
    width = regs.shape[1]
    for start in range(first, stop, width):
        count = min(width, stop - start)
        for row in range(code.shape[0]):
            op, dest, a = code[row, 0], code[row, 1], code[row, 2]
            if op == LOAD and a >= 4:
                if a == 4:
                    _copy(regs[dest], x4[start:start + count], count)
                elif a == 5:
                    _copy(regs[dest], x5[start:start + count], count)
                elif a == 6:
                    _copy(regs[dest], x6[start:start + count], count)
                else:
                    _copy(regs[dest], x7[start:start + count], count)
            elif op == LOAD or op == STORE:
                _step(op, regs, scratch, dest, a, code[row, 3], code[row, 4], count, start, x0, x1, x2, x3, out)
            else:
                _compute(op, regs, scratch, dest, a, code[row, 3], code[row, 4], count)


@njit(nogil=True, error_model="numpy")
def workspace(constant_registers, constant_values, registers, width):
    """Registers of ``width`` elements (at most CHUNK) with the constants filled in, and exp's scratch.

    A constant register below 0 (-1 - r) is only ever read as one value (its first element): only
    that is filled.  Made once per task: a caller that runs the program over many short ranges (a
    conv's output planes) passes the same workspace to every ``run_chunks`` call.
    """
    width = max(1, min(CHUNK, width))
    regs = np.empty((registers, width), np.float32)
    scratch = np.empty((3, width), np.int32)  # exp's exponent bits; erf's, tanh's and log's working values
    for k in range(constant_registers.size):
        register = constant_registers[k]
        if register >= 0:
            regs[register, :] = constant_values[k]
        else:
            regs[-1 - register, 0] = constant_values[k]
    return regs, scratch


@njit(nogil=True, error_model="numpy")
def run_chunks(code, regs, scratch, first, stop, x0, x1, x2, x3, out):
    """Evaluate ``code`` over out[first:stop] (1-D), a register's width at a time, its inputs in four
    slots (the conv kernels' epilogues; ``run_program`` has eight).

    Each chunk loads every input before it stores, so ``out`` may be one of the inputs
    (a conv's epilogue runs in place on the conv's output).
    """
    width = regs.shape[1]
    for start in range(first, stop, width):
        count = min(width, stop - start)
        for row in range(code.shape[0]):
            _step(code[row, 0], regs, scratch, code[row, 1], code[row, 2], code[row, 3], code[row, 4],
                  count, start, x0, x1, x2, x3, out)


@njit(error_model="numpy")
def _step(op, regs, scratch, dest, a, b, c, count, start, x0, x1, x2, x3, out):
    if op == LOAD:
        # Slices, then a range() index: a signed ``start + i`` index gets numba's negative-index
        # wrap-around branch, which stops LLVM from vectorising the copy.
        if a == 0:
            _copy(regs[dest], x0[start:start + count], count)
        elif a == 1:
            _copy(regs[dest], x1[start:start + count], count)
        elif a == 2:
            _copy(regs[dest], x2[start:start + count], count)
        else:
            _copy(regs[dest], x3[start:start + count], count)
    elif op == STORE:
        _copy(out[start:start + count], regs[a], count)
    else:
        _compute(op, regs, scratch, dest, a, b, c, count)


@njit(error_model="numpy")
def _compute(op, regs, scratch, dest, a, b, c, count):
    """One step that neither loads nor stores, registers to a register.  A function of its own, called
    without the input and output arrays: passing those seven arrays to every step cost 110 ns a step,
    a third of a small call (ten adds on 128 elements: 2.45 us -> 1.58)."""
    if op == EXP:
        vector_exp(regs[dest], regs[a], count, scratch)
    elif op == ERF:
        _erf(regs[dest], regs[a], count, scratch)
    elif op == TANH:
        _tanh(regs[dest], regs[a], count, scratch)
    elif op == LOG:
        vector_log(regs[dest], regs[a], count, scratch)
    elif op == LOG1P:
        _log1p(regs[dest], regs[a], count, scratch)
    elif op == EXPM1:
        _expm1(regs[dest], regs[a], count, scratch)
    elif op < ADD:
        _unary(op, regs[dest], regs[a], count)
    elif op < SELECT:
        # An operand register below 0 (-1 - r) holds one constant value (elementwise.Program):
        # streaming a register of one repeated value costs a third of a step's memory traffic.
        if b < 0:
            _binary(op, regs[dest], regs[a], regs[-1 - b, 0], count)
        elif a < 0:
            _binary(op, regs[dest], regs[-1 - a, 0], regs[b], count)
        else:
            _binary(op, regs[dest], regs[a], regs[b], count)
    elif op == MULADD:
        _multiply_add(regs, dest, a, b, c, count)
    else:
        target, cond, yes, no = regs[dest], regs[a], regs[b], regs[c]
        for i in range(count):
            # Both loads first: a load under the condition is not known to be safe to do always,
            # so LLVM kept the branch (0.65 ns an element, against 0.15 as a vector blend).
            when_true, when_false = yes[i], no[i]
            target[i] = when_true if cond[i] != 0 else when_false


def _element(values, i):
    """values[i], or values itself where it is one constant value: the loops below are written once
    and numba compiles them for each mix of register rows and constants."""
    raise NotImplementedError("compiled only (numba's overload below)")


@overload(_element, inline="always")
def _element_of(values, i):
    if isinstance(values, types.Array):
        return lambda values, i: values[i]
    return lambda values, i: values


@njit(error_model="numpy")
def _multiply_add(regs, dest, a, b, c, count):
    """regs[dest] = regs[a] * regs[b] + regs[c], b and c read once where they hold a constant
    (below 0: the register -1 - b, -1 - c).  No FMA: the product is rounded, as NumPy's is."""
    target, x = regs[dest], regs[a]
    if b >= 0 and c >= 0:
        _multiply_add_loop(target, x, regs[b], regs[c], count)
    elif b >= 0:
        _multiply_add_loop(target, x, regs[b], regs[-1 - c, 0], count)
    elif c >= 0:
        _multiply_add_loop(target, x, regs[-1 - b, 0], regs[c], count)
    else:
        _multiply_add_loop(target, x, regs[-1 - b, 0], regs[-1 - c, 0], count)


@njit(error_model="numpy")
def _multiply_add_loop(target, x, y, z, count):
    for i in range(count):
        target[i] = x[i] * _element(y, i) + _element(z, i)


# exp in float32 with arithmetic only, so that LLVM vectorises it (libm's expf is a scalar call,
# 2-3x slower than NumPy's SIMD exp).  exp(x) = 2^k * e^r, k = round(x / ln 2), |r| <= ln(2)/2,
# e^r by its Taylor polynomial to r^7 (truncation below 6e-9 relative), ln 2 split in two so
# that k * LN2_HIGH is exact (Cody and Waite).  2^k is built from exponent bits in two halves,
# so that the denormal results (x down to -103.97) and overflow to inf come out right.
_F = np.float32
EXP_LOW, EXP_HIGH = _F(-104.0), _F(89.0)  # exp is 0 below (under 2^-150), inf above
LOG2E = _F(1.4426950408889634)
LN2_HIGH, LN2_LOW = _F(0.693359375), _F(-2.12194440e-4)
T7, T6, T5, T4, T3, T2 = _F(1 / 5040), _F(1 / 720), _F(1 / 120), _F(1 / 24), _F(1 / 6), _F(0.5)
ONE, HALF = _F(1.0), _F(0.5)
# The polynomials may fuse a multiply and an add into one FMA (one rounding instead of two):
# no less accurate, and 1.4x faster for erf (GELU) and exp (sigmoid, SiLU, softmax).  Only
# contraction: no reassociation, and NaN and inf keep their meaning.
CONTRACT = {"contract"}
ERFC_C = tuple(_F(c) for c in ERFC_FIT)


@njit(error_model="numpy", fastmath=CONTRACT)
def vector_exp(target, x, count, scratch):
    low_bits, high_bits = scratch[0], scratch[1]
    for i in range(count):
        v = x[i]
        v = v if v > EXP_LOW else EXP_LOW  # NaN goes to EXP_LOW here; the second loop restores it
        v = v if v < EXP_HIGH else EXP_HIGH
        k = np.floor(v * LOG2E + HALF)
        r = (v - k * LN2_HIGH) - k * LN2_LOW
        target[i] = ((((((T7 * r + T6) * r + T5) * r + T4) * r + T3) * r + T2) * r + ONE) * r + ONE
        exponent = np.int32(k)
        half = exponent >> 1
        low_bits[i] = (half + 127) << 23
        high_bits[i] = (exponent - half + 127) << 23
    low_scale, high_scale = low_bits.view(np.float32), high_bits.view(np.float32)
    for i in range(count):
        v = x[i]
        scaled = target[i] * low_scale[i] * high_scale[i]
        target[i] = v if v != v else scaled


@njit(error_model="numpy", fastmath=CONTRACT)
def _erf(target, x, count, scratch):
    """erf by the same erfc fit as the NumPy path's float32 erf (kuiper/ir/erf.py), with _exp."""
    argument = scratch[2].view(np.float32)
    for i in range(count):
        z = abs(x[i])
        t = ONE / (ONE + HALF * z)
        poly = t * ERFC_C[9]
        poly = (poly + ERFC_C[8]) * t
        poly = (poly + ERFC_C[7]) * t
        poly = (poly + ERFC_C[6]) * t
        poly = (poly + ERFC_C[5]) * t
        poly = (poly + ERFC_C[4]) * t
        poly = (poly + ERFC_C[3]) * t
        poly = (poly + ERFC_C[2]) * t
        poly = (poly + ERFC_C[1]) * t
        argument[i] = -z * z + poly + ERFC_C[0]
    vector_exp(target, argument, count, scratch)
    for i in range(count):
        z = abs(x[i])
        erfc = ONE / (ONE + HALF * z) * target[i]
        target[i] = erfc - ONE if x[i] < 0 else ONE - erfc


# tanh(x)/x near 0 as a polynomial in x*x: the Taylor series' first nine terms (2^2n (2^2n - 1) B_2n
# / (2n)!), whose truncation is under 5e-9 relative for |x| < TANH_SERIES_LIMIT.  Beyond the limit
# tanh |x| = 1 - 2 / (exp(2|x|) + 1) is at least 0.5, so that difference loses under 2 ulps.
TANH_SERIES_LIMIT = _F(0.55)
TANH_SERIES = tuple(_F(c) for c in (1.0, -1 / 3, 2 / 15, -17 / 315, 62 / 2835, -1382 / 155925, 21844 / 6081075,
                                    -929569 / 638512875, 6404582 / 10854718875))
TWO = _F(2.0)


@njit(error_model="numpy", fastmath=CONTRACT)
def _tanh(target, x, count, scratch):
    """tanh with exp's arithmetic (libm's tanhf is a scalar call, 20 ns an element here); both
    branches are computed and one selected, so that the loops vectorise."""
    argument = scratch[2].view(np.float32)
    for i in range(count):
        argument[i] = TWO * abs(x[i])
    vector_exp(target, argument, count, scratch)  # inf above |x| = 44.5: the far branch gives 1
    for i in range(count):
        v = x[i]
        z = v * v
        series = z * TANH_SERIES[8] + TANH_SERIES[7]
        series = series * z + TANH_SERIES[6]
        series = series * z + TANH_SERIES[5]
        series = series * z + TANH_SERIES[4]
        series = series * z + TANH_SERIES[3]
        series = series * z + TANH_SERIES[2]
        series = series * z + TANH_SERIES[1]
        series = (series * z + TANH_SERIES[0]) * v
        far = math.copysign(ONE - TWO / (target[i] + ONE), v)  # NaN stays NaN
        target[i] = series if abs(v) < TANH_SERIES_LIMIT else far


# log(x) = e ln 2 + log(m), x = m 2^e with m in [sqrt(1/2), sqrt(2)); log(m) = 2 atanh(s), s = (m - 1) /
# (m + 1), |s| <= 0.172, by its series to s^11 (truncation under 2e-9 relative).  Denormals are
# scaled by 2^23 first.  The same split ln 2 as exp's: e * LN2_HIGH is exact.
SQRT_TWO = _F(1.4142135623730951)
SMALLEST_NORMAL, DENORMAL_SCALE = _F(1.1754943508222875e-38), _F(8388608.0)
ATANH_SERIES = tuple(_F(2.0 / (2 * k + 1)) for k in range(6))  # 2, 2/3, 2/5, ... 2/11


@njit(error_model="numpy", fastmath=CONTRACT)
def vector_log(target, x, count, scratch):
    """log with arithmetic and bit masks only (libm's logf is a scalar call, 4.4 ns an element here)."""
    value_bits = scratch[2]
    values = value_bits.view(np.float32)
    exponents = scratch[0]
    for i in range(count):
        v = x[i]
        values[i] = v * DENORMAL_SCALE if v < SMALLEST_NORMAL else v
    for i in range(count):
        bits = value_bits[i]
        exponents[i] = ((bits >> 23) & 255) - 127
        value_bits[i] = (bits & 0x007FFFFF) | 0x3F800000  # the mantissa as a number in [1, 2)
    for i in range(count):
        v = x[i]
        m = values[i]
        e = _F(exponents[i]) - (_F(23.0) if v < SMALLEST_NORMAL else _F(0.0))
        high = m > SQRT_TWO
        m = m * HALF if high else m
        e = e + ONE if high else e
        s = (m - ONE) / (m + ONE)
        z = s * s
        series = z * ATANH_SERIES[5] + ATANH_SERIES[4]
        series = series * z + ATANH_SERIES[3]
        series = series * z + ATANH_SERIES[2]
        series = series * z + ATANH_SERIES[1]
        result = e * LN2_HIGH + (e * LN2_LOW + (s * z * series + s * ATANH_SERIES[0]))
        result = v if v != v or v == np.inf else result
        result = -np.inf if v == 0 else result
        target[i] = np.nan if v < 0 else result


@njit(error_model="numpy", fastmath=CONTRACT)
def _log1p(target, x, count, scratch):
    """log1p(x) = log(u) * x / (u - 1), u = 1 + x rounded: the quotient undoes u's rounding (Goldberg),
    so a small x keeps its digits; where u rounds to 1, log1p(x) is x."""
    sums = scratch[1].view(np.float32)  # not target: a log in place would not vectorise (aliasing)
    for i in range(count):
        sums[i] = ONE + x[i]
    vector_log(target, sums, count, scratch)  # it uses scratch rows 0 and 2
    for i in range(count):
        v = x[i]
        u = ONE + v
        corrected = target[i] if u == np.inf else target[i] * (v / (u - ONE))
        target[i] = v if u == ONE else corrected


# expm1(x) / x near 0: the Taylor series to x^12 / 13! (truncation under 2e-10 relative for |x| < 1).
# Beyond, exp(x) - 1 is at least 0.63 in size, so the difference loses under 2 ulps.
EXPM1_SERIES = tuple(_F(1.0 / math.factorial(k + 1)) for k in range(13))


@njit(error_model="numpy", fastmath=CONTRACT)
def _expm1(target, x, count, scratch):
    """expm1 with exp's arithmetic (libm's expm1f is a scalar call, 14 ns an element here)."""
    vector_exp(target, x, count, scratch)
    for i in range(count):
        v = x[i]
        series = v * EXPM1_SERIES[12] + EXPM1_SERIES[11]
        for k in range(10, -1, -1):
            series = series * v + EXPM1_SERIES[k]
        near = v * series
        target[i] = near if abs(v) < ONE else target[i] - ONE  # NaN: exp's NaN


@njit(error_model="numpy")
def _copy(target, source, count):
    for i in range(count):
        target[i] = source[i]


@njit(error_model="numpy")
def _unary(op, target, x, count):
    one = np.float32(1.0)
    zero = np.float32(0.0)
    if op == NEG:
        for i in range(count):
            target[i] = -x[i]
    elif op == ABS:
        for i in range(count):
            target[i] = abs(x[i])
    elif op == SQRT:
        for i in range(count):
            target[i] = np.sqrt(x[i])
    elif op == FLOOR:
        for i in range(count):
            target[i] = np.floor(x[i])
    elif op == CEIL:
        for i in range(count):
            target[i] = np.ceil(x[i])
    elif op == TRUNC:
        for i in range(count):
            target[i] = np.trunc(x[i])
    elif op == SIN:
        for i in range(count):
            target[i] = math.sin(x[i])
    elif op == COS:
        for i in range(count):
            target[i] = math.cos(x[i])
    elif op == NOT:
        for i in range(count):
            target[i] = one if x[i] == zero else zero
    elif op == TO_BOOL:
        for i in range(count):
            target[i] = zero if x[i] == zero else one  # NaN is true, as bool(nan)
    else:  # COPY
        for i in range(count):
            target[i] = x[i]


@njit(error_model="numpy")
def _binary(op, target, x, y, count):
    """target = x op y elementwise; x or y may be one constant value (a float32 scalar), read once."""
    one = np.float32(1.0)
    zero = np.float32(0.0)
    if op == ADD:
        for i in range(count):
            target[i] = _element(x, i) + _element(y, i)
    elif op == SUB:
        for i in range(count):
            target[i] = _element(x, i) - _element(y, i)
    elif op == MUL:
        for i in range(count):
            target[i] = _element(x, i) * _element(y, i)
    elif op == DIV:
        for i in range(count):
            target[i] = _element(x, i) / _element(y, i)
    elif op == POW:
        for i in range(count):
            target[i] = _element(x, i) ** _element(y, i)
    elif op == MAX:  # NaN-propagating, as np.maximum (two selects, so that LLVM vectorises)
        for i in range(count):
            u, v = _element(x, i), _element(y, i)
            larger = u if u > v else v
            target[i] = u if u != u else larger
    elif op == MIN:
        for i in range(count):
            u, v = _element(x, i), _element(y, i)
            smaller = u if u < v else v
            target[i] = u if u != u else smaller
    elif op == GT:
        for i in range(count):
            target[i] = one if _element(x, i) > _element(y, i) else zero
    elif op == GE:
        for i in range(count):
            target[i] = one if _element(x, i) >= _element(y, i) else zero
    elif op == LT:
        for i in range(count):
            target[i] = one if _element(x, i) < _element(y, i) else zero
    elif op == LE:
        for i in range(count):
            target[i] = one if _element(x, i) <= _element(y, i) else zero
    elif op == EQ:
        for i in range(count):
            target[i] = one if _element(x, i) == _element(y, i) else zero
    else:  # NE
        for i in range(count):
            target[i] = one if _element(x, i) != _element(y, i) else zero
