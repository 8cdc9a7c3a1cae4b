#!/usr/bin/env python3
"""Time kuiper against PyTorch over the model zoo, each engine in a process of its own.

``tools/survey_models.py`` times both engines in one process, where PyTorch's and kuiper's
thread pools (and, since oneDNN, one shared OpenMP runtime) disturb each other: its ratios
swung by 2-5x on small models (docs/models.md, "Times").  Here every measurement is a fresh
child process that loads one engine, warms it up and times ``--runs`` calls (more for a model
so fast that they would take under a quarter of a second); the two engines
alternate, ``--rounds`` times each, and the median of each engine's medians is kept.

``--statistic p10`` keeps each child's 10th percentile instead of its median.  On a shared VM
whose speed changes in runs of tens of calls (every op of a call slower alike, one engine or
the other), the medians of two rounds differed by up to 2x; the 10th percentile, the speed
of the calls the machine did not slow, moved by a few percent (docs/performance.md).

Each folder is a pnnx export (``model.pnnx.param`` and ``model.pnnx.bin`` for kuiper, pnnx's
traced TorchScript ``model.pt`` for PyTorch), fed one seeded random input of the shapes the
param file declares (batch 1 where a dim is open).  Outputs are not compared here: the
survey itself does that.

    python tools/survey_fresh.py /work/bench/survey-exports/* --threads 2 --out build/survey/fresh.jsonl
    python tools/survey_fresh.py --table build/survey/fresh.jsonl

Run it with a Python that has torch and kuiper (``PYTHONPATH=.`` for this tree), on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENGINES = ("kuiper", "torch")
MIN_WARMUP_SECONDS = 0.1  # untimed calls for at least this long, and at least --warmup of them
MIN_TIMED_SECONDS = 0.25  # timed calls for about this long (at most MAX_RUNS), and at least --runs of them
MAX_RUNS = 2000


def child(engine: str, folder: Path, inputs_file: Path, threads: int, runs: int, warmup: int) -> dict:
    """In the child process: load one engine, time ``runs`` calls; returns {load_ms, median_ms, p10_ms}."""
    import numpy as np

    arrays = list(np.load(inputs_file).values())
    started = time.perf_counter()
    if engine == "kuiper":
        import kuiper

        model = kuiper.load(folder, threads=threads)

        def call():
            return model(*arrays)
    else:
        import torch

        torch.set_num_threads(threads)
        module = torch.jit.load(str(folder / "model.pt")).eval()
        tensors = [torch.from_numpy(a) for a in arrays]

        def call():
            with torch.inference_mode():
                return module(*tensors)
    load_ms = (time.perf_counter() - started) * 1e3
    # Sub-millisecond models get more calls, both engines alike: ten calls of 0.4 ms are over
    # before the CPU and the allocator have settled (rounds of one tiny model differed 2x).
    warmed = time.perf_counter()
    count = 0
    while count < warmup or time.perf_counter() - warmed < MIN_WARMUP_SECONDS:
        call()
        count += 1
    per_call = (time.perf_counter() - warmed) / count
    runs = max(runs, min(MAX_RUNS, int(MIN_TIMED_SECONDS / max(per_call, 1e-6))))
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1e3)
    times.sort()
    return {"load_ms": load_ms, "median_ms": statistics.median(times), "p10_ms": times[len(times) // 10]}


def random_inputs(folder: Path, path: Path) -> list[tuple[int, ...]]:
    """Seeded standard-normal inputs of the shapes the model declares, saved to ``path``."""
    import numpy as np

    import kuiper

    model = kuiper.load(folder)
    rng = np.random.default_rng(0)
    arrays = {}
    for index, spec in enumerate(model.inputs):
        shape = tuple(1 if d is None else int(d) for d in spec.shape)
        arrays[f"input{index}"] = rng.standard_normal(shape).astype(spec.dtype)
    np.savez(path, **arrays)
    return [a.shape for a in arrays.values()]


def time_model(folder: Path, threads: int, runs: int, warmup: int, rounds: int, statistic: str = "median") -> dict:
    from kuiper.errors import KuiperError

    with tempfile.TemporaryDirectory() as scratch:
        inputs_file = Path(scratch) / "inputs.npz"
        try:
            shapes = random_inputs(folder, inputs_file)
        except KuiperError as exc:  # an export kuiper refuses (docs/models.md lists pnnx's broken ones)
            return {"model": folder.name, "error": f"load: {exc}"}
        medians: dict[str, list[float]] = {engine: [] for engine in ENGINES}
        loads: dict[str, list[float]] = {engine: [] for engine in ENGINES}
        for round_number in range(rounds):
            order = ENGINES if round_number % 2 == 0 else ENGINES[::-1]
            for engine in order:
                command = [sys.executable, __file__, "--child", engine, str(folder), "--inputs", str(inputs_file),
                           "--threads", str(threads), "--runs", str(runs), "--warmup", str(warmup)]
                done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
                if done.returncode != 0:
                    return {"model": folder.name, "error": f"{engine}: {done.stderr.strip().splitlines()[-1:]}"}
                result = json.loads(done.stdout.strip().splitlines()[-1])
                medians[engine].append(result[f"{statistic}_ms"])
                loads[engine].append(result["load_ms"])
    kuiper_ms, torch_ms = (statistics.median(medians[engine]) for engine in ENGINES)
    return {"model": folder.name, "shapes": shapes, "threads": threads, "statistic": statistic,
            "kuiper_ms": kuiper_ms, "torch_ms": torch_ms,
            "ratio": kuiper_ms / torch_ms, "kuiper_rounds": medians["kuiper"], "torch_rounds": medians["torch"],
            "load_ms": {engine: statistics.median(loads[engine]) for engine in ENGINES},
            "load_average": os.getloadavg()[0]}


def table(results_file: Path) -> str:
    rows = [json.loads(line) for line in results_file.read_text().splitlines() if line.strip()]
    timed = sorted((row for row in rows if "ratio" in row), key=lambda row: row["ratio"])
    statistic = timed[0].get("statistic", "median") if timed else "median"
    lines = [f"| model | kuiper ms ({statistic}) | PyTorch ms ({statistic}) | kuiper / PyTorch | rounds kuiper | "
             "rounds PyTorch |",
             "|---|---|---|---|---|---|"]
    for row in timed:
        rounds = [" / ".join(f"{value:.1f}" for value in row[key]) for key in ("kuiper_rounds", "torch_rounds")]
        lines.append(f"| {row['model']} | {row['kuiper_ms']:.2f} | {row['torch_ms']:.2f} | {row['ratio']:.2f} | "
                     f"{rounds[0]} | {rounds[1]} |")
    ratios = [row["ratio"] for row in timed]
    if ratios:
        lines.append("")
        lines.append(f"{len(ratios)} models: median {statistics.median(ratios):.2f}, "
                     f"{sum(r <= 0.9 for r in ratios)} at or below 0.9, {sum(r > 1.5 for r in ratios)} above 1.5, "
                     f"worst {timed[-1]['model']} {ratios[-1]:.2f}")
    for row in rows:
        if "error" in row:
            lines.append(f"- {row['model']}: not timed ({row['error']})")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="*", type=Path, help="pnnx export folders (model.pnnx.param, model.pt)")
    parser.add_argument("--threads", type=int, default=2, help="threads for both engines (default 2)")
    parser.add_argument("--runs", type=int, default=10, help="timed calls per child process (default 10)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed calls first (default 3)")
    parser.add_argument("--rounds", type=int, default=2, help="child processes per engine, alternating (default 2)")
    parser.add_argument("--statistic", choices=("median", "p10"), default="median",
                        help="what each child reports of its calls: the median, or the 10th percentile (steadier "
                             "on a shared machine) (default median)")
    parser.add_argument("--out", type=Path, help="append one JSON line per model here (models already there are skipped)")
    parser.add_argument("--table", type=Path, metavar="RESULTS", help="print the markdown table of a results file")
    parser.add_argument("--child", choices=ENGINES, help=argparse.SUPPRESS)
    parser.add_argument("--inputs", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.table:
        print(table(args.table))
        return 0
    if args.child:
        print(json.dumps(child(args.child, args.folders[0], args.inputs, args.threads, args.runs, args.warmup)))
        return 0
    done = set()
    if args.out and args.out.exists():  # resume: models already in the results file are skipped
        done = {json.loads(line)["model"] for line in args.out.read_text().splitlines() if line.strip()}
    folders = [folder for folder in args.folders if (folder / "model.pt").exists() and folder.name not in done]
    for number, folder in enumerate(folders, 1):
        result = time_model(folder, args.threads, args.runs, args.warmup, args.rounds, args.statistic)
        shown = f"{result['ratio']:.2f}" if "ratio" in result else result["error"]
        print(f"[{number}/{len(folders)}] {folder.name}: {shown}", file=sys.stderr, flush=True)
        if args.out:
            with args.out.open("a") as handle:
                handle.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
