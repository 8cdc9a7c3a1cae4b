"""Run HLO modules through kuiper and through XLA's CPU backend (jaxlib) and compare the results.

Needs jax (not a kuiper dependency): ``pip install jax``, then
``python tools/check_hlo_opcodes_against_xla.py``. XLA compiles the HLO text itself (parsed by
jaxlib, converted to StableHLO, compiled for CPU), so each case checks kuiper's meaning of an
opcode against XLA's (and, for instructions written without a shape, kuiper's inferred shape against
XLA's). Results of the element types NumPy lacks (bf16, f8, s4 ..., through ml_dtypes) are compared
bit for bit. Prints one line per case and exits 1 on a mismatch. (XLA's CPU backend does
not run ragged-dot, and async-start/done do not survive jaxlib's HLO -> StableHLO conversion: the
tests check those against float64 NumPy and hand-computed values.)
"""

from __future__ import annotations

import sys

import jax
import jaxlib._jax as xla
import ml_dtypes
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
# Instructions written without their shape (XLA's parser infers it; so does kuiper's).
NEGATE_OR_COPY = ("negate_branch {\n  x = f32[2,3] parameter(0)\n  ROOT n = negate(x)\n}\n"
                  "copy_branch {\n  y = f32[2,3] parameter(0)\n  ROOT c = copy(y)\n}\n")
SHAPELESS_CASES = [
    ("shapeless dot with batch dims", module(["f32[2,10]", "f32[10,2]"], "ROOT r = dot(p0, p1), lhs_batch_dims={0}, "
                                             "lhs_contracting_dims={1}, rhs_batch_dims={1}, rhs_contracting_dims={0}"),
     [RNG.standard_normal((2, 10)).astype(np.float32), RNG.standard_normal((10, 2)).astype(np.float32)]),
    ("shapeless convolution, stride and uneven pad", module(
        ["f32[1,3,9,9]", "f32[4,3,3,3]"], "ROOT r = convolution(p0, p1), window={size=3x3 stride=2x2 pad=1_0x0_1}, "
                                          "dim_labels=bf01_oi01->bf01"),
     [RNG.standard_normal((1, 3, 9, 9)).astype(np.float32), RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)]),
    ("shapeless depthwise convolution (batch groups, dilations)", module(
        ["f32[16,3,3,64]", "f32[16,2,3,64]"], "ROOT r = convolution(p0, p1), window={size=2x3 pad=1_1x0_0 "
                                              "lhs_dilate=1x3 rhs_dilate=1x2}, dim_labels=f01b_i01o->01fb, "
                                              "batch_group_count=64"),
     [RNG.standard_normal((16, 3, 3, 64)).astype(np.float32), RNG.standard_normal((16, 2, 3, 64)).astype(np.float32)]),
    ("shapeless conditional", module(["pred[]", "f32[2,3]"], "ROOT r = conditional(p0, p1, p1), "
                                     "true_computation=negate_branch, false_computation=copy_branch", NEGATE_OR_COPY),
     [np.bool_(True), X23]),
    ("shapeless s4 dot", module(["s4[5,5]", "s4[5,5]"], "ROOT r = dot(p0, p1), lhs_contracting_dims={1}, "
                                                        "rhs_contracting_dims={0}"),
     [RNG.integers(-8, 8, (5, 5)).astype(ml_dtypes.int4), RNG.integers(-8, 8, (5, 5)).astype(ml_dtypes.int4)]),
]
# The element types NumPy lacks (ml_dtypes): their results are compared bit for bit.
WIDE_F32 = np.concatenate([RNG.standard_normal(40) * 10.0 ** RNG.integers(-3, 4, 40), [448, 464, 1e6, -1e6, 0.0, 3.0]]
                          ).astype(np.float32)
