"""``kuiper bench --memory``: one fresh interpreter per engine loads the model and runs it once.

The parent starts ``python -m kuiper.bench --child ...`` per engine (see __main__.py);
the child prints one JSON line with its peak resident memory, load and first-run time,
and its start-up: from the parent's launch to the end of the first run (interpreter,
imports, load, first run), as wall time and as the child's CPU time (the CPU time
counts all its threads, but little of what other processes on a busy machine do).

kuiper runs twice: as configured, and with its compiled kernels switched off
(``KUIPER_NUMBA=0``), because numba's import and first-call set-up are a fixed cost
of their own (docs/performance.md, "Start-up and memory").
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import kuiper

from ..config import switch_from_env
from ..numba_kernels.runtime import DISABLE_ENV as NUMBA_SWITCH_ENV
from .engines import Engine, onnxruntime_engine, torch_engine
from .inputs import input_specs, random_inputs
from .machine import THREAD_ENV_VARS


def _peak_rss_mib() -> float:
    """Peak resident memory of this process image.

    /proc/self/status VmHWM counts only this program's memory; ru_maxrss would also
    include the parent's peak, which Linux carries across fork + exec.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux, bytes on macOS


def child_main(argv: list[str]) -> int:
    """``python -m kuiper.bench --child ENGINE PARAM PEER_FILE BATCH THREADS BACKEND LAUNCHED``: load, run once,
    print JSON.  LAUNCHED is the parent's ``time.time()`` just before it started this process.

    Thread limits come from the environment the parent sets (OMP_NUM_THREADS ...).
    """
    engine_name, param, peer, batch, threads, backend, launched = argv
    param, batch = Path(param), int(batch)
    threads = None if threads == "-" else int(threads)
    # The peer's library is imported here, before the first reading, so "after imports" includes it.
    if engine_name == "torch":
        import torch  # noqa: F401
    elif engine_name == "onnxruntime":
        import onnxruntime  # noqa: F401
    after_import = _peak_rss_mib()
    inputs = random_inputs(input_specs(param), batch)
    if engine_name == "kuiper":
        start = time.perf_counter()
        model = kuiper.load(param, backend=None if backend == "-" else backend, threads=threads)
        load_ms = (time.perf_counter() - start) * 1e3
        engine = Engine("kuiper", "", lambda: model(*inputs), list, load_ms)
    elif engine_name == "torch":
        engine = torch_engine(Path(peer), inputs, threads)
    else:
        engine = onnxruntime_engine(Path(peer), inputs, threads)
    start = time.perf_counter()
    engine.call()
    first_run_ms = (time.perf_counter() - start) * 1e3
    startup_ms = (time.time() - float(launched)) * 1e3
    print(json.dumps({"engine": engine_name, "load_ms": engine.load_ms, "first_run_ms": first_run_ms,
                      "startup_ms": startup_ms, "startup_cpu_ms": time.process_time() * 1e3,
                      "maxrss_after_import_mib": after_import, "maxrss_mib": _peak_rss_mib()}))
    return 0


def measure_fresh_processes(param: Path, peers: dict[str, Path], batch: int, threads: int | None,
                            backend: str | None) -> list[str]:
    """One fresh interpreter per engine: load + one run; its peak RSS, load, first-run and start-up time."""
    jobs = [("kuiper", "kuiper", "-", {})]
    if switch_from_env(NUMBA_SWITCH_ENV, default=True):  # kernels on: also measure kuiper without them
        jobs.append(("kuiper", "kuiper, no numba", "-", {NUMBA_SWITCH_ENV: "0"}))
    jobs += [(name, name, str(path), {}) for name, path in peers.items()]
    lines = ["fresh process per engine (python + import + load + one run; peak RSS = VmHWM; "
             "start-up = launch to end of first run, wall / CPU):"]
    env = dict(os.environ)
    if threads is not None:
        env.update({var: str(threads) for var in THREAD_ENV_VARS})  # before numpy loads: honoured
    # Run from the folder holding THIS kuiper package, so `-m kuiper.bench` finds the same
    # kuiper even when the current directory holds another checkout.
    package_root = Path(kuiper.__file__).resolve().parents[1]
    for name, label, peer, extra_env in jobs:
        command = [sys.executable, "-m", "kuiper.bench", "--child", name, str(param.resolve()),
                   peer if peer == "-" else str(Path(peer).resolve()), str(batch),
                   "-" if threads is None else str(threads), backend or "-", repr(time.time())]
        done = subprocess.run(command, capture_output=True, text=True, env=env | extra_env, cwd=package_root,
                              check=False)
        if done.returncode != 0:
            tail = (done.stderr.strip().splitlines() or ["?"])[-1]
            lines.append(f"  {label:<16} failed: {tail}")
            continue
        data = json.loads(done.stdout.strip().splitlines()[-1])
        lines.append(f"  {label:<16} peak RSS {data['maxrss_mib']:7.1f} MiB (after imports "
                     f"{data['maxrss_after_import_mib']:6.1f} MiB); load {data['load_ms']:7.1f} ms; "
                     f"first run {data['first_run_ms']:7.1f} ms; start-up {data['startup_ms']:7.1f} / "
                     f"{data['startup_cpu_ms']:7.1f} ms")
    return lines
