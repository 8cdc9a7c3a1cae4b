"""The HLO conv net side by side: kuiper from HLO text, PyTorch, and kuiper from a pnnx export (needs torch + pnnx).

    PYTHONPATH=. .venv/bin/python tools/bench_hlo_conv_net.py [--runs 50] [--repeats 3] [--threads 2]

The net is asv_benchmarks/benchmarks/data/conv_net.hlo.txt.gz (written by
``tools/make_hlo_fixtures.py --bench``: four 3x3 convolutions, 64 channels, 56x56, batch 1,
bias and ReLU, the weights closed-over constants). Its kernels and biases are read from
the HLO text, so PyTorch (``nn.Conv2d`` + ``nn.ReLU``, NCHW) and the pnnx export of that
module run the same weights. The three engines are timed interleaved in one process
(median of ``--runs`` calls, in a rotating order), ``--repeats`` times, and the ratios of each
repeat printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
        os.environ[variable] = str(args.threads)  # before numpy, numba and torch start their pools

    import numpy as np
    import torch

    sys.path.insert(0, str(ROOT / "tools"))
    sys.path.insert(0, str(ROOT / "asv_benchmarks"))
    import fixturelib
    import kuiper
    from benchmarks.bench_hlo_conv_net import conv_layers, hlo_text, torch_module

    torch.set_num_threads(args.threads)
    text = hlo_text()
    hlo_model = kuiper.load_hlo(text, backend="numpy")
    torch_model = torch_module(conv_layers(text))  # the weights the HLO text holds

    x = np.random.RandomState(0).randn(*hlo_model.inputs[0].shape).astype(np.float32)
    with tempfile.TemporaryDirectory(prefix="kuiper-conv-net-") as folder:
        param = fixturelib.pnnx_export(torch_model, [torch.from_numpy(x)], Path(folder))
        pnnx_model = kuiper.load(param, backend="numpy")

    def run_torch():
        with torch.inference_mode():
            return torch_model(torch.from_numpy(x)).numpy()

    engines = {"kuiper HLO": lambda: hlo_model(x), "PyTorch": run_torch, "kuiper PNNX": lambda: pnnx_model(x)}
    expected = run_torch()
    for name in ("kuiper HLO", "kuiper PNNX"):
        difference = float(np.max(np.abs(np.asarray(engines[name]()) - expected)))
        print(f"{name}: max |difference| from PyTorch {difference:.2e}")
        if difference > 1e-3:
            sys.exit(f"{name} disagrees with PyTorch")
    print(f"torch {torch.__version__}, numpy {np.__version__}, kuiper {kuiper.__version__}, {args.threads} threads; "
          f"conv steps: {[type(s.op).__name__ for s in hlo_model.steps if s.node.type == 'Conv']}")
    print(f"{'repeat':<7} {'HLO ms':>8} {'torch ms':>9} {'PNNX ms':>8} {'HLO/torch':>10} {'HLO/PNNX':>9}")
    for repeat in range(args.repeats):
        times: dict[str, list[float]] = {name: [] for name in engines}
        for run in engines.values():  # warm-up
            run()
        names = list(engines)
        for index in range(args.runs):
            # Interleaved, so all three see the same machine load, in a rotating order: whichever runs
            # right after PyTorch shares the CPUs with its OpenMP threads still spinning.
            for name in names[index % 3:] + names[: index % 3]:
                start = time.perf_counter()
                engines[name]()
                times[name].append(time.perf_counter() - start)
        hlo, torch_ms, pnnx = (statistics.median(times[n]) * 1e3 for n in engines)
        print(f"{repeat + 1:<7} {hlo:8.2f} {torch_ms:9.2f} {pnnx:8.2f} {hlo / torch_ms:10.2f} {hlo / pnnx:9.2f}")


if __name__ == "__main__":
    main()