BF16_ADD = "add {\n  a = bf16[] parameter(0)\n  b = bf16[] parameter(1)\n  ROOT c = bf16[] add(a, b)\n}\n"
EXTENDED_TYPE_CASES = [
    *[(f"convert f32 -> {t}", module(["f32[46]"], f"ROOT r = {t}[46] convert(p0)"), [WIDE_F32])
      for t in ("bf16", "f8e5m2", "f8e4m3fn", "f8e4m3b11fnuz", "f8e5m2fnuz", "f8e4m3fnuz", "f8e4m3", "f8e3m4",
                "f4e2m1fn", "f8e8m0fnu", "s4", "u4", "s2", "u2")],
    *[(f"convert {t} -> f32 and s32", module([f"{t}[46]"], "a = f32[46] convert(p0)\n  b = s32[46] convert(p0)\n"
                                           "  ROOT r = (f32[46], s32[46]) tuple(a, b)"),
       [WIDE_F32.astype(getattr(ml_dtypes, n))])
      for t, n in (("bf16", "bfloat16"), ("f8e4m3fn", "float8_e4m3fn"), ("f8e5m2", "float8_e5m2"))],
    ("bf16 add, multiply, exponential, each rounded",
     module(["bf16[46]", "bf16[46]"], "s = bf16[46] add(p0, p1)\n  m = bf16[46] multiply(s, p1)\n"
                                      "  ROOT e = bf16[46] exponential(m)"),
     [(WIDE_F32 / 1000).astype(ml_dtypes.bfloat16), RNG.standard_normal(46).astype(ml_dtypes.bfloat16)]),
    ("bf16 reduce (in bf16, in XLA's windows of 32)", module(
        ["bf16[300]"], "z = bf16[] constant(0)\n  ROOT r = bf16[] reduce(p0, z), dimensions={0}, to_apply=add",
        BF16_ADD), [np.ones(300, ml_dtypes.bfloat16)]),
    ("bf16 reduce of 256 and ones (each step rounds)", module(
        ["bf16[2,70]"], "z = bf16[] constant(0)\n  ROOT r = bf16[2] reduce(p0, z), dimensions={1}, to_apply=add",
        BF16_ADD), [np.concatenate([np.full((2, 1), 256), np.ones((2, 69))], axis=1).astype(ml_dtypes.bfloat16)]),
    *[(f"{t} reduce of uneven values", module(
        [f"{t}[3,1000]"], f"z = {t}[] constant(0)\n  ROOT r = {t}[3] reduce(p0, z), dimensions={{1}}, to_apply=add",
        f"add {{\n  a = {t}[] parameter(0)\n  b = {t}[] parameter(1)\n  ROOT s = {t}[] add(a, b)\n}}\n"),
        [RNG.uniform(0, 2, (3, 1000)).astype(dtype)])
      for t, dtype in (("f16", np.float16), ("bf16", ml_dtypes.bfloat16), ("f8e4m3fn", ml_dtypes.float8_e4m3fn))],
    ("bf16 dot", module(["bf16[4,8]", "bf16[8,3]"], "ROOT r = bf16[4,3] dot(p0, p1), lhs_contracting_dims={1}, "
                                                     "rhs_contracting_dims={0}"),
     [RNG.standard_normal((4, 8)).astype(ml_dtypes.bfloat16), RNG.standard_normal((8, 3)).astype(ml_dtypes.bfloat16)]),
    ("f8e4m3fn multiply", module(["f8e4m3fn[46]", "f8e4m3fn[46]"], "ROOT r = f8e4m3fn[46] multiply(p0, p1)"),
     [WIDE_F32.astype(ml_dtypes.float8_e4m3fn), RNG.standard_normal(46).astype(ml_dtypes.float8_e4m3fn)]),
    ("s4 add, multiply (wrap)", module(["s4[16]", "s4[16]"], "a = s4[16] add(p0, p1)\n  ROOT m = s4[16] multiply(a, p1)"),
     [np.arange(-8, 8).astype(ml_dtypes.int4), RNG.integers(-8, 8, 16).astype(ml_dtypes.int4)]),
    ("s4 dot", module(["s4[3,4]", "s4[4,2]"], "ROOT r = s4[3,2] dot(p0, p1), lhs_contracting_dims={1}, "
                                              "rhs_contracting_dims={0}"),
     [RNG.integers(-8, 8, (3, 4)).astype(ml_dtypes.int4), RNG.integers(-8, 8, (4, 2)).astype(ml_dtypes.int4)]),
    ("bitcast-convert bf16 -> u16", module(["bf16[46]"], "ROOT r = u16[46] bitcast-convert(p0)"),
     [WIDE_F32.astype(ml_dtypes.bfloat16)]),
    ("bitcast-convert u8 -> f8e5m2", module(["u8[256]"], "ROOT r = f8e5m2[256] bitcast-convert(p0)"),
     [np.arange(256, dtype=np.uint8)]),
]
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
    *EXTENDED_TYPE_CASES,
    *SHAPELESS_CASES,
    ("s32 convolution (a 3x3 weight, 16 channels)",
     module(["s32[1,16,12,12]", "s32[16,16,3,3]"], "ROOT r = s32[1,16,10,10] convolution(p0, p1), window={size=3x3}, "
                                                   "dim_labels=bf01_oi01->bf01"),
     [RNG.integers(-2**24, 2**24, (1, 16, 12, 12)).astype(np.int32),
      RNG.integers(-50, 50, (16, 16, 3, 3)).astype(np.int32)]),
]


def _close(got: np.ndarray, expected: np.ndarray) -> bool:
    if got.dtype.kind == "V":  # an ml_dtypes type: bit for bit
        return got.tobytes() == expected.tobytes()
    return np.allclose(got, expected, rtol=1e-5, atol=1e-5, equal_nan=True)


def main() -> int:
    failures = 0
    for name, text, args in CASES:
        expected = xla_run(text, *args)
        got = kuiper_run(text, *args)
        same = len(got) == len(expected) and all(g.shape == e.shape and g.dtype == e.dtype and _close(g, e)
                                                  for g, e in zip(got, expected))
        failures += not same
        print(("ok      " if same else "MISMATCH") + f" {name}")
        if not same:
            print("   xla:", [e.ravel()[:6] for e in expected], "\n   kuiper:", [g.ravel()[:6] for g in got])
    print(f"{len(CASES) - failures}/{len(CASES)} cases give XLA's results (jax {jax.__version__}, CPU)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
