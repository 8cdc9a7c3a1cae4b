"""What a warm call of a model allocates beyond the arrays it returns, with and without its memory plan.

    python tools/measure_warm_allocations.py build/fixtures-full/yolov5_style_full MODEL ... [--batch 1] [--threads 1]

Each model is built twice, with ``KUIPER_MEMORY_PLAN`` on and off (read when a model is built), called
four times (the first call specializes its steps, the second records the plan), and then once more
under ``tracemalloc``: the table gives that call's peak of traced memory (NumPy's arrays and Python's
objects) minus the bytes of the arrays it returned, the size of the memory plan's arena, and how many of
the model's steps it serves.  A model is a .pnnx.param file, a folder holding model.pnnx.param, or an
.hlo.txt file; its inputs are seeded random numbers of its declared shapes (``--batch`` for a dim left open).
"""

from __future__ import annotations

import argparse
import os
import tracemalloc
from pathlib import Path

import numpy as np

import kuiper


def load(path: Path, threads: int):
    if path.name.endswith(".hlo.txt"):
        return kuiper.load_hlo(path.read_text(), threads=threads)
    return kuiper.load(path, threads=threads)


def inputs_of(model, batch: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal(tuple(batch if dim is None else dim for dim in spec.shape)).astype(spec.dtype)
            for spec in model.inputs]


def beyond_outputs(model, feeds: list) -> int:
    """Peak traced bytes of one call minus the bytes it returns."""
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        result = model(*feeds)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    returned = result if isinstance(result, tuple) else (result,)
    return peak - sum(getattr(value, "nbytes", 0) for value in returned)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", type=Path)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    print(f"{'model':<28} {'planned KiB':>12} {'unplanned KiB':>14} {'arena MiB':>10} {'steps planned':>14}")
    for path in args.models:
        results = {}
        for switch in ("1", "0"):
            os.environ["KUIPER_MEMORY_PLAN"] = switch
            model = load(path, args.threads)
            feeds = inputs_of(model, args.batch)
            for _ in range(4):
                model(*feeds)
            plans = [plan for plan in model.plan.memory_plans.values() if plan is not None]
            steps = len({request.step for plan in plans for request in plan.requests})
            arena = max((plan.nbytes for plan in plans), default=0)
            results[switch] = (beyond_outputs(model, feeds), arena, f"{steps} of {len(model.steps)}")
        os.environ.pop("KUIPER_MEMORY_PLAN")
        (planned, arena, steps), (unplanned, _, _) = results["1"], results["0"]
        name = path.name.removesuffix(".hlo.txt")
        print(f"{name:<28} {planned / 1024:12.1f} {unplanned / 1024:14.1f} {arena / 2**20:10.2f} {steps:>14}")


if __name__ == "__main__":
    main()
