"""``kuiper bench --memory``: one fresh interpreter per engine loads the model and runs it once.

The parent starts ``fresh_child.py`` per engine, by path, so that a peer's process imports
neither kuiper nor anything of it (see fresh_child.py), and hands it the inputs in an .npz file.
The child prints one JSON line with its peak resident memory, load and first-run time, and its
start-up: from the parent's launch to the end of the first run (interpreter, imports, load,
first run), as wall time and as the child's CPU time (the CPU time counts all its threads, but
little of what other processes on a busy machine do).

kuiper runs twice: as configured, and with its kernel plugin switched off (``KUIPER_NUMBA=0``:
no numba, and no oneDNN ops either, since they come with that plugin), because numba's import
and first-call set-up are a fixed cost of their own (docs/performance.md, "Start-up and
memory").  A model whose ops all run on oneDNN never imports numba, so there the first row
already shows kuiper without it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import kuiper

from ..config import switch_from_env
from ..numba_kernels.runtime import DISABLE_ENV as NUMBA_SWITCH_ENV
from .inputs import input_specs, random_inputs
from .machine import THREAD_ENV_VARS

CHILD = Path(__file__).with_name("fresh_child.py")
# Runs CHILD as __main__ without putting its folder first on sys.path (as ``python CHILD`` would:
# this package's modules would then shadow top-level ones of the same name).
_RUN_CHILD = "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"


def measure_fresh_processes(param: Path, peers: dict[str, Path], batch: int, threads: int | None,
                            backend: str | None) -> list[str]:
    """One fresh interpreter per engine: load + five runs; its peak RSS (after the first run and after all five,
    when kuiper's memory plan is made), load, first-run and start-up time."""
    jobs = [("kuiper", "kuiper", param, {})]
    if switch_from_env(NUMBA_SWITCH_ENV, default=True):  # kernels on: also measure kuiper without them
        jobs.append(("kuiper", "kuiper, KUIPER_NUMBA=0", param, {NUMBA_SWITCH_ENV: "0"}))
    jobs += [(name, name, path, {}) for name, path in peers.items()]
    lines = ["fresh process per engine (python + import + load + five runs; peak RSS = VmHWM; "
             "start-up = launch to end of first run, wall / CPU):"]
    env = dict(os.environ)
    if threads is not None:
        env.update({var: str(threads) for var in THREAD_ENV_VARS})  # before numpy loads: honoured
    # Run from the folder holding THIS kuiper package, so the child's `import kuiper` finds the
    # same kuiper even when the current directory holds another checkout.
    package_root = Path(kuiper.__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="kuiper-bench-") as folder:
        inputs_file = Path(folder) / "inputs.npz"
        np.savez(inputs_file, **{f"input{index}": array
                                 for index, array in enumerate(random_inputs(input_specs(param), batch))})
        for name, label, model_file, extra_env in jobs:
            command = [sys.executable, "-c", _RUN_CHILD, str(CHILD), name, str(Path(model_file).resolve()),
                       str(inputs_file), "-" if threads is None else str(threads), backend or "-", repr(time.time())]
            done = subprocess.run(command, capture_output=True, text=True, env=env | extra_env, cwd=package_root,
                                  check=False)
            lines.append(_row(label, done))
    return lines


def _row(label: str, done: subprocess.CompletedProcess) -> str:
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["?"])[-1]
        return f"  {label:<22} failed: {tail}"
    data = json.loads(done.stdout.strip().splitlines()[-1])
    return (f"  {label:<22} peak RSS {data['maxrss_mib']:7.1f} MiB over 5 calls (after imports "
            f"{data['maxrss_after_import_mib']:6.1f}, the first call {data['maxrss_first_run_mib']:6.1f} MiB); "
            f"load {data['load_ms']:7.1f} ms; "
            f"first run {data['first_run_ms']:7.1f} ms; start-up {data['startup_ms']:7.1f} / "
            f"{data['startup_cpu_ms']:7.1f} ms")
