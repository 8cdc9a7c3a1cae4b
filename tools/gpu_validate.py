"""Validate the CuPy backend on a machine with an NVIDIA GPU and print the tables for docs/gpu.md.

    python tools/gpu_validate.py [--resnet build/fixtures-full/resnet18_full] [--runs 50]

1. Every fixture model under tests/fixtures/models on ``cupy`` vs ``numpy``:
   max abs difference per fixture and batch, and vs the saved PyTorch outputs.
2. A fused 5-node expression on 8x64x256x256 float32: one fused kernel vs the
   same expression op by op with CuPy, and the number of kernel launches of
   the fused version.
3. ResNet-18 (full size, if given) at batch 8: numpy backend vs cupy backend vs
   PyTorch CUDA eager (if torch with CUDA is installed), median ms.

Needs cupy (``pip install -e .[gpu]``); torch is optional.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import kuiper  # noqa: E402

MODELS = ROOT / "tests" / "fixtures" / "models"
EXPRESSION = "mul(add(sigmoid(@0),tanh(@1)),sub(exp(neg(@0)),@1))"  # five nodes beside the inputs


def _median_ms(fn, runs: int, sync) -> float:
    fn()
    sync()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def check_fixtures() -> tuple[int, int]:
    print("| fixture | batch | max abs cupy vs numpy | max abs cupy vs PyTorch |")
    print("| --- | --- | --- | --- |")
    passed = failed = 0
    for folder in sorted(MODELS.iterdir()):
        param = folder / "model.pnnx.param"
        if not param.exists():
            continue
        try:
            cpu = kuiper.load(param, backend="numpy")
            gpu = kuiper.load(param, backend="cupy")
            ref = np.load(folder / "ref.npz")
            batches = sorted({key.split("_")[0] for key in ref.files})
            for batch in batches:
                inputs = [ref[f"{batch}_input{i}"] for i in range(len(cpu.inputs))]
                a = cpu(*inputs, to_numpy=True)
                b = gpu(*inputs, to_numpy=True)
                a, b = (a if isinstance(a, tuple) else (a,)), (b if isinstance(b, tuple) else (b,))
                vs_numpy = max(float(np.abs(np.asarray(x, np.float64) - y).max(initial=0)) for x, y in zip(a, b))
                vs_torch = max(
                    float(np.abs(np.asarray(y, np.float64) - ref[f"{batch}_output{j}"]).max(initial=0))
                    for j, y in enumerate(b)
                )
                ok = vs_numpy <= 1e-4
                passed, failed = passed + ok, failed + (not ok)
                print(f"| {folder.name} | {batch} | {vs_numpy:.2e}{'' if ok else ' FAIL'} | {vs_torch:.2e} |")
        except Exception as exc:  # report and go on: the table is the point
            failed += 1
            print(f"| {folder.name} | - | ERROR {type(exc).__name__}: {str(exc)[:80]} | |")
    print(f"\n{passed} passed, {failed} failed")
    return passed, failed


def fused_expression(runs: int) -> None:
    import cupy

    from kuiper.backends import get_backend
    from kuiper.pnnx_expr import parse
    from kuiper.pnnx_expr.lower import lower
    from kuiper.ir import simplify

    backend = get_backend("cupy")
    fused = backend.compile_elementwise(simplify(lower(parse(EXPRESSION), ["float32", "float32"])))
    rng = cupy.random.default_rng(0)
    x = rng.standard_normal((8, 64, 256, 256), dtype=cupy.float32)
    y = rng.standard_normal((8, 64, 256, 256), dtype=cupy.float32)

    def op_by_op():
        return (1 / (1 + cupy.exp(-x)) + cupy.tanh(y)) * (cupy.exp(-x) - y)

    launches = []
    original = cupy.ElementwiseKernel.__call__

    def counting(self, *args, **kwargs):
        launches.append(self.name)
        return original(self, *args, **kwargs)

    cupy.ElementwiseKernel.__call__ = counting
    try:
        result = fused(x, y)
    finally:
        cupy.ElementwiseKernel.__call__ = original
    error = float(cupy.abs(result - op_by_op()).max())
    sync = cupy.cuda.get_current_stream().synchronize
    t_fused = _median_ms(lambda: fused(x, y), runs, sync)
    t_ops = _median_ms(op_by_op, runs, sync)
    print(f"\nfused 5-node expression on 8x64x256x256 f32: {t_fused:.3f} ms fused, {t_ops:.3f} ms op by op "
          f"({t_ops / t_fused:.2f}x); kernel launches of the fused call: {len(launches)}; max abs diff {error:.2e}")


def resnet(folder: Path, runs: int, batch: int = 8) -> None:
    param = folder / "model.pnnx.param"
    if not param.exists():
        print(f"\n(no {param}: make it with `python3 tools/make_fixtures.py --full --keep-peers`)")
        return
    import cupy

    x = np.random.default_rng(0).standard_normal((batch, 3, 224, 224), dtype=np.float32)
    cpu = kuiper.load(param, backend="numpy")
    gpu = kuiper.load(param, backend="cupy")
    x_gpu = cupy.asarray(x)
    sync = cupy.cuda.get_current_stream().synchronize
    rows = [("kuiper numpy", _median_ms(lambda: cpu(x), max(3, runs // 10), lambda: None)),
            ("kuiper cupy", _median_ms(lambda: gpu(x_gpu), runs, sync))]
    try:
        import torch

        if torch.cuda.is_available() and (folder / "model.pt").exists():
            net = torch.jit.load(str(folder / "model.pt")).cuda().eval()
            xt = torch.from_numpy(x).cuda()
            with torch.no_grad():
                rows.append(("PyTorch CUDA (TorchScript)", _median_ms(lambda: net(xt), runs, torch.cuda.synchronize)))
    except ImportError:
        pass
    print(f"\nResNet-18 batch {batch}, median ms:")
    for name, ms in rows:
        print(f"  {name:<28} {ms:8.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--resnet", type=Path, default=ROOT / "build" / "fixtures-full" / "resnet18_full")
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    info = {b.name: b for b in kuiper.backends()}["cupy"]
    if not info.available:
        print(f"cupy backend unavailable: {info.reason}")
        return 1
    import cupy

    print(f"CuPy {cupy.__version__}, CUDA runtime {cupy.cuda.runtime.runtimeGetVersion()}, "
          f"GPU {cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}\n")
    _, failed = check_fixtures()
    fused_expression(args.runs)
    resnet(args.resnet, args.runs)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
