"""Time one network loaded from ONNX and from PNNX (and ONNX Runtime on the same .onnx file).

    python tools/bench_onnx_vs_pnnx.py [--threads 1] [--calls 200]

The ONNX fixtures (tools/make_onnx_fixtures.py) are the PNNX fixtures' networks with the same
weights, so both loads must give the same outputs and, the frontend only translating, about the
same time. Prints the median time per call of each and the ratios.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

import kuiper

ROOT = Path(__file__).resolve().parent.parent
NAMES = ("resnet_basic", "mobilenet_v2")


def median_ms(call, calls: int) -> float:
    for _ in range(10):
        call()
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--batch", type=int, default=1)
    arguments = parser.parse_args()
    for name in NAMES:
        x = np.random.default_rng(0).standard_normal((arguments.batch, 3, 32, 32)).astype(np.float32)
        onnx_path = ROOT / "tests" / "fixtures" / "onnx" / name / "model.onnx"
        from_onnx = kuiper.load(onnx_path, threads=arguments.threads)
        from_pnnx = kuiper.load(ROOT / "tests" / "fixtures" / "models" / name / "model.pnnx.param",
                                threads=arguments.threads)
        difference = float(np.abs(from_onnx(x, to_numpy=True) - from_pnnx(x, to_numpy=True)).max())
        onnx_ms = median_ms(lambda: from_onnx(x), arguments.calls)  # noqa: B023 - timed at once
        pnnx_ms = median_ms(lambda: from_pnnx(x), arguments.calls)  # noqa: B023
        line = (f"{name} batch {arguments.batch}: ONNX {onnx_ms:.3f} ms, PNNX {pnnx_ms:.3f} ms "
                f"(ONNX/PNNX {onnx_ms / pnnx_ms:.2f}), outputs differ by {difference:.1e}")
        try:
            import onnxruntime  # noqa: PLC0415 - optional, for the comparison only
        except ImportError:
            print(line + "; onnxruntime not installed")
            continue
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = arguments.threads
        session = onnxruntime.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
        ort_ms = median_ms(lambda: session.run(None, {"input": x}), arguments.calls)  # noqa: B023
        print(line + f"; ONNX Runtime {ort_ms:.3f} ms (kuiper/ORT {onnx_ms / ort_ms:.2f})")


if __name__ == "__main__":
    main()
