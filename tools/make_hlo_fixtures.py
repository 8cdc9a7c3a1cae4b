"""Write small JAX programs as HLO text fixtures for kuiper's HLO frontend (needs jax; tests do not).

    /work/toolvenv/bin/python tools/make_hlo_fixtures.py            # every program
    /work/toolvenv/bin/python tools/make_hlo_fixtures.py mlp cnn_nchw
    /work/toolvenv/bin/python tools/make_hlo_fixtures.py --bench    # the asv conv net (full size)

For each program NAME, tests/fixtures/hlo/ gets:

* ``NAME.hlo.txt``      the unoptimised text, ``jit(f).lower(*args).compiler_ir("hlo")``
* ``NAME.opt.hlo.txt``  the optimised text XLA's CPU compiler prints after compiling
* ``NAME.npz``          ``input0..`` the seeded inputs and ``output0..`` JAX's outputs

Both texts are printed with print_large_constants, so every constant is in the file and the
module runs.  Inputs are seeded, so reruns give the same files on the same JAX version.
"""

from __future__ import annotations

import argparse
import gzip
import sys
import zlib
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxlib import _hlo

jax.config.update("jax_platforms", "cpu")
ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "tests" / "fixtures" / "hlo"
BENCH_FILE = ROOT / "asv_benchmarks" / "benchmarks" / "data" / "conv_net.hlo.txt.gz"
BENCH_CHANNELS, BENCH_SIZE = 64, 56
RNG = np.random.RandomState(14)  # reseeded per program from its name: one program's inputs never depend on another


def normal(*shape, scale=1.0):
    return (RNG.randn(*shape) * scale).astype(np.float32)


# -- the programs: name -> (function, example inputs) ----------------------------------
def mlp():
    w1, b1, w2, b2 = normal(8, 16, scale=0.3), normal(16), normal(16, 3, scale=0.3), normal(3)

    def f(x):
        h = jax.nn.relu(x @ w1 + b1)  # weights are closed over: constants in the text
        return jax.nn.gelu(h) @ w2 + b2

    return f, [normal(4, 8)]


