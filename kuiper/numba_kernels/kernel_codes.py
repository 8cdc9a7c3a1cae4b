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
INPUT_SLOTS = 4  # streamed inputs per program (x0..x3)

# F.grid_sample's modes (grid_sample_kernels.py).
BILINEAR, NEAREST = 0, 1
ZEROS, BORDER, REFLECTION = 0, 1, 2
