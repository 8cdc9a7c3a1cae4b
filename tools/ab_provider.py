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

import kuiper
from kuiper.bench.inputs import input_specs, random_inputs, resolve_param
from kuiper.bench.timing import compare_builds
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
    result = compare_builds(models, inputs, seconds, turn)
    label = path.rstrip("/").split("/")[-1]
    return f"{label:30s} steps {len(models['A'].steps)} / {len(models['B'].steps)}  {result.line()}"


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
