#!/usr/bin/env python3
"""A/B of one module-level setting, both sides timed in one process, their calls alternating.

This project's 2-vCPU VMs change speed by up to 1.65x in phases of seconds (docs/performance.md,
thirteenth round): two fresh processes, or two runs minutes apart, differ by more than most
changes do.  Here each model is loaded once and called in turns of ``--turn`` calls with the
setting at its own value (A) and at the value given (B), for ``--seconds``, so both sides meet
the same phases; the ratio of their 10th percentiles and of their medians is printed.

The setting must be one the code reads when a model is called (a module global such as
``kuiper.numba_kernels.runtime.PARALLEL_WORK``), not one read when the model is built.

    PYTHONPATH=. python tools/ab_setting.py kuiper.numba_kernels.runtime.PARALLEL_WORK=262144 \\
        build/survey/deit_tiny_patch16_224 build/survey/eva02_tiny_patch14_224 --threads 2
"""

from __future__ import annotations

import argparse
import ast
import importlib
import time

import numpy as np

import kuiper
from kuiper.bench.inputs import input_specs, random_inputs, resolve_param


def parse_setting(text: str) -> tuple[object, str, object]:
    """``module.path.NAME=value`` as (the module, NAME, value); the value is a Python literal."""
    target, _, value = text.partition("=")
    module_name, _, name = target.rpartition(".")
    if not module_name or not name or not value:
        raise SystemExit(f"ab_setting: {text!r}: expected module.path.NAME=value")
    module = importlib.import_module(module_name)
    if not hasattr(module, name):
        raise SystemExit(f"ab_setting: {module_name} has no {name}")
    try:
        return module, name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        raise SystemExit(f"ab_setting: {value!r} is not a Python literal") from None


def compare(path: str, module, name: str, value, threads: int, seconds: float, turn: int) -> str:
    model = kuiper.load(path, threads=threads)
    inputs = random_inputs(input_specs(resolve_param(path)), 1)
    values = {"A": getattr(module, name), "B": value}
    times: dict[str, list[float]] = {"A": [], "B": []}
    try:
        for side in values:  # warm both: plans, kernels and buffers for each value
            setattr(module, name, values[side])
            model(*inputs)
            model(*inputs)
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            for side in values:
                setattr(module, name, values[side])
                for _ in range(turn):
                    started = time.perf_counter()
                    model(*inputs)
                    times[side].append(time.perf_counter() - started)
    finally:
        setattr(module, name, values["A"])
    p10 = {side: np.percentile(samples, 10) * 1e3 for side, samples in times.items()}
    median = {side: np.median(samples) * 1e3 for side, samples in times.items()}
    label = path.rstrip("/").split("/")[-1]
    return (f"{label:30s} p10 A {p10['A']:9.3f} ms  B {p10['B']:9.3f} ms  B/A {p10['B'] / p10['A']:.3f}   "
            f"median B/A {median['B'] / median['A']:.3f}   calls {len(times['A'])} each")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("setting", help="module.path.NAME=value (B); A is the value the module has")
    parser.add_argument("models", nargs="+", help="model folders or .pnnx.param files")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=8.0, help="time per model (default 8)")
    parser.add_argument("--turn", type=int, default=3, help="calls per side before switching (default 3)")
    args = parser.parse_args()
    module, name, value = parse_setting(args.setting)
    print(f"A: {module.__name__}.{name} = {getattr(module, name)!r}; B: {value!r}; {args.threads} threads")
    for path in args.models:
        print(compare(path, module, name, value, args.threads, args.seconds, args.turn), flush=True)


if __name__ == "__main__":
    main()
