#!/usr/bin/env python3
"""A/B of the Flax convolution work of issue 44 on the Flax programs of tools/bench_flax_models.py (needs jax
and flax): each program built as it is (A) and with that work switched off (B), timed in one process, their
calls alternating (kuiper.bench.timing.alternating), fed the models' own initialised weights.

B is the build before that work: an lhs-dilated convolution as a Pad and a Conv (kuiper/hlo/translate_conv.py),
a max-pool reduce-window as a ReduceWindow (kuiper/hlo/translate_reduce.py), and a conv whose weight is an input
with no epilogue and a plain output (kuiper/numba_kernels/conv.py, conv_native.py).

    PYTHONPATH=. python tools/ab_flax_conv.py --only CNN U-Net ResNet --seconds 8 --rounds 3
"""

from __future__ import annotations

import argparse
import contextlib

import jax
import numpy as np

import kuiper
from kuiper.bench.timing import alternating
from kuiper.hlo import translate_conv, translate_reduce
from kuiper.numba_kernels.conv import CompiledConv2d
from kuiper.numba_kernels.conv_native import OneDnnConv, OneDnnPath

from bench_flax_models import models


@contextlib.contextmanager
def before_the_change():
    """While the block builds a model: none of the work above."""
    kept = (translate_conv._as_transposed, translate_reduce._max_pool, CompiledConv2d.__dict__["takes_epilogue"],
            OneDnnConv.__dict__["native_layout"])
    translate_conv._as_transposed = lambda *args: None
    translate_reduce._max_pool = lambda *args: None
    CompiledConv2d.takes_epilogue = classmethod(lambda cls, node: "weight" in node.attrs and len(node.inputs) == 1
                                                and node.params.get("spatial_dims", 2) == 2)
    OneDnnConv.native_layout = OneDnnPath.native_layout
    try:
        yield
    finally:
        (translate_conv._as_transposed, translate_reduce._max_pool, CompiledConv2d.takes_epilogue,
         OneDnnConv.native_layout) = kept


def compare(name, module, x, seconds: float, rounds: int) -> None:
    params = module.init(jax.random.PRNGKey(0), x)
    text = jax.jit(module.apply).lower(params, x).as_text(dialect="hlo")
    inputs = [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves((params, x))]
    built = {"A": kuiper.load_hlo(text, threads=1)}
    with before_the_change():
        built["B"] = kuiper.load_hlo(text, threads=1)
    outputs = {side: np.asarray(model(*inputs)) for side, model in built.items()}  # the first calls specialize
    print(f"{name}: steps A {len(built['A'].steps)} B {len(built['B'].steps)}; max|A-B| "
          f"{float(np.max(np.abs(outputs['A'] - outputs['B']))):.2e}", flush=True)
    for round_ in range(rounds):
        times = alternating(built, inputs, seconds, 3)
        p10 = {side: np.percentile(samples, 10) * 1e3 for side, samples in times.items()}
        median = {side: np.median(samples) * 1e3 for side, samples in times.items()}
        print(f"  round {round_}: p10 A {p10['A']:.3f} B {p10['B']:.3f} ms A/B {p10['A'] / p10['B']:.3f}; median A/B "
              f"{median['A'] / median['B']:.3f}; calls {len(times['A'])} each", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=["CNN", "U-Net", "ResNet"],
                        help="models whose name starts with one of these")
    parser.add_argument("--seconds", type=float, default=8.0, help="time per round (default 8)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print("A: as built; B: without the Flax conv work of issue 44; 1 thread")
    for name, (module, x) in models(np.random.RandomState(0)).items():
        if any(name.startswith(prefix) for prefix in args.only):
            compare(name, module, x, args.seconds, args.rounds)


if __name__ == "__main__":
    main()
