#!/usr/bin/env python3
"""Measurements behind docs/performance.md's "Convolutions on oneDNN" section.

    PYTHONPATH=. python tools/bench_onednn.py ab MODEL.pnnx.param [--threads 1] [--rounds 10]
        the model with oneDNN and without it (compiled paths), loaded twice in one process,
        interleaved; CPU time per run at 1 thread (holds up under load), wall time otherwise
    PYTHONPATH=. python tools/bench_onednn.py pools MODEL.pnnx.param [--threads 1] [--rounds 10]
        the same, but only the pooling ops switched between oneDNN and their compiled loops
        (the convolutions on oneDNN in both)
    PYTHONPATH=. python tools/bench_onednn.py scaling MODEL.pnnx.param [--batch 1] [--rounds 30]
        the model at threads=1 and threads=2 in one process, interleaved: the 1 -> 2 thread scaling
    PYTHONPATH=. python tools/bench_onednn.py convs MODEL.pnnx.param [--threads 1]
        each conv op alone on its own input, oneDNN against the compiled paths, largest gaps first

Inputs are the bench's seeded random inputs of the model's declared shapes.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import kuiper
from kuiper import onednn
from kuiper.bench.inputs import input_specs, random_inputs, resolve_param
from kuiper.thread_limits import limited


def _inputs(path: str, batch: int) -> list[np.ndarray]:
    return random_inputs(input_specs(resolve_param(path)), batch)


def _with_and_without_onednn(path: str, threads: int, module=onednn, name: str = "library"):
    """The model loaded as is and with ``module.name`` answering None (the compiled paths)."""
    with_it = kuiper.load(path, threads=threads)
    found = getattr(module, name)
    setattr(module, name, lambda *args: None)  # the next build takes the compiled paths
    try:
        without = kuiper.load(path, threads=threads)
    finally:
        setattr(module, name, found)
    return with_it, without


def _median_ms(samples) -> str:
    return f"{np.median(samples) * 1e3:.1f} ms (p10 {np.percentile(samples, 10) * 1e3:.1f})"


def ab(args, models=None) -> None:
    clock = time.process_time if args.threads == 1 else time.perf_counter
    models = models or _with_and_without_onednn(args.model, args.threads)
    inputs = _inputs(args.model, args.batch)
    outputs = [np.asarray(model(*inputs)) for model in models]
    print(f"max |difference| {np.max(np.abs(outputs[0] - outputs[1])):.3g} (output scale {np.max(np.abs(outputs[1])):.3g})")
    samples = ([], [])
    for _ in range(args.rounds):
        for model, times in zip(models, samples):
            start = clock()
            model(*inputs)
            times.append(clock() - start)
    kind = "CPU" if clock is time.process_time else "wall"
    print(f"{kind} time per run: oneDNN {_median_ms(samples[0])}, compiled paths {_median_ms(samples[1])}, "
          f"ratio {np.median(samples[0]) / np.median(samples[1]):.2f}")


def pools(args) -> None:
    ab(args, _with_and_without_onednn(args.model, args.threads, onednn, "Pooling"))


def scaling(args) -> None:
    models = [kuiper.load(args.model, threads=threads) for threads in (1, 2)]
    inputs = _inputs(args.model, args.batch)
    for model in models * 2:
        model(*inputs)
    samples = ([], [])
    for _ in range(args.rounds):
        for model, times in zip(models, samples):
            start = time.perf_counter()
            model(*inputs)
            times.append(time.perf_counter() - start)
            time.sleep(0.02)
    print(f"batch {args.batch}: 1 thread {_median_ms(samples[0])}, 2 threads {_median_ms(samples[1])}, "
          f"scaling {np.median(samples[0]) / np.median(samples[1]):.2f}")


def convs(args) -> None:
    clock = time.process_time if args.threads == 1 else time.perf_counter
    models = _with_and_without_onednn(args.model, args.threads)
    seen = {}

    class Capture:
        def before_step(self, node, inputs):
            if "Conv" in node.type:
                seen[node.name] = [np.asarray(value) for value in inputs]

        def after_step(self, node, inputs, outputs):
            pass

    models[0](*_inputs(args.model, args.batch), observer=Capture())
    ops = [{step.node.name: step.op for step in model.steps} for model in models]
    rows = []
    for name, inputs in seen.items():
        times = []
        for op in (ops[0][name], ops[1][name]):
            with limited(args.threads):
                op.forward(*inputs)
                samples = []
                for _ in range(7):
                    start = clock()
                    op.forward(*inputs)
                    samples.append(clock() - start)
            times.append(np.median(samples) * 1e3)
        rows.append((name, inputs[0].shape, *times, getattr(ops[1][name], "compiled", None)))
    for name, shape, native, compiled, path in sorted(rows, key=lambda row: row[3] - row[2])[:15]:
        print(f"{name:<28} {str(shape):<20} oneDNN {native:8.3f} ms  compiled ({path}) {compiled:8.3f} ms")
    print(f"all {len(rows)} convs: oneDNN {sum(r[2] for r in rows):.1f} ms, compiled {sum(r[3] for r in rows):.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("ab", "pools", "scaling", "convs"))
    parser.add_argument("model", help="a .pnnx.param file")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    if not onednn.available():
        parser.error(onednn.describe())
    {"ab": ab, "pools": pools, "scaling": scaling, "convs": convs}[args.what](args)


if __name__ == "__main__":
    main()
