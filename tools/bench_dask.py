#!/usr/bin/env python3
"""Throughput of kuiper.dask.predict against plain Model calls, and Dask's per-chunk overhead.

  python3 tools/make_fixtures.py --full resnet18_full          # -> build/fixtures-full/resnet18_full/
  .venv/bin/python tools/bench_dask.py --rounds 2              # needs kuiper[dask] and threadpoolctl

Every configuration runs in this one process run, interleaved round by round, so they
share the machine's load; the load average is printed before and after.  Results go to
docs/performance.md ("Batch inference over Dask").

Configurations (ResNet-18, N images of 3x224x224 float32, chunks of B images):
  plain, 1 thread / plain, 2 threads   Model calls in this process, batches of B, the model
                           loaded with kuiper.load(threads=1 or 2) (BLAS and kernels)
  dask 2w x 1t             local_cluster: 2 worker processes x 1 Dask thread x 1 BLAS thread
  dask 2w x 1t, from client  the same, with the images sent from a NumPy array on the client
  dask threads, 2 x 1t     no cluster: Dask's threaded scheduler, 2 threads in this process,
                           one chunk each (each task's model at threads=1, kuiper.dask's default)
  dask 1w x 2t             1 worker process x 2 Dask threads x 1 BLAS thread
  dask 1w x 1t, threads 2  1 worker process x 1 Dask thread, the model at threads=2
The dask rows (but the 'from client' one) start from images already held by the workers
(persisted), the way map_files reads inputs on the workers, and each cluster has loaded the
model once before timing (the load is reported separately).  Beside wall time, each row
gives the CPU seconds per image of this process and of the workers (psutil): on a loaded
machine wall time mostly measures the load, CPU time what each configuration costs.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODEL = ROOT / "build" / "fixtures-full" / "resnet18_full" / "model.pnnx.param"
TINY_MODEL = ROOT / "tests" / "fixtures" / "models" / "reshape_batch_dynamic" / "model.pnnx.param"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--images", type=int, default=512)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--only", nargs="+", metavar="LABEL", help="run only these configurations (labels as printed)")
    parser.add_argument("--overhead-tasks", type=int, default=2000, help="no-op tasks / 1-row chunks for the overhead")
    return parser.parse_args()


def load_average() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def timed(function, *args):
    """(seconds, result) of ``function(*args)``."""
    start = time.perf_counter()
    result = function(*args)
    return time.perf_counter() - start, result


def main() -> int:
    args = parse_args()
    import dask
    import dask.array as da
    import distributed
    import numpy as np

    import kuiper
    from kuiper.dask import local_cluster, predict

    if not args.model.is_file():
        print(f"{args.model} not found: python3 tools/make_fixtures.py --full resnet18_full", file=sys.stderr)
        return 1
    print(f"kuiper {kuiper.__version__}, dask {dask.__version__}, distributed {distributed.__version__}, "
          f"numpy {np.__version__}, Python {platform.python_version()}, {os.cpu_count()} CPUs, {platform.processor()}")
    print(f"model {args.model}: {args.images} images float32 in chunks of {args.batch}")
    print(f"load average before: {load_average()}")
    models = {threads: kuiper.load(args.model, threads=threads) for threads in (1, 2)}
    image_shape = tuple(models[1].inputs[0].shape[1:])  # 3x224x224 for ResNet-18; smaller for the small fixtures
    images = np.random.default_rng(0).standard_normal((args.images,) + image_shape, dtype=np.float32)

    def plain(threads):
        model = models[threads]
        return np.concatenate([model(images[i:i + args.batch], to_numpy=True)
                               for i in range(0, len(images), args.batch)])

    clusters = {
        "dask 2w x 1t": ({"workers": 2, "threads_per_worker": 1}, {}),
        "dask 1w x 2t": ({"workers": 1, "threads_per_worker": 2}, {}),
        "dask 1w x 1t, threads 2": ({"workers": 1, "threads_per_worker": 1, "blas_threads": 2}, {"threads": 2}),
    }
    reference = {}
    overhead_lines: list[str] = []

    def wanted(label):
        return not args.only or label in args.only

    seconds: dict[str, list[float]] = {}
    cpu_ms: dict[str, str] = {}
    notes: dict[str, str] = {}

    def record(label, elapsed, cpu_here, cpu_workers=None):
        seconds.setdefault(label, []).append(elapsed)
        per_image = f"{cpu_here / args.images * 1e3:.0f}"
        if cpu_workers is not None:
            per_image = f"{per_image} + workers {cpu_workers / args.images * 1e3:.0f}"
        cpu_ms[label] = per_image
        print(f"  {label}: {elapsed:.1f} s, CPU ms per image {per_image}", flush=True)

    for round_index in range(args.rounds):
        for label, threads in (("plain, 1 thread", 1), ("plain, 2 threads", 2)):
            if not wanted(label):
                continue
            cpu_before = process_cpu()
            elapsed, out = timed(plain, threads)
            record(label, elapsed, process_cpu() - cpu_before)
            reference.setdefault(threads, out)
        label = "dask threads, 2 x 1t"
        if wanted(label):
            cpu_before = process_cpu()
            elapsed, out = timed(lambda: predict(args.model, images, batch_size=args.batch).compute(
                scheduler="threads", num_workers=2))
            record(label, elapsed, process_cpu() - cpu_before)
        for label, (settings, load_options) in clusters.items():
            if not wanted(label):
                continue
            start = time.perf_counter()
            with local_cluster(dashboard_address="127.0.0.1:0", **settings) as cluster, \
                    distributed.Client(cluster) as client:
                started = time.perf_counter() - start
                held = da.from_array(images, chunks=(args.batch,) + image_shape).persist()
                distributed.wait(held)
                # Warm-up: one chunk per worker thread loads the model into each worker's cache.
                warm_rows = args.batch * settings["workers"] * settings["threads_per_worker"]
                first_load, _ = timed(predict(args.model, held[:warm_rows], batch_size=args.batch, **load_options).compute)
                cpu_before, workers_before = process_cpu(), client.run(process_cpu)
                elapsed, out = timed(predict(args.model, held, batch_size=args.batch, **load_options).compute)
                workers_cpu = sum(client.run(process_cpu).values()) - sum(workers_before.values())
                record(label, elapsed, process_cpu() - cpu_before, workers_cpu)
                same = reference.get(load_options.get("threads", 1))
                notes[label] = (f"cluster start {started:.1f} s, warm-up (model load + first chunks) {first_load:.1f} s"
                                + ("" if same is None else f", max |diff| vs plain {np.abs(out - same).max():.1e}"))
                if label == "dask 2w x 1t":
                    label_client = label + ", from client"
                    cpu_before, workers_before = process_cpu(), client.run(process_cpu)
                    elapsed, _ = timed(predict(args.model, images, batch_size=args.batch).compute)
                    workers_cpu = sum(client.run(process_cpu).values()) - sum(workers_before.values())
                    record(label_client, elapsed, process_cpu() - cpu_before, workers_cpu)
                    if round_index == 0:
                        overhead_lines = measure_overhead(client, args, predict, np)
        print(f"round {round_index + 1} done; load average {load_average()}", flush=True)

    plain_labels = [label for label in ("plain, 1 thread", "plain, 2 threads") if label in seconds]
    best_plain = max(args.images / min(seconds[label]) for label in plain_labels) if plain_labels else None
    print(f"\n| configuration | seconds ({args.rounds} round(s)) | images/s (best) | vs best plain | "
          "CPU ms per image (this process + workers, last round) |")
    print("|---|---|---|---|---|")
    for label, values in seconds.items():
        rate = args.images / min(values)
        versus = f"{rate / best_plain:.2f}" if best_plain else "-"
        print(f"| {label} | {' / '.join(f'{v:.1f}' for v in values)} | {rate:.2f} | {versus} | {cpu_ms[label]} |")
    for label, note in notes.items():
        print(f"- {label}: {note}")
    for line in overhead_lines:
        print(line)
    print(f"load average after: {load_average()}")
    return 0


def process_cpu() -> float:
    """CPU seconds (user + system) this process has used, all its threads; runs on workers too (client.run)."""
    import psutil

    times = psutil.Process().cpu_times()
    return times.user + times.system


def measure_overhead(client, args, predict, np) -> list[str]:
    """Per-task cost of the scheduler path, with almost no work in the task."""
    import distributed

    count = args.overhead_tasks
    noop_seconds, _ = timed(lambda: client.gather(client.map(_noop, range(count), pure=False)))
    tiny = np.zeros((count, 3, 4, 5), np.float32)
    predict(TINY_MODEL, tiny[:2], batch_size=1).compute()  # load the tiny model on the workers first
    tiny_seconds, _ = timed(predict(TINY_MODEL, tiny, batch_size=1).compute)
    chunk = np.zeros((args.batch, 3, 224, 224), np.float32)
    transfers = 10
    worker = next(iter(client.scheduler_info()["workers"]))
    transfer_seconds, _ = timed(lambda: [distributed.wait(client.scatter(chunk.copy(), workers=[worker], direct=True))
                                      for _ in range(transfers)])
    return [
        (f"- {count} no-op tasks on 2 workers: {noop_seconds:.2f} s = {noop_seconds / count * 1e6:.0f} us per task "
         f"({count / noop_seconds:.0f} tasks/s)"),
        (f"- predict over {count} one-row chunks of a tiny model (2 tasks per chunk): {tiny_seconds:.2f} s = "
         f"{tiny_seconds / count * 1e6:.0f} us per chunk"),
        (f"- sending one {args.batch}-image chunk ({chunk.nbytes / 2**20:.1f} MiB) client -> worker: "
         f"{transfer_seconds / transfers * 1e3:.1f} ms"),
    ]


def _noop(i):
    return i


if __name__ == "__main__":
    sys.exit(main())
