"""Time kuiper running JAX programs from their HLO text against JAX itself (needs jax; run from the repo root).

    PYTHONPATH=. python tools/bench_hlo_vs_jax.py [--runs 30] [--text optimised|unoptimised] [--threads 2]

For a CNN (NCHW, batch 8, 3x32x32), an MLP (784-512-512-10, batch 64) and a transformer (four
ViT-Ti encoder blocks, batch 1, 197 tokens of 192, 3 heads, its GELU exact (erf) or tanh) it
dumps the HLO text, loads it with ``kuiper.load_hlo`` on the NumPy backend, checks the outputs
agree with JAX, and times both engines interleaved on the same inputs (median of ``--runs``).
``--threads`` is kuiper's thread count; give JAX the same with
``XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"`` for 1, or run
on a machine of that many cores.  Interleaved in one process, each engine's idle threads (XLA's
Eigen pool, kuiper's OpenMP pool) spin on the cores the other needs, and the ratios move by about
0.3 between runs on a 2-core machine: ``--only jax`` and ``--only kuiper``, run as two processes,
time each engine alone (the outputs are still checked against JAX).  XLA writes JAX's exact GELU as a 60-step polynomial (erfc), the
tanh GELU as one tanh.
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxlib import _hlo

import kuiper

jax.config.update("jax_platforms", "cpu")
RNG = np.random.RandomState(0)


def weights(*shape):
    return (RNG.randn(*shape) * (2.0 / np.prod(shape[1:])) ** 0.5).astype(np.float32)


def cnn():
    c1, c2, dense = weights(16, 3, 3, 3), weights(32, 16, 3, 3), weights(32 * 8 * 8, 10)

    def f(x):
        for kernel in (c1, c2):
            x = lax.conv_general_dilated(x, kernel, (1, 1), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW"))
            x = jax.nn.relu(x)
            x = lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
        return jax.nn.softmax(x.reshape(x.shape[0], -1) @ dense)

    return f, RNG.randn(8, 3, 32, 32).astype(np.float32)


def mlp():
    w1, w2, w3 = weights(784, 512), weights(512, 512), weights(512, 10)

    def f(x):
        return jax.nn.log_softmax(jax.nn.relu(jax.nn.relu(x @ w1) @ w2) @ w3)

    return f, RNG.randn(64, 784).astype(np.float32)


def transformer(exact_gelu: bool):
    width, heads, tokens, hidden = 192, 3, 197, 768
    blocks = [dict(qkv=weights(width, 3 * width), out=weights(width, width), up=weights(width, hidden),
                   down=weights(hidden, width), bias=(RNG.randn(hidden) * 0.02).astype(np.float32))
              for _ in range(4)]

    def layer_norm(x):
        mean = x.mean(-1, keepdims=True)
        return (x - mean) / jnp.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-6)

    def f(x):
        for block in blocks:
            qkv = (layer_norm(x) @ block["qkv"]).reshape(1, tokens, 3, heads, width // heads).transpose(2, 0, 3, 1, 4)
            scores = qkv[0] @ qkv[1].swapaxes(-1, -2) / (width // heads) ** 0.5
            attended = (jax.nn.softmax(scores, axis=-1) @ qkv[2]).transpose(0, 2, 1, 3).reshape(1, tokens, width)
            x = x + attended @ block["out"]
            up = jax.nn.gelu(layer_norm(x) @ block["up"] + block["bias"], approximate=not exact_gelu)
            x = x + up @ block["down"]
        return x

    return f, RNG.randn(1, tokens, width).astype(np.float32)


PROGRAMS = {"cnn": cnn, "mlp": mlp, "transformer (erf GELU)": lambda: transformer(True),
            "transformer (tanh GELU)": lambda: transformer(False)}


def hlo_text(jitted, x, which: str) -> str:
    lowered = jitted.lower(x)
    if which == "unoptimised":
        return lowered.compiler_ir("hlo").as_hlo_text(print_large_constants=True)
    options = _hlo.HloPrintOptions()
    options.print_large_constants = True
    return lowered.compile().runtime_executable().hlo_modules()[0].to_string(options)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--text", choices=("optimised", "unoptimised"), default="optimised")
    parser.add_argument("--threads", type=int, default=None, help="kuiper's threads (default: every core)")
    parser.add_argument("--only", choices=("jax", "kuiper"), default=None,
                        help="time this engine alone (the other runs once, for the output check)")
    args = parser.parse_args()
    print(f"jax {jax.__version__}, numpy {np.__version__}, kuiper {kuiper.__version__}; {args.text} HLO text")
    print(f"{'program':<24} {'jax ms':>8} {'kuiper ms':>10} {'kuiper/jax':>11} {'max|diff|':>10}")
    for name, program in PROGRAMS.items():
        function, x = program()
        jitted = jax.jit(function)
        model = kuiper.load_hlo(hlo_text(jitted, x, args.text), backend="numpy", threads=args.threads)
        expected = np.asarray(jitted(x))
        got = model(x, to_numpy=True)
        difference = float(np.max(np.abs(got - expected)))
        engines = {"jax": lambda: jitted(x).block_until_ready(), "kuiper": lambda: model(x)}
        if args.only:
            engines = {args.only: engines[args.only]}
        times: dict[str, list[float]] = {engine: [float("nan")] for engine in ("jax", "kuiper")}
        times.update({engine: [] for engine in engines})
        for _ in range(3):  # warm-up
            for run in engines.values():
                run()
        for _ in range(args.runs):  # interleaved, so both see the same machine load
            for engine, run in engines.items():
                start = time.perf_counter()
                run()
                times[engine].append(time.perf_counter() - start)
        jax_ms = statistics.median(times["jax"]) * 1e3
        kuiper_ms = statistics.median(times["kuiper"]) * 1e3
        print(f"{name:<24} {jax_ms:8.2f} {kuiper_ms:10.2f} {kuiper_ms / jax_ms:11.2f} {difference:10.2e}")


if __name__ == "__main__":
    main()
