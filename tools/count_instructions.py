"""Instructions per model call, counted by valgrind's callgrind: a measure this VM's speed phases do not move.

  PYTHONPATH=. python3 tools/count_instructions.py build/survey/nn_transformer_encoder
  PYTHONPATH=. python3 tools/count_instructions.py MODEL --calls 20 --tree /tmp/other-checkout

Time on a shared 2-vCPU VM changes by about 1.65x between phases of seconds, so a change of a
few percent to kuiper's per-op Python cannot be seen in it (docs/performance.md, thirteenth
round).  Valgrind counts instructions exactly.  Only what runs inside one ``functools.reduce``
over ``--calls`` model calls is counted (``--toggle-collect=functools_reduce``; kuiper itself never
calls it), after warm-up calls, at ``threads=1`` with ``OMP_NUM_THREADS=1`` and
``OMP_WAIT_POLICY=passive`` so that no spinning worker thread adds to the count.

Counts of the same code agree within about 0.4%, but some processes add a one-off amount inside
the counted window (numba's work under valgrind's CPU, not a per-call cost): compare two trees
only when their counts are in the same level, and run each twice when they are not.  Under
valgrind numba compiles for the CPU valgrind reports (no AVX-512), so the split between compiled
kernels and Python is not the real machine's; a change to Python code is counted exactly.  One
run takes minutes (import, load and numba's cache under instrumentation).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# The child: load, warm up, then the counted calls inside functools.reduce.
CHILD = """
import functools, sys
import numpy as np
import kuiper
model = kuiper.load(sys.argv[1], threads=1)
feeds = [np.random.default_rng(0).standard_normal(tuple(1 if d is None else d for d in spec.shape))
         .astype(spec.dtype or np.float32) for spec in model.inputs]
for _ in range(int(sys.argv[3])):
    model(*feeds)
functools.reduce(lambda count, _: (model(*feeds), count + 1)[1], range(int(sys.argv[2])), 0)
"""


def count(model: str, calls: int, warmup: int, tree: str | None) -> int:
    """Instructions per call of ``model`` (kuiper imported from ``tree`` when given)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="passive")
    if tree:
        env["PYTHONPATH"] = tree
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "callgrind.out"
        command = ["valgrind", "--tool=callgrind", "--collect-atstart=no", "--toggle-collect=functools_reduce",
                   f"--callgrind-out-file={out}", sys.executable, "-c", CHILD, model, str(calls), str(warmup)]
        run = subprocess.run(command, env=env, capture_output=True, text=True)
        if run.returncode != 0 or not out.exists():
            raise SystemExit(f"valgrind failed (exit {run.returncode}):\n{run.stderr[-2000:]}")
        for line in out.read_text().splitlines():
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1]) // calls
    raise SystemExit(f"no instruction total in {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="a .pnnx.param file or a folder holding model.pnnx.param")
    parser.add_argument("--calls", type=int, default=20, help="counted calls (default 20)")
    parser.add_argument("--warmup", type=int, default=3, help="uncounted calls first (default 3)")
    parser.add_argument("--tree", help="import kuiper from this folder (a checkout of another commit)")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    if args.calls < 1 or args.warmup < 0:
        raise SystemExit("--calls must be at least 1 and --warmup at least 0")
    print(f"{args.model}: {count(args.model, args.calls, args.warmup, args.tree):,} instructions per call "
          f"({args.calls} calls, 1 thread)")


if __name__ == "__main__":
    main()