def cnn_nchw():
    kernel, bias = normal(6, 3, 3, 3, scale=0.3), normal(6)

    def f(x):
        y = lax.conv_general_dilated(x, kernel, (2, 1), ((1, 1), (0, 2)), dimension_numbers=("NCHW", "OIHW", "NCHW"))
        y = jax.nn.relu(y + bias[None, :, None, None])
        y = lax.reduce_window(y, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
        return jnp.mean(y, axis=(2, 3))

    return f, [normal(2, 3, 9, 8)]


def cnn_nhwc():
    kernel = normal(3, 3, 2, 8, scale=0.3)  # HWIO, two groups of 2 input channels

    def f(x):
        y = lax.conv_general_dilated(x, kernel, (1, 1), "SAME", rhs_dilation=(2, 1), feature_group_count=2,
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
        y = jnp.tanh(y)
        y = lax.reduce_window(y, 0.0, lax.add, (1, 3, 3, 1), (1, 2, 2, 1), "SAME") / 9.0
        up = lax.conv_general_dilated(y, normal(2, 2, 8, 3, scale=0.3), (1, 1), ((1, 1), (1, 1)),
                                      lhs_dilation=(2, 2), dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return y, up

    return f, [normal(2, 7, 6, 4)]


def attention():
    def f(q, k, v):
        scores = jnp.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(q.shape[-1])
        mask = jnp.tril(jnp.ones((q.shape[2], k.shape[2]), bool))
        scores = jnp.where(mask, scores, -1e9)
        return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(scores, axis=-1), v)

    return f, [normal(2, 2, 5, 4), normal(2, 2, 5, 4), normal(2, 2, 5, 4)]


def softmax_layernorm():
    gamma, beta = normal(6), normal(6)

    def f(x):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        norm = (x - mean) * lax.rsqrt(var + 1e-5) * gamma + beta
        return jax.nn.softmax(norm, axis=0), jax.nn.log_softmax(x, axis=-1)

    return f, [normal(3, 4, 6)]


def integer_math():
    def f(a, b, u):
        b = jnp.where(b == 0, 3, b)
        outs = [
            lax.div(a, b), lax.rem(a, b), a // b, a % b,  # truncating (lax) and flooring (jnp)
            a * 1000003 * 7919,  # wraps around
            a << (b & 7), lax.shift_right_arithmetic(a, b & 7), lax.shift_right_logical(a, b & 7),
            a & b, a | b, a ^ b, ~a, lax.population_count(a), lax.clz(a),
            jnp.abs(a), jnp.sign(a), jnp.clip(a, -5, 5), jnp.maximum(a, b), jnp.minimum(a, b),
            u >> 3, u * np.uint32(2654435761), u // np.uint32(7), (u.astype(jnp.float32) / 4).astype(jnp.int32),
            a < b, a == b, a >= b, (a > 0) & (b > 0), ~(a > 0), (a > 0) ^ (b > 0),
            lax.convert_element_type(a, jnp.int8), lax.bitcast_convert_type(a, jnp.float32),
            jnp.power(a % 5, 3),
        ]
        return tuple(outs)

    a = RNG.randint(-1000, 1000, size=(3, 5)).astype(np.int32)
    b = RNG.randint(-9, 9, size=(3, 5)).astype(np.int32)
    u = RNG.randint(0, 2**32 - 1, size=(3, 5), dtype=np.uint64).astype(np.uint32)
    return f, [a, b, u]


def float_math():
    def f(x, y):
        z = jnp.array([0.5, 1.5, 2.5, -0.5, -2.5, np.nan, np.inf, -np.inf], np.float32)
        return (
            jnp.arctan2(x, y), jnp.cbrt(x), lax.erf(x), jnp.expm1(x), jnp.log1p(jnp.abs(x)), jnp.exp(x),
            jnp.tanh(x), jax.nn.sigmoid(x), jnp.sin(x), jnp.cos(x), jnp.tan(x * 0.5), jnp.sqrt(jnp.abs(x)),
            lax.rsqrt(jnp.abs(x) + 1), jnp.floor(x * 3), jnp.ceil(x * 3), jnp.round(x * 3), lax.round(x * 3),
            lax.round(z), jnp.round(z), jnp.isfinite(z), jnp.sign(z), jnp.power(jnp.abs(x), y),
            lax.reduce_precision(x * 1000, exponent_bits=5, mantissa_bits=10), x.astype(jnp.float16) * 2,
            jnp.maximum(z, 1.0), jnp.minimum(z, 1.0), z < 1.0, z != z,  # noqa: PLR0124 (NaN test)
            x.astype(jnp.int32), jnp.remainder(x, 0.7),
            lax.rem(x, 0.7), jnp.clip(x, -0.5, 0.5), jnp.log(jnp.abs(x) + 0.1), -x, jnp.abs(x),
        )

    return f, [normal(8), normal(8)]


def slicing():
    def f(x, i, idx):
        ds = lax.dynamic_slice(x, (i, i + 10), (2, 3))  # start clamps into range
        dus = lax.dynamic_update_slice(x, jnp.ones((2, 2), x.dtype), (i - 5, i))
        gathered = x[idx]
        cols = jnp.take_along_axis(x[:3], idx[:, None] % 4, axis=1)
        scattered = x.at[idx].add(1.0)
        setting = x.at[idx, 1].set(-1.0)
        mx = jnp.zeros((4,)).at[idx].max(x[:3, 0])
        padded = lax.pad(x, 0.5, ((1, -1, 1), (0, 2, 0)))
        return (
            x[1:3, ::2], x[::-1, 1:], ds, dus, gathered, cols, scattered, setting, mx, padded,
            jnp.concatenate([x, x * 2], axis=1), jnp.flip(x, 1), x.T.reshape(2, 10), jnp.broadcast_to(x[:, :1], (5, 3)),
            jnp.arange(6).reshape(2, 3), x[i],
        )

    return f, [normal(5, 4), np.int32(2), np.array([3, 0, 3], np.int32)]


def sort_topk():
    def f(x, keys):
        x = x.at[1, 2].set(jnp.nan)
        values, indices = lax.top_k(x, 3)
        s0, s1 = lax.sort((keys, x[0]), num_keys=1)
        return (
            jnp.argmax(x, axis=1), jnp.argmin(x, axis=0), jnp.sort(x, axis=1), jnp.argsort(x, axis=0),
            values, indices, s0, s1, jnp.max(x, axis=0), jnp.argsort(-keys, stable=True),
        )

    keys = np.array([3, 1, 2, 1, 3, 0], np.int32)
    return f, [normal(4, 6), keys]


def control_flow():
    def f(x, n, k):
        def body(i, carry):
            return carry * 0.9 + jnp.sin(carry) * i

        looped = lax.fori_loop(0, n, body, x)
        total = lax.while_loop(lambda c: c[1] < 100.0, lambda c: (c[0] + 1, c[1] * 2 + 1), (0, jnp.sum(x) ** 2))
        branch = lax.cond(jnp.sum(x) > 0, lambda v: v * 2, lambda v: v - 1, x)
        switched = lax.switch(k, [lambda v: v + 1, lambda v: v * v, lambda v: -v], x)
        return looped, total[0], total[1], branch, switched

    return f, [normal(3), np.int32(4), np.int32(1)]


def cumulative():
    def f(x, m):
        return (
            jnp.cumsum(x, axis=0), jnp.cumsum(x, axis=1), jnp.cumprod(x * 0.5, axis=1), lax.cummax(x, axis=0),
            lax.cummin(x, axis=1, reverse=True), jnp.cumsum(m, axis=1),
        )

    return f, [normal(4, 5), RNG.randint(-5, 5, size=(3, 4)).astype(np.int32)]


def reductions():
    def f(x, b):
        return (
            jnp.sum(x), jnp.prod(x, axis=1), jnp.max(x, axis=(0, 2)), jnp.min(x, axis=2), jnp.any(b, axis=0),
            jnp.all(b, axis=1), jnp.sum(b.astype(jnp.int32), axis=1), jnp.mean(x, axis=1), jnp.var(x, axis=0),
            jnp.linalg.norm(x, axis=-1), jax.nn.logsumexp(x, axis=1),
        )

    return f, [normal(2, 3, 4), RNG.rand(3, 4) > 0.5]


def maxpool_grad():
    def pool(x):
        return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID").sum()

    def f(x):
        return jax.grad(pool)(x), jax.vmap(lambda r: jnp.dot(r, r))(x.reshape(2, -1))

    return f, [normal(2, 4, 4, 1)]


def batched_dot():
    def f(a, b, c):
        return (
            lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,)))),
            jnp.einsum("ijk,kl->lij", a, c),
            jnp.einsum("bij,bkj->bik", a, a),
            jnp.outer(c[0], c[1]),
            jnp.dot(c.T, c),
        )

    return f, [normal(2, 3, 4), normal(2, 4, 5), normal(4, 3)]


