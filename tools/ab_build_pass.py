#!/usr/bin/env python3
"""A/B of one graph pass on a PNNX model: built with it (A) and with it made the identity (B), timed in one
process, their calls alternating.

``--without`` names a pass function that ``kuiper/graph/build.py`` calls on the op order (e.g.
``join_nested_concats``, ``hoist_unary_elementwise``) or on the built steps (``write_channels_last``, whose
result is not used); each side is called ``--turn`` times in turn
for ``--seconds`` (kuiper.bench.timing.alternating), so both meet the same phases of this project's
shared VMs, and the ratios of their 10th percentiles and medians are printed, with whether their
outputs are equal bit for bit.

    PYTHONPATH=. python tools/ab_build_pass.py join_nested_concats build/fixtures-full/yolov5_style_full \\
        --batch 8 --threads 2
"""

from __future__ import annotations

import argparse
import contextlib
import sys

import kuiper
from kuiper.bench.inputs import input_specs, random_inputs, resolve_param
from kuiper.bench.timing import compare_builds

BUILD = sys.modules["kuiper.graph.build"]  # the module (kuiper.graph's attribute of that name is the function)


@contextlib.contextmanager
def without(name: str):
    """The pass ``name`` made the identity on the op order while the block builds a model."""
    kept = getattr(BUILD, name, None)
    if not callable(kept):
        raise SystemExit(f"ab_build_pass: kuiper/graph/build.py calls no pass named {name!r}")
    setattr(BUILD, name, lambda order, *rest: order)
    try:
        yield
    finally:
        setattr(BUILD, name, kept)


def compare(path: str, name: str, batch: int, threads: int, seconds: float, turn: int) -> str:
    with without(name):
        off = kuiper.load(path, threads=threads)
    models = {"A": kuiper.load(path, threads=threads), "B": off}
    inputs = random_inputs(input_specs(resolve_param(path)), batch)
    result = compare_builds(models, inputs, seconds, turn)
    label = path.rstrip("/").split("/")[-1]
    return (f"{label} batch {batch}, {threads} thread(s): steps {len(models['A'].steps)} / {len(models['B'].steps)}  "
            f"{result.line(2)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("without", help="the pass function taken out of side B (a name in kuiper/graph/build.py)")
    parser.add_argument("models", nargs="+", help="model folders or .pnnx.param files")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="thread counts (default 1 2)")
    parser.add_argument("--seconds", type=float, default=10.0, help="time per model and thread count (default 10)")
    parser.add_argument("--turn", type=int, default=2, help="calls per side before switching (default 2)")
    args = parser.parse_args()
    print(f"A: with {args.without}; B: without")
    for path in args.models:
        for threads in args.threads:
            print(compare(path, args.without, args.batch, threads, args.seconds, args.turn), flush=True)


if __name__ == "__main__":
    main()
