#!/usr/bin/env python3
"""Per-call overhead probes (issue 27; numbers in docs/performance.md).

  python3 tools/bench_call_overhead.py nodes        # us per node of 50-op chains on a 1x8 tensor
  python3 tools/bench_call_overhead.py recurrent    # compiled vs reference LSTM time loop by size

``nodes`` times three chains, fuse off: reshapes, ReLUs, and the reshape chain with every
op's forward replaced by the identity (what is left is the executor's own cost per node),
each with and without ``threads=2``; variants interleaved, median of 9 rounds.
``recurrent`` times one LSTM layer over 20 steps at 1 thread, both paths interleaved, with
the compiled path forced on at every size (kuiper.numba_kernels.recurrent.PER_STEP_WORK).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import kuiper
from kuiper.backends import get_backend
from kuiper.model_ir import OpNode
from kuiper.numba_kernels import recurrent as compiled
from kuiper.ops.recurrent import Recurrent
from kuiper.thread_limits import limited

NODES = 50


def chain(folder: Path, kind: str) -> Path:
    lines = ["pnnx.Input in0 0 1 v0 #v0=(1,8)f32"]
    for i in range(NODES):
        if kind == "relu":
            lines.append(f"F.relu op{i} 1 1 v{i} v{i + 1}")
        else:
            lines.append(f"Tensor.reshape op{i} 1 1 v{i} v{i + 1} shape={'(8,1)' if i % 2 == 0 else '(1,8)'}")
    lines.append(f"pnnx.Output out0 1 0 v{NODES}")
    path = folder / f"{kind}.pnnx.param"
    path.write_text(f"7767517\n{len(lines)} {NODES + 1}\n" + "\n".join(lines) + "\n")
    return path


def nodes() -> None:
    x = np.ones((1, 8), np.float32)
    models = {}
    with tempfile.TemporaryDirectory() as folder:
        for kind in ("reshape", "relu", "identity"):
            path = chain(Path(folder), "reshape" if kind == "identity" else kind)
            for threads in (None, 2):
                model = kuiper.load(path, fuse=False, threads=threads)
                if kind == "identity":
                    for step in model.steps:
                        step.op.forward = lambda value: value
                models[f"{kind} threads={threads}"] = model
    for model in models.values():
        model(x)
    times: dict[str, list[float]] = {name: [] for name in models}
    for _ in range(9):
        for name, model in models.items():
            start = time.perf_counter()
            for _ in range(500):
                model(x)
            times[name].append((time.perf_counter() - start) / 500)
    for name, samples in times.items():
        median = statistics.median(samples)
        print(f"{name:24s} {median * 1e6:8.1f} us/call {median * 1e6 / NODES:7.2f} us/node")


def recurrent() -> None:
    compiled.PER_STEP_WORK = 1 << 62  # the compiled path at every size, to find where it stops paying
    rng = np.random.default_rng(0)
    for hidden, batch in ((64, 1), (256, 1), (1024, 1), (128, 8), (512, 8), (128, 32), (128, 128), (256, 64)):
        attrs = {"weight_ih_l0": rng.uniform(-0.1, 0.1, (4 * hidden, hidden)),
                 "weight_hh_l0": rng.uniform(-0.1, 0.1, (4 * hidden, hidden)),
                 "bias_ih_l0": rng.uniform(-0.1, 0.1, 4 * hidden), "bias_hh_l0": rng.uniform(-0.1, 0.1, 4 * hidden)}
        params = {"cell": "LSTM", "input_size": hidden, "hidden_size": hidden}
        node = OpNode("Recurrent", "lstm", ["x"], ["y"], params, {k: v.astype(np.float32) for k, v in attrs.items()})
        ops = {"compiled": compiled.CompiledRecurrent(node, get_backend("numpy")),
               "reference": Recurrent(node, get_backend("numpy"))}
        x = rng.standard_normal((20, batch, hidden)).astype(np.float32)
        times: dict[str, list[float]] = {name: [] for name in ops}
        with limited(1):
            for op in ops.values():
                op.forward(x)
            for _ in range(7):
                for name, op in ops.items():
                    start = time.perf_counter()
                    op.forward(x)
                    times[name].append(time.perf_counter() - start)
        fast, slow = (statistics.median(times[name]) for name in ops)
        print(f"hidden {hidden:4d} batch {batch:3d} step work {batch * hidden * 4 * hidden:>9,d}: "
              f"compiled {fast * 1e3:7.2f} ms, reference {slow * 1e3:7.2f} ms, ratio {fast / slow:5.2f}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("probe", choices=["nodes", "recurrent"])
    args = parser.parse_args(argv)
    {"nodes": nodes, "recurrent": recurrent}[args.probe]()
    return 0


if __name__ == "__main__":
    sys.exit(main())
