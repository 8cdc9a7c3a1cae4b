"""The numbers the op classes and the compiled loops agree on, in a module without numba.

The op classes build their tables (an elementwise program's code rows, a grid-sample
mode) when a model is built; the loops that read them are compiled only when one first
runs (``runtime.KernelModule``).  Keeping the numbers here lets a model be built, and
run wholly on oneDNN and BLAS, without importing numba.
"""

from __future__ import annotations

# The elementwise interpreter (elementwise_kernels.py).
CHUNK = 4096  # elements per register: 16 KiB, so a program's registers stay in L2
# Opcodes.  A row of the code table is (opcode, destination, a, b, c): register numbers,
# or for LOAD the input slot.  The last row is STORE a (the result).
LOAD, STORE = 0, 1
NEG, ABS, SQRT, EXP, EXPM1, LOG, LOG1P, TANH, ERF, FLOOR, CEIL, TRUNC, SIN, COS, NOT, TO_BOOL, COPY = range(2, 19)
ADD, SUB, MUL, DIV, POW, MAX, MIN, GT, GE, LT, LE, EQ, NE = range(19, 32)
SELECT = 32
MULADD = 33  # dest = a * b + c, rounded after the product as two steps would be
# In a binary step's or a MULADD's row, an operand below 0 is the register -1 - r holding one
# constant value: the step reads that value once instead of streaming the register.
INPUT_SLOTS = 4  # streamed inputs of a conv's epilogue program (run_chunks: x0..x3)
PROGRAM_INPUTS = 8  # streamed inputs of a fused elementwise op's program (run_program: x0..x7)
# What a step costs an element, in multiplies (the interpreter, one thread, 2026-11-26: a multiply
# 0.19 ns, exp 0.71, erf 1.5, tanh 1.3, log 0.9, log1p 1.1,
# expm1 1.0; sin, cos and pow are libm's scalar calls, 4-9 ns).
# A program's work, its elements times its steps' costs, decides whether it runs on every core.
STEP_COST = {EXP: 4, ERF: 8, TANH: 7, LOG: 5, LOG1P: 6, EXPM1: 5, POW: 36, SIN: 21, COS: 44}

# F.grid_sample's modes (grid_sample_kernels.py).
BILINEAR, NEAREST = 0, 1
ZEROS, BORDER, REFLECTION = 0, 1, 2
