#!/usr/bin/env python3
"""A/B of one execution provider: a model built with it (A) and without it (B), timed in one process,
their calls alternating.

Providers claim runs of steps when a model is built (kuiper/graph/providers.py), so the two sides are
two builds of the same file; each is called ``--turn`` times in turn for ``--seconds``, so both meet
the same phases of this project's VMs, and the ratios of their 10th percentiles and medians are
printed, with whether their outputs are equal bit for bit.

    PYTHONPATH=. python tools/ab_provider.py onednn-sequence build/fixtures-full/mobilenet_v2_full --threads 1
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import kuiper
from kuiper.bench.inputs import input_specs, random_inputs, resolve_param
from kuiper.graph.target import resolve_target


def without(provider: str):
    """The NumPy backend's Target with one provider taken out (SystemExit: no provider of that name)."""
    target = resolve_target("numpy")
    names = [each.name for each in target.providers]
    if provider not in names:
        raise SystemExit(f"ab_provider: no provider {provider!r}; the NumPy backend's are {names}")
    return target, type(target)(backend=target.backend, ops=target.ops, kernels=target.kernels,
                                providers=tuple(each for each in target.providers if each.name != provider))


def compare(path: str, provider: str, threads: int, seconds: float, turn: int) -> str:
    with_it, without_it = without(provider)
    models = {"A": kuiper.load(path, backend=with_it, threads=threads),
              "B": kuiper.load(path, backend=without_it, threads=threads)}
    inputs = random_inputs(input_specs(resolve_param(path)), 1)
    outputs = {side: model(*inputs) for side, model in models.items()}  # the first calls specialize
    flat = {side: out if isinstance(out, tuple) else (out,) for side, out in outputs.items()}
    equal = all(np.array_equal(a, b) for a, b in zip(flat["A"], flat["B"]))
    times: dict[str, list[float]] = {"A": [], "B": []}
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        for side, model in models.items():
            for _ in range(turn):
                started = time.perf_counter()
                model(*inputs)
                times[side].append(time.perf_counter() - started)
    p10 = {side: np.percentile(samples, 10) * 1e3 for side, samples in times.items()}
    median = {side: np.median(samples) * 1e3 for side, samples in times.items()}
    label = path.rstrip("/").split("/")[-1]
    return (f"{label:30s} steps {len(models['A'].steps)} / {len(models['B'].steps)}  p10 A {p10['A']:8.3f} ms  "
            f"B {p10['B']:8.3f} ms  A/B {p10['A'] / p10['B']:.3f}   median A/B {median['A'] / median['B']:.3f}   "
            f"outputs {'equal' if equal else 'DIFFER'}   calls {len(times['A'])} each")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("provider", help="the provider's name (kuiper info lists the partitions by provider)")
    parser.add_argument("models", nargs="+", help="model folders or .pnnx.param files")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=8.0, help="time per model (default 8)")
    parser.add_argument("--turn", type=int, default=3, help="calls per side before switching (default 3)")
    args = parser.parse_args()
    print(f"A: with {args.provider}; B: without; {args.threads} threads")
    for path in args.models:
        print(compare(path, args.provider, args.threads, args.seconds, args.turn), flush=True)


if __name__ == "__main__":
    main()
