#!/usr/bin/env python3
"""kuiper against ONNX Runtime with each engine alone in a process of its own, alternated.

Interleaving two engines in one process (``kuiper bench --compare``) makes each slow the other
down on a 2-core machine (their thread pools and caches meet: MobileNetV2 took 6.0 ms alone and
10.1 beside ORT), so the headline ratios are also taken this way: for each round, a fresh process
runs kuiper alone, then one runs ORT alone, on the same random input; each reports the 10th
percentile and the median of its timed calls, and the ratio is kuiper's over ORT's, per round.

    python3 tools/bench_alone.py build/fixtures-full/resnet18_full --batch 1 --threads 2 --rounds 2

The folder holds model.pnnx.param (kuiper) and model.onnx (ORT), as tools/make_fixtures.py
writes them.  Needs onnxruntime.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import json, sys, time
import numpy as np
engine, folder, batch, threads, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
if engine == "kuiper":
    import kuiper
    model = kuiper.load(folder + "/model.pnnx.param", threads=threads)
    shape = (batch,) + tuple(model.inputs[0].shape[1:])
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    call = lambda: model(x)
else:
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    session = ort.InferenceSession(folder + "/model.onnx", options, providers=["CPUExecutionProvider"])
    first = session.get_inputs()[0]
    shape = (batch,) + tuple(first.shape[1:])
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    call = lambda: session.run(None, {first.name: x})
for _ in range(3):
    call()
times = []
for _ in range(runs):
    start = time.perf_counter()
    call()
    times.append(time.perf_counter() - start)
times.sort()
print(json.dumps({"p10": times[len(times) // 10] * 1e3, "median": times[len(times) // 2] * 1e3}))
"""


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="folder with model.pnnx.param and model.onnx")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=15, help="timed calls per process (default 15)")
    parser.add_argument("--rounds", type=int, default=2, help="process pairs, alternating (default 2)")
    return parser.parse_args()


def timed(engine: str, args) -> dict:
    command = [sys.executable, "-c", CHILD, engine, str(args.folder), str(args.batch), str(args.threads), str(args.runs)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    args = parse_args()
    for needed in ("model.pnnx.param", "model.onnx"):
        if not (args.folder / needed).exists():
            sys.exit(f"{args.folder}: no {needed} (tools/make_fixtures.py --keep-peers writes both)")
    print(f"{args.folder.name}: batch {args.batch}, {args.threads} threads, {args.runs} calls per process, "
          f"load average {os.getloadavg()[0]:.2f}")
    for round_number in range(args.rounds):
        kuiper_times, ort_times = timed("kuiper", args), timed("onnxruntime", args)
        print(f"  round {round_number + 1}: kuiper p10 {kuiper_times['p10']:.2f} ms (median {kuiper_times['median']:.2f}), "
              f"ORT p10 {ort_times['p10']:.2f} ms (median {ort_times['median']:.2f}): "
              f"kuiper/ORT {kuiper_times['p10'] / ort_times['p10']:.2f} (medians {kuiper_times['median'] / ort_times['median']:.2f})")
    print(f"  load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
