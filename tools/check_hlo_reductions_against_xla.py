#!/usr/bin/env python3
"""Compare kuiper's reductions of f16, bf16 and the 8-bit floats with XLA's CPU backend, bit for bit.

  PYTHONPATH=$PWD python tools/check_hlo_reductions_against_xla.py

Needs jax (not a kuiper dependency). For each of f16, bf16, f8e4m3fn and f8e5m2: reduces of one to
three dims (sizes up to 2,000, so XLA's TreeReductionRewriter splits some into windows of 32) with
add, maximum and multiply, an identity init and a non-identity one; a padded reduce-window; a
variadic (value, index) argmax. Inputs are seeded random values. Each case prints whether the two
results are bit-identical, else the largest absolute and relative difference; docs/hlo.md
("Reductions of f16, bf16 and the 8-bit floats") says which differ and why.
"""

from __future__ import annotations

import sys

import ml_dtypes
import numpy as np
from check_hlo_opcodes_against_xla import kuiper_run, xla_run

TYPES = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f8e4m3fn": ml_dtypes.float8_e4m3fn,
         "f8e5m2": ml_dtypes.float8_e5m2}
SHAPES = [((7, 100), [1]), ((100, 7), [0]), ((5, 40, 40), [1, 2]), ((3, 33, 5), [0, 1]), ((2, 1100), [1]),
          ((4, 3, 70), [0, 2]), ((2000,), [0]), ((6, 8), [0, 1])]
REDUCERS = [("add", "0"), ("maximum", "-inf"), ("add", "3"), ("multiply", "1")]


def reducer(t: str, opcode: str) -> str:
    return f"r {{\n  a = {t}[] parameter(0)\n  b = {t}[] parameter(1)\n  ROOT s = {t}[] {opcode}(a, b)\n}}\n"


def cases(rng: np.random.Generator):
    """(label, module text, inputs)."""
    for t, dtype in TYPES.items():
        for shape, dims in SHAPES:
            for opcode, init in REDUCERS:
                if t == "f8e4m3fn" and init == "-inf":  # no infinities: its lowest value
                    init = "-448"
                kept = [n for i, n in enumerate(shape) if i not in dims]
                text = (f"HloModule m\n{reducer(t, opcode)}ENTRY e {{\n  p = {t}[{','.join(map(str, shape))}] "
                        f"parameter(0)\n  z = {t}[] constant({init})\n  ROOT o = {t}[{','.join(map(str, kept))}] "
                        f"reduce(p, z), dimensions={{{','.join(map(str, dims))}}}, to_apply=r\n}}\n")
                x = rng.uniform(0.9, 1.1, shape) if opcode == "multiply" else rng.uniform(-4, 4, shape)
                yield f"{t} reduce {list(shape)} dims {dims} {opcode} init {init}", text, [x.astype(dtype)]
        text = (f"HloModule m\n{reducer(t, 'add')}ENTRY e {{\n  p = {t}[2,9,9,3] parameter(0)\n"
                f"  z = {t}[] constant(0)\n  ROOT o = {t}[2,5,5,3] reduce-window(p, z), "
                "window={size=1x3x3x1 stride=1x2x2x1 pad=0_0x1_1x1_1x0_0}, to_apply=r\n}\n")
        yield f"{t} padded reduce-window", text, [rng.uniform(-4, 4, (2, 9, 9, 3)).astype(dtype)]
        text = (f"HloModule m\nr {{\n  a = {t}[] parameter(0)\n  i = s32[] parameter(1)\n  b = {t}[] parameter(2)\n"
                f"  j = s32[] parameter(3)\n  g = pred[] compare(a, b), direction=GE\n  v = {t}[] select(g, a, b)\n"
                f"  k = s32[] select(g, i, j)\n  ROOT t = ({t}[], s32[]) tuple(v, k)\n}}\n"
                f"ENTRY e {{\n  p = {t}[4,50] parameter(0)\n  ii = s32[4,50] iota(), iota_dimension=1\n"
                f"  z = {t}[] constant(-400)\n  zi = s32[] constant(0)\n"
                f"  ROOT o = ({t}[4], s32[4]) reduce(p, ii, z, zi), dimensions={{1}}, to_apply=r\n}}\n")
        yield f"{t} variadic argmax", text, [rng.uniform(-4, 4, (4, 50)).astype(dtype)]


def main() -> int:
    same = total = 0
    for label, text, inputs in cases(np.random.default_rng(0)):
        total += 1
        expected, got = xla_run(text, *inputs), kuiper_run(text, *inputs)
        wide = [(np.asarray(e).astype(np.float64), np.asarray(g).astype(np.float64)) for e, g in zip(expected, got)]
        if all(e.shape == g.shape and np.array_equal(e, g, equal_nan=True) for e, g in wide):
            same += 1
            continue
        error = max(float(np.max(np.abs(e - g))) for e, g in wide)
        relative = max(float(np.max(np.abs(e - g) / np.maximum(np.abs(e), 1e-30))) for e, g in wide)
        print(f"differs  {label}: largest difference {error:g} (relative {relative:.2g})")
    print(f"{same}/{total} reductions bit-identical to XLA's")
    return 0 if same == total else 1


if __name__ == "__main__":
    sys.exit(main())
