#!/usr/bin/env python3
"""A/B of the YOLOv5 neck and head work of issue 44 on a PNNX model: built as it is (A) and with the
nested-joins pass made the identity and the upsampling on the reference op's plain path (B), timed in
one process, their calls alternating (kuiper.bench.timing.alternating).

B is the build before that work: each level's join made and copied again into the output
(kuiper/graph/nested_joins.py off) and nn.Upsample as the reference's two gathers of a plain array
(kuiper/numba_kernels/resize_native.py off, so the conv runs around it hand over plain arrays).

    PYTHONPATH=. python tools/ab_yolo_head.py build/fixtures-full/yolov5_style_full --batch 8 --threads 1 2
"""

from __future__ import annotations

import argparse
import contextlib
import sys

import kuiper
from kuiper.bench.inputs import input_specs, random_inputs, resolve_param
from kuiper.bench.timing import compare_builds
from kuiper.numba_kernels import resize_native

BUILD = sys.modules["kuiper.graph.build"]  # the module (kuiper.graph's attribute of that name is the function)
NEAREST = resize_native.CompiledNearest2x


@contextlib.contextmanager
def before_the_change():
    """While the block builds a model: no nested joins, and an upsampling that takes no blocked input."""
    kept_pass, kept_setup = BUILD.join_nested_concats, NEAREST.setup

    def plain_setup(self):
        kept_setup(self)
        self.takes_blocked = False

    BUILD.join_nested_concats = lambda order, *rest: order
    NEAREST.setup = plain_setup
    try:
        yield
    finally:
        BUILD.join_nested_concats, NEAREST.setup = kept_pass, kept_setup


class ReferenceUpsampling:
    """Calls a model with the upsampling ops' compiled forward swapped for the reference's."""

    def __init__(self, model):
        self.model = model

    def __call__(self, *inputs):
        kept = NEAREST.forward
        NEAREST.forward = lambda op, *values: super(NEAREST, op).forward(*values)
        try:
            return self.model(*inputs)
        finally:
            NEAREST.forward = kept


def compare(path: str, batch: int, threads: int, seconds: float, turn: int) -> str:
    with before_the_change():
        before = kuiper.load(path, threads=threads)
    models = {"A": kuiper.load(path, threads=threads), "B": ReferenceUpsampling(before)}
    inputs = random_inputs(input_specs(resolve_param(path)), batch)
    result = compare_builds(models, inputs, seconds, turn)
    label = path.rstrip("/").split("/")[-1]
    return f"{label} batch {batch}, {threads} thread(s): {result.line(1)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+", help="model folders or .pnnx.param files")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="thread counts (default 1 2)")
    parser.add_argument("--seconds", type=float, default=40.0, help="time per model and thread count (default 40)")
    parser.add_argument("--turn", type=int, default=1, help="calls per side before switching (default 1)")
    args = parser.parse_args()
    print("A: as built now; B: no nested joins, upsampling on the reference's plain path")
    for path in args.models:
        for threads in args.threads:
            print(compare(path, args.batch, threads, args.seconds, args.turn), flush=True)


if __name__ == "__main__":
    main()
