#!/usr/bin/env python3
"""JAX weights as arguments: the HLO conv net of asv's HloConvNet (four 3x3 convs, 64 channels, 56x56) built
three ways and timed in one process, calls alternating: the weights as constants in the text, passed at every
call (as JAX passes them), and bound at load (``kuiper.load_hlo(..., constants=...)``).  Prints passed and
bound against constants, per round (issue 44's goal: passed within 1.2x).

    OMP_NUM_THREADS=1 PYTHONPATH=. python tools/bench_hlo_weights.py --rounds 3 --seconds 8
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

import kuiper
from kuiper.bench.timing import alternating

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "asv_benchmarks"))
from benchmarks.bench_hlo_conv_net import hlo_text, weights_as_parameters  # noqa: E402 - found through the path above


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8.0, help="time per round (default 8)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    text = hlo_text()
    constants = kuiper.load_hlo(text, threads=args.threads)
    args_text, weights = weights_as_parameters(text)
    passed = kuiper.load_hlo(args_text, threads=args.threads)
    bound = kuiper.load_hlo(args_text, threads=args.threads, constants=weights)
    x = np.random.default_rng(0).standard_normal(tuple(constants.inputs[0].shape)).astype(np.float32)
    arrays = [weights[number] for number in sorted(weights)]
    calls = {"constants": lambda: constants(x), "passed": lambda: passed(x, *arrays), "bound": lambda: bound(x)}
    outputs = {name: np.asarray(call()) for name, call in calls.items()}
    for name in ("passed", "bound"):
        print(f"max|{name} - constants| = {float(np.max(np.abs(outputs[name] - outputs['constants']))):.3g}")
    for round_ in range(args.rounds):
        times = alternating(calls, [], args.seconds, 3)
        median = {name: float(np.median(t)) * 1e3 for name, t in times.items()}
        p10 = {name: float(np.percentile(t, 10)) * 1e3 for name, t in times.items()}
        print(f"round {round_}: constants {median['constants']:.2f} ms; passed {median['passed']:.2f} ms "
              f"({median['passed'] / median['constants']:.3f}x, p10 {p10['passed'] / p10['constants']:.3f}x); "
              f"bound {median['bound']:.2f} ms ({median['bound'] / median['constants']:.3f}x)", flush=True)


if __name__ == "__main__":
    main()
