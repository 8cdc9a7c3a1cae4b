"""The fresh process ``kuiper bench --memory`` starts per engine: load the model, run it once, print JSON.

fresh_process.py runs this file by path (``runpy.run_path``), not as part of the kuiper package:
importing any ``kuiper.*`` module imports kuiper itself (35 MiB and about 150 ms), which a peer's
process must not count.  So this file imports only the standard library and NumPy at the top;
the kuiper engine imports kuiper (that is what it measures), a peer runs peers.py by path, and the
inputs come from the parent in an .npz file (making them needs kuiper's PNNX reader).

Command line: ``ENGINE MODEL_FILE INPUTS_NPZ THREADS BACKEND LAUNCHED``: THREADS and BACKEND are
``-`` for the defaults; LAUNCHED is the parent's ``time.time()`` just before it started this process.
The environment carries the thread limits (OMP_NUM_THREADS ...) and KUIPER_NUMBA.
"""

from __future__ import annotations

import json
import resource
import runpy
import sys
import time
from pathlib import Path

import numpy as np


STEADY_CALLS = 5  # the calls whose peak RSS the report gives ("peak RSS"); the first one's is given too


def peak_rss_mib() -> float:
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


def main(argv: list[str]) -> int:
    engine_name, model_file, inputs_file, threads, backend, launched = argv
    threads = None if threads == "-" else int(threads)
    with np.load(inputs_file) as saved:
        inputs = [saved[f"input{index}"] for index in range(len(saved.files))]
    if engine_name == "kuiper":
        import kuiper  # noqa: PLC0415 - here, not above: a peer's process must not import it

        after_import = peak_rss_mib()
        start = time.perf_counter()
        model = kuiper.load(model_file, backend=None if backend == "-" else backend, threads=threads)
        load_ms = (time.perf_counter() - start) * 1e3
        call = lambda: model(*inputs)  # noqa: E731
    else:
        peers = runpy.run_path(str(Path(__file__).with_name("peers.py")))
        __import__(engine_name)  # the peer's library, before the reading, so "after imports" includes it
        after_import = peak_rss_mib()
        engine = peers[f"{engine_name}_engine"](Path(model_file), inputs, threads)
        call, load_ms = engine.call, engine.load_ms
    start = time.perf_counter()
    call()
    first_run_ms = (time.perf_counter() - start) * 1e3
    startup_ms, startup_cpu_ms = (time.time() - float(launched)) * 1e3, time.process_time() * 1e3
    after_first_run = peak_rss_mib()
    for _ in range(STEADY_CALLS - 1):  # a service's later calls: kuiper's memory plan is made by then
        call()
    print(json.dumps({"engine": engine_name, "load_ms": load_ms, "first_run_ms": first_run_ms,
                      "startup_ms": startup_ms, "startup_cpu_ms": startup_cpu_ms,
                      "maxrss_after_import_mib": after_import, "maxrss_first_run_mib": after_first_run,
                      "maxrss_mib": peak_rss_mib(), "kuiper_imported": "kuiper" in sys.modules}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
