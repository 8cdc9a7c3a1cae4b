"""Run HLO modules through kuiper and through XLA's CPU backend (jaxlib) and compare the results.

Needs jax (not a kuiper dependency): ``pip install jax``, then
``python tools/check_hlo_opcodes_against_xla.py``. XLA compiles the HLO text itself (parsed by
jaxlib, converted to StableHLO, compiled for CPU), so each case checks kuiper's meaning of an
opcode against XLA's. Prints one line per case and exits 1 on a mismatch. (XLA's CPU backend does
not run ragged-dot, and async-start/done do not survive jaxlib's HLO -> StableHLO conversion: the
tests check those against float64 NumPy and hand-computed values.)
"""

from __future__ import annotations

import sys

import jax
import jaxlib._jax as xla
import numpy as np
from jaxlib import _hlo

import kuiper

jax.config.update("jax_enable_x64", True)  # u64 and s64 arguments stay 64-bit
RNG = np.random.default_rng(0)


def xla_run(text: str, *args) -> list[np.ndarray]:
    module = xla.mlir.hlo_to_stablehlo(_hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto())
    cpu = jax.devices("cpu")[0]
    executable = cpu.client.compile_and_load(module, xla.DeviceList((cpu,)), xla.CompileOptions())
    results = executable.execute_sharded([jax.device_put(a, cpu) for a in args])
    return [np.asarray(r[0]) for r in results.disassemble_into_single_device_arrays()]


def kuiper_run(text: str, *args) -> list[np.ndarray]:
    result = kuiper.load_hlo(text, backend="numpy")(*args, to_numpy=True)
    return [np.asarray(r) for r in result] if isinstance(result, tuple) else [np.asarray(result)]


def module(parameters: list[str], root: str, computations: str = "") -> str:
    declared = "\n".join(f"  p{i} = {shape} parameter({i})" for i, shape in enumerate(parameters))
    return f"HloModule check\n{computations}\nENTRY main {{\n{declared}\n  {root}\n}}\n"


def spd(n: int) -> np.ndarray:
    m = RNG.standard_normal((n, n))
    return (m @ m.T + n * np.eye(n)).astype(np.float32)


def triangular() -> np.ndarray:
    """A well-conditioned matrix (either triangle is solvable)."""
    return (RNG.standard_normal((3, 3)) + 3 * np.eye(3)).astype(np.float32)