def tuple_outputs():
    def f(x, y):
        return x + y, (x > y, (lax.iota(jnp.int32, 3), x.astype(jnp.int32))), lax.expand_dims(x, (0,)), y

    return f, [normal(3), normal(3)]


def batched_variants():
    kernel = normal(4, 3, 3, 3, scale=0.3)

    def f(x, table, rows, updates):
        grouped = lax.conv_general_dilated(x, kernel, (1, 1), "VALID", batch_group_count=2,
                                           dimension_numbers=("NCHW", "OIHW", "NCHW"))
        scattered = jax.vmap(lambda t, i, u: t.at[i].add(u))(table, rows, updates)  # batching dims
        picked = jax.vmap(lambda t, i: t[i])(table, rows)
        return grouped, scattered, picked

    rows = np.array([[0, 4], [2, 2], [1, 3]], np.int32)
    return f, [normal(4, 3, 6, 6), normal(3, 5), rows, normal(3, 2)]


def conv_net_function(channels: int, weights_as_parameters: bool = False):
    """Four 3x3 convolutions (NCHW/OIHW, SAME padding) with bias and ReLU: the HLO speed benchmark's net.

    Closed-over weights become ``constant`` instructions (which kuiper lays out for its fast paths
    once, at load time); ``weights_as_parameters`` makes them ENTRY parameters instead.
    """
    layers = [(normal(channels, channels, 3, 3, scale=(2.0 / (9 * channels)) ** 0.5), normal(channels, scale=0.1))
              for _ in range(4)]

    def net(x, layers):
        for kernel, bias in layers:
            x = lax.conv_general_dilated(x, kernel, (1, 1), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW"))
            x = jax.nn.relu(x + bias[None, :, None, None])
        return x

    if weights_as_parameters:
        return net, layers
    return (lambda x: net(x, layers)), layers


def conv_net():
    """The benchmark's net at test size: 16 channels (enough for Winograd), 12x12."""
    function, _ = conv_net_function(16)
    return function, [normal(1, 16, 12, 12)]


PROGRAMS = {
    "mlp": mlp, "cnn_nchw": cnn_nchw, "cnn_nhwc": cnn_nhwc, "attention": attention,
    "softmax_layernorm": softmax_layernorm, "integer_math": integer_math, "float_math": float_math,
    "slicing": slicing, "sort_topk": sort_topk, "control_flow": control_flow, "cumulative": cumulative,
    "reductions": reductions, "maxpool_grad": maxpool_grad, "batched_dot": batched_dot,
    "tuple_outputs": tuple_outputs, "batched_variants": batched_variants, "conv_net": conv_net,
}


def optimised_text(compiled) -> str:
    options = _hlo.HloPrintOptions()
    options.print_large_constants = True
    modules = compiled.runtime_executable().hlo_modules()
    return modules[0].to_string(options)


def write(name: str) -> int:
    RNG.seed(zlib.crc32(name.encode()))
    function, inputs = PROGRAMS[name]()
    jitted = jax.jit(function)
    lowered = jitted.lower(*inputs)
    unoptimised = lowered.compiler_ir("hlo").as_hlo_text(print_large_constants=True)
    optimised = optimised_text(lowered.compile())
    outputs = jax.tree_util.tree_leaves(jitted(*inputs))
    arrays = {f"input{i}": np.asarray(x) for i, x in enumerate(inputs)}
    arrays.update({f"output{i}": np.asarray(y) for i, y in enumerate(outputs)})
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    (OUT_DIR / f"{name}.hlo.txt").write_text(unoptimised)
    (OUT_DIR / f"{name}.opt.hlo.txt").write_text(optimised)
    np.savez_compressed(OUT_DIR / f"{name}.npz", **arrays)
    if "{...}" in unoptimised or "{...}" in optimised:
        sys.exit(f"{name}: a constant was elided; print_large_constants did not take")
    return sum((OUT_DIR / f"{name}{suffix}").stat().st_size for suffix in (".hlo.txt", ".opt.hlo.txt", ".npz"))


def write_bench_conv_net() -> int:
    """The full-size conv net (64 channels, 56x56, batch 1) for asv: gzipped unoptimised text, weights constant."""
    RNG.seed(zlib.crc32(b"conv_net_bench"))
    function, _ = conv_net_function(BENCH_CHANNELS)
    x = normal(1, BENCH_CHANNELS, BENCH_SIZE, BENCH_SIZE)
    text = jax.jit(function).lower(x).compiler_ir("hlo").as_hlo_text(print_large_constants=True)
    BENCH_FILE.parent.mkdir(parents=True, exist_ok=True)
    # mtime=0: the same text gives the same bytes, so a rerun changes nothing in git.
    with gzip.GzipFile(BENCH_FILE, "wb", mtime=0) as archive:
        archive.write(text.encode())
    return BENCH_FILE.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"programs to write (default: all of {', '.join(PROGRAMS)})")
    parser.add_argument("--bench", action="store_true",
                        help=f"write only the benchmark's full-size conv net, {BENCH_FILE.relative_to(ROOT)}")
    args = parser.parse_args()
    if args.bench:
        print(f"{BENCH_FILE.name}: {write_bench_conv_net() / 1024:.1f} KiB")
        return
    total = 0
    for name in args.names or PROGRAMS:
        size = write(name)
        total += size
        print(f"{name:<20} {size / 1024:7.1f} KiB")
    print(f"{'total':<20} {total / 1024:7.1f} KiB  (jax {jax.__version__})")


if __name__ == "__main__":
    main()
