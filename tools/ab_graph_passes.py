#!/usr/bin/env python3
"""What one build-time rewrite buys on the Flax programs: each built with and without it, both timed in one
process, their calls alternating (no jax needed).

The programs are asv's (``asv_benchmarks/benchmarks/data/flax_*.hlo.txt.gz``, written by
``tools/bench_flax_models.py --save-hlo``), fed asv's seeded inputs.  On this project's shared 2-vCPU VMs
two runs minutes apart differ by more than a tenth (docs/performance.md), so the two builds meet the same
phases here: turns of ``--turn`` calls each, for ``--seconds`` per program; the medians and the ratio of
the 10th percentiles are printed, with the steps and the outputs' largest difference.  ``--without``
names the rewrite taken out while the 'off' model builds:

* ``row_normalizations``, ``constant_subgraphs``, ``patch_convs``: that graph pass made the identity
  (kuiper/graph/row_normalizations.py, constant_subgraphs.py, patch_convs.py);
* ``product_epilogues``: AddMatrixProduct refusing the elementwise epilogues the fusion pass offers
  (kuiper/numba_kernels/matmul_native.py, product_post_ops.py).

    PYTHONPATH=. python tools/ab_graph_passes.py --without constant_subgraphs [--only gpt] [--seconds 20]
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import sys
from pathlib import Path

import numpy as np

import kuiper
from kuiper.bench.timing import alternating
from kuiper.numba_kernels.matmul_native import NativeAddMM

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "asv_benchmarks"))
from benchmarks.bench_flax_programs import DATA, PROGRAMS, program_inputs  # noqa: E402

BUILD = sys.modules["kuiper.graph.build"]  # the module (kuiper.graph's attribute of that name is the function)
PASSES = {"row_normalizations": "fuse_row_normalizations", "constant_subgraphs": "fold_constant_subgraphs",
          "patch_convs": "convs_as_patch_products"}


@contextlib.contextmanager
def without(rewrite: str):
    """The rewrite switched off while the block builds a model."""
    if rewrite == "product_epilogues":
        kept = NativeAddMM.__dict__["takes_epilogue"]
        NativeAddMM.takes_epilogue = classmethod(lambda cls, node: False)
        try:
            yield
        finally:
            NativeAddMM.takes_epilogue = kept
        return
    name = PASSES[rewrite]
    kept = getattr(BUILD, name)
    setattr(BUILD, name, lambda order, *rest: order)
    try:
        yield
    finally:
        setattr(BUILD, name, kept)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--without", required=True, choices=[*PASSES, "product_epilogues"])
    parser.add_argument("--only", nargs="*", default=None, help="programs whose name starts with one of these")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--turn", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    print(f"{'program':<14} {'steps':>11} {'off ms':>8} {'on ms':>8} {'on/off':>7} {'p10 on/off':>11} {'max|diff|':>10}")
    for program in PROGRAMS:
        if args.only and not any(program.startswith(prefix) for prefix in args.only):
            continue
        text = gzip.decompress((DATA / f"flax_{program}.hlo.txt.gz").read_bytes()).decode()
        with without(args.without):
            off = kuiper.load_hlo(text, threads=args.threads)
        models = {"off": off, "on": kuiper.load_hlo(text, threads=args.threads)}
        inputs = program_inputs(models["on"])
        outputs = [np.asarray(models[side](*inputs, to_numpy=True)) for side in ("off", "on")]
        difference = float(np.max(np.abs(outputs[0] - outputs[1])))
        times = alternating(models, inputs, args.seconds, args.turn)
        medians = {side: float(np.median(values)) * 1e3 for side, values in times.items()}
        p10 = {side: float(np.percentile(values, 10)) for side, values in times.items()}
        steps = f"{len(models['off'].steps)}->{len(models['on'].steps)}"
        print(f"{program:<14} {steps:>11} {medians['off']:8.2f} {medians['on']:8.2f} "
              f"{medians['on'] / medians['off']:7.2f} {p10['on'] / p10['off']:11.2f} {difference:10.2e}", flush=True)


if __name__ == "__main__":
    main()