X23 = RNG.standard_normal((2, 3)).astype(np.float32)
ADD = "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] add(a, b)\n}\n"
TRIANGULAR = "ROOT r = f32[3,2] triangular-solve(p0, p1), left_side=true, lower={}, unit_diagonal={}, transpose_a={}"
CASES = [
    ("cholesky lower", module(["f32[4,4]"], "ROOT r = f32[4,4] cholesky(p0), lower=true"), [spd(4)]),
    ("cholesky upper", module(["f32[4,4]"], "ROOT r = f32[4,4] cholesky(p0), lower=false"), [spd(4)]),
    ("cholesky not positive definite", module(["f32[2,2]"], "ROOT r = f32[2,2] cholesky(p0), lower=true"),
     [np.float32([[1, 2], [2, 1]])]),
    *[(f"triangular-solve lower={lower} unit={unit} {transpose}",
       module(["f32[3,3]", "f32[3,2]"], TRIANGULAR.format(lower, unit, transpose)),
       [triangular(), RNG.standard_normal((3, 2)).astype(np.float32)])
      for lower in ("true", "false") for unit in ("true", "false") for transpose in ("NO_TRANSPOSE", "TRANSPOSE")],
    ("triangular-solve right side", module(["f32[3,3]", "f32[2,3]"], "ROOT r = f32[2,3] triangular-solve(p0, p1), "
                                           "left_side=false, lower=true, transpose_a=NO_TRANSPOSE"),
     [triangular(), RNG.standard_normal((2, 3)).astype(np.float32)]),
    ("fft", module(["c64[2,8]"], "ROOT r = c64[2,8] fft(p0), fft_type=FFT, fft_length={8}"),
     [(RNG.standard_normal((2, 8)) + 1j * RNG.standard_normal((2, 8))).astype(np.complex64)]),
    ("ifft 2-d", module(["c64[4,8]"], "ROOT r = c64[4,8] fft(p0), fft_type=IFFT, fft_length={4,8}"),
     [(RNG.standard_normal((4, 8)) + 1j * RNG.standard_normal((4, 8))).astype(np.complex64)]),
    ("rfft", module(["f32[3,8]"], "ROOT r = c64[3,5] fft(p0), fft_type=RFFT, fft_length={8}"),
     [RNG.standard_normal((3, 8)).astype(np.float32)]),
    ("irfft", module(["c64[3,5]"], "ROOT r = f32[3,8] fft(p0), fft_type=IRFFT, fft_length={8}"),
     [(RNG.standard_normal((3, 5)) + 1j * RNG.standard_normal((3, 5))).astype(np.complex64)]),
    ("batch-norm-inference", module(["f32[2,3,4]", "f32[3]", "f32[3]", "f32[3]", "f32[3]"],
                                    "ROOT r = f32[2,3,4] batch-norm-inference(p0, p1, p2, p3, p4), epsilon=0.001, "
                                    "feature_index=1"),
     [RNG.standard_normal((2, 3, 4)).astype(np.float32), *[RNG.random(3).astype(np.float32) + 0.5 for _ in range(4)]]),
    ("batch-norm-training", module(["f32[2,3,4]", "f32[4]", "f32[4]"],
                                   "ROOT r = (f32[2,3,4], f32[4], f32[4]) batch-norm-training(p0, p1, p2), "
                                   "epsilon=0.001, feature_index=2"),
     [RNG.standard_normal((2, 3, 4)).astype(np.float32), *[RNG.random(4).astype(np.float32) for _ in range(2)]]),
    ("batch-norm-grad", module(["f32[2,3,4]", "f32[3]", "f32[3]", "f32[3]", "f32[2,3,4]"],
                               "ROOT r = (f32[2,3,4], f32[3], f32[3]) batch-norm-grad(p0, p1, p2, p3, p4), "
                               "epsilon=0.001, feature_index=1"),
     [RNG.standard_normal((2, 3, 4)).astype(np.float32), RNG.random(3).astype(np.float32),
      RNG.random(3).astype(np.float32), RNG.random(3).astype(np.float32) + 0.5,
      RNG.standard_normal((2, 3, 4)).astype(np.float32)]),
    ("stochastic-convert f32 to s8", module(["f32[64]", "u32[64]"], "ROOT r = s8[64] stochastic-convert(p0, p1)"),
     [(RNG.standard_normal(64) * 100).astype(np.float32), RNG.integers(0, 2**32, 64, dtype=np.uint32)]),
    ("rng-bit-generator philox u64[3] state", module(["u64[3]"], "ROOT r = (u64[3], u32[5,3]) "
                                                     "rng-bit-generator(p0), algorithm=rng_philox"),
     [np.uint64([7, 2**64 - 3, 11])]),
    # (XLA's CPU backend returns u32 for s32 bits, the same bits: compared as u32 here.)
    ("rng-bit-generator threefry", module(["u64[2]"], "ROOT r = (u64[2], u32[3,3]) "
                                              "rng-bit-generator(p0), algorithm=rng_three_fry"), [np.uint64([3, 4])]),
    ("all-reduce", module(["f32[2,3]"], "ROOT r = f32[2,3] all-reduce(p0), replica_groups={}, to_apply=add", ADD),
     [X23]),
    ("collective-permute to no one", module(["f32[2,3]"], "ROOT r = f32[2,3] collective-permute(p0), "
                                            "source_target_pairs={}"), [X23]),
    ("after-all, add-dependency", module(["f32[2,3]"], "t = token[] after-all()\n"
                                                       "  ROOT r = f32[2,3] add-dependency(p0, t)"), [X23]),
    ("get-dimension-size", module(["f32[2,3]"], "ROOT r = s32[] get-dimension-size(p0), dimensions={1}"), [X23]),
    ("s32 convolution (a 3x3 weight, 16 channels)",
     module(["s32[1,16,12,12]", "s32[16,16,3,3]"], "ROOT r = s32[1,16,10,10] convolution(p0, p1), window={size=3x3}, "
                                                   "dim_labels=bf01_oi01->bf01"),
     [RNG.integers(-2**24, 2**24, (1, 16, 12, 12)).astype(np.int32),
      RNG.integers(-50, 50, (16, 16, 3, 3)).astype(np.int32)]),
]


def main() -> int:
    failures = 0
    for name, text, args in CASES:
        expected = xla_run(text, *args)
        got = kuiper_run(text, *args)
        same = len(got) == len(expected) and all(
            g.shape == e.shape and g.dtype == e.dtype and np.allclose(g, e, rtol=1e-5, atol=1e-5, equal_nan=True)
            for g, e in zip(got, expected))
        failures += not same
        print(("ok      " if same else "MISMATCH") + f" {name}")
        if not same:
            print("   xla:", [e.ravel()[:6] for e in expected], "\n   kuiper:", [g.ravel()[:6] for g in got])
    print(f"{len(CASES) - failures}/{len(CASES)} cases give XLA's results (jax {jax.__version__}, CPU)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
