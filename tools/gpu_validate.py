"""Validate the CuPy backend on a machine with an NVIDIA GPU; print the tables of docs/gpu.md.

    python tools/gpu_validate.py [--runs 30] [--json results.json] [--test-log pytest.log]

One run does all of issue 28's checks:

1. the test suite, with the cupy cases enabled (they skip elsewhere), through pytest-xdist when
   it is installed (run last, so that the timings have the machine to themselves);
2. every PNNX fixture (tests/fixtures/models) on ``cupy``, fused and unfused, against the NumPy
   backend and the saved PyTorch outputs; every HLO program (tests/fixtures/hlo), both texts,
   against the saved JAX outputs;
3. a fused 5-node elementwise chain on 8x64x256x256 float32 against the same chain op by op in
   CuPy, with the kernel launches of each counted by the CUDA profiler (CUPTI, through torch);
4. the full-size models against PyTorch CUDA eager on the same GPU: median milliseconds from CUDA
   events after warm-up, the host time a call takes to queue its work, kernel launches per call;
5. where the time goes: ResNet-18's kernels by GPU time at batch 8 and 1, and the host time each
   op type of ResNet-18 and MobileNetV2 takes to queue its work at batch 1.

The full-size models are the ``*_full`` fixtures that ``tools/make_fixtures.py --full`` exports
(resnet18_full, mobilenet_v2_full, yolov5_style_full, vit_block_full).  Their .pnnx.param files
are kept in tools/gpu_models (a GPU machine has no pnnx, and their weights are too large to carry):
a missing .pnnx.bin is written with seeded random weights of the shapes the param declares
(timings do not depend on the values; cupy is then checked against numpy on the same weights).
The PyTorch side is the same architecture, built from tools/fixture_models.
Needs cupy (``pip install -e .[gpu]``); torch with CUDA for the PyTorch rows and launch counts.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / "tools"
sys.path.insert(0, str(TOOLS))  # fixture_models and fixturelib, for the PyTorch side
MODELS = ROOT / "tests" / "fixtures" / "models"
HLO = ROOT / "tests" / "fixtures" / "hlo"
CHAIN_SHAPE = (8, 64, 256, 256)
TOLERANCE = 1e-4  # of max(1, largest reference magnitude)
# (fixture name, batches, input height/width) of the speed table.
SPEED_MODELS = [
    ("resnet18_full", (1, 8, 64), 224),
    ("mobilenet_v2_full", (1, 8, 64), 224),
    ("yolov5_style_full", (1, 8), 640),
    ("vit_block_full", (1, 8), 224),
]
_PNNX_DTYPES = {"f32": "<f4", "f64": "<f8", "f16": "<f2", "i64": "<i8", "i32": "<i4", "i16": "<i2", "i8": "i1",
                "u8": "u1", "bool": "?"}

import kuiper  # noqa: E402
from kuiper.formats.pnnx_param import parse_param  # noqa: E402


def _torch_cuda():
    """torch when it is installed with a usable GPU, else None."""
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def _relative_error(got, want) -> float:
    """Largest difference over max(1, largest reference magnitude); equal infinities and NaN where
    the reference has NaN count as agreement."""
    kind = np.complex128 if np.iscomplexobj(got) or np.iscomplexobj(want) else np.float64
    want, got = np.atleast_1d(np.asarray(want, kind)), np.atleast_1d(np.asarray(got, kind))
    if got.shape != want.shape:
        return math.inf
    with np.errstate(invalid="ignore"):
        difference = np.abs(got - want)
    difference[(got == want) | (np.isnan(got) & np.isnan(want))] = 0
    scale = max(1.0, float(np.abs(want[np.isfinite(want)]).max(initial=0)))
    return float(difference.max(initial=0)) / scale


def _worst(errors) -> float:
    """The largest error, NaN counting as the largest (max() would pass over it)."""
    return max(errors, key=lambda error: math.inf if math.isnan(error) else error)


def _as_tuple(value):
    return value if isinstance(value, tuple) else (value,)


# -- 0. the machine ------------------------------------------------------------------------------------
def environment() -> dict:
    import cupy

    runtime = cupy.cuda.runtime
    props = runtime.getDeviceProperties(0)
    info = {
        "gpu": props["name"].decode(),
        "gpu_memory_gib": round(props["totalGlobalMem"] / 2**30, 1),
        "driver_cuda": runtime.driverGetVersion(),
        "cuda_runtime": runtime.runtimeGetVersion(),
        "cupy": cupy.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
    }
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        info["driver"] = smi.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        info["driver"] = "unknown (no nvidia-smi)"
    torch = _torch_cuda()
    if torch is not None:
        info["torch"] = torch.__version__
        info["torch_cuda"] = torch.version.cuda
        info["cudnn"] = torch.backends.cudnn.version()
    print("## Machine\n")
    for key, value in info.items():
        print(f"- {key}: {value}")
    return info


# -- 1. the test suite ---------------------------------------------------------------------------------
def test_suite(workers: int, timeout: int, log: Path) -> dict:
    """The whole suite, each test's result written to ``log`` as it finishes (a suite cut off by
    ``timeout`` still shows what failed so far)."""
    command = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-rfE"]
    if importlib.util.find_spec("xdist") is not None:  # pytest-xdist: the suite on many cores
        command += ["-n", str(workers)]
    print(f"\n## Test suite\n\n`{' '.join(command[1:])}`\n", flush=True)
    started = time.perf_counter()
    with open(log, "w") as sink:
        try:
            code = subprocess.run(command, cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            code = f"cut off after {timeout} s"
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    outcomes = dict.fromkeys(("PASSED", "FAILED", "SKIPPED", "ERROR"), 0)
    failures = set()
    for line in lines:  # "path::test PASSED [ 7%]", or with xdist "[gw3] [ 7%] PASSED path::test"
        words = line.split()
        test = next((word for word in words if "::" in word), None)
        if test is None or line.startswith(("FAILED", "ERROR")):  # the -rfE summary repeats them
            continue
        for word in outcomes.keys() & set(words):
            outcomes[word] += 1
            if word in ("FAILED", "ERROR"):
                failures.add(test)
    failures = sorted(failures)
    summary = lines[-1] if lines else "(no output)"
    print(f"exit {code} after {time.perf_counter() - started:.0f} s: {summary}\n(counted from the log: {outcomes})")
    for line in failures[:80]:
        print(f"    {line[:300]}")
    return {"exit": code, "summary": summary, "outcomes": outcomes, "failures": failures}


# -- 2. fixtures -----------------------------------------------------------------------------------------
def pnnx_fixtures(backend: str = "cupy") -> dict:
    print(f"\n## PNNX fixtures on {backend}\n")
    rows, bad = [], []
    for folder in sorted(MODELS.iterdir()):
        param = folder / "model.pnnx.param"
        if not param.exists():
            continue
        ref = np.load(folder / "ref.npz")
        batches = sorted({key.split("_")[0] for key in ref.files})
        worst = {"vs_numpy": 0.0, "vs_torch": 0.0}
        try:
            for fuse in (True, False):
                cpu = kuiper.load(param, backend="numpy", fuse=fuse)
                gpu = kuiper.load(param, backend=backend, fuse=fuse)
                for batch in batches:
                    count = sum(key.startswith(f"{batch}_input") for key in ref.files)
                    inputs = [ref[f"{batch}_input{i}"] for i in range(count)]
                    want_cpu = _as_tuple(cpu(*inputs, to_numpy=True))
                    got = _as_tuple(gpu(*inputs, to_numpy=True))
                    worst["vs_numpy"] = _worst([worst["vs_numpy"]] + [_relative_error(g, w) for g, w in zip(got, want_cpu)])
                    worst["vs_torch"] = _worst([worst["vs_torch"]] + [
                        _relative_error(g, ref[f"{batch}_output{j}"]) for j, g in enumerate(got)])
        except Exception as exc:  # the table is the point: report and go on
            bad.append(folder.name)
            print(f"- {folder.name}: ERROR {type(exc).__name__}: {str(exc)[:300]}")
            continue
        rows.append((folder.name, worst))
        if not (worst["vs_numpy"] <= TOLERANCE and worst["vs_torch"] <= TOLERANCE):
            bad.append(folder.name)
            print(f"- {folder.name}: vs numpy {worst['vs_numpy']:.2e}, vs PyTorch {worst['vs_torch']:.2e}  FAIL")
    largest = _worst([0.0] + [w["vs_torch"] for _, w in rows])
    print(f"\n{len(rows) + len(bad) - len(set(bad) & {n for n, _ in rows})} fixtures, fused and unfused, every "
          f"batch: {len(bad)} failed; largest error vs PyTorch {largest:.1e} (relative to max(1, |ref|))")
    return {"fixtures": len(rows), "failed": bad, "largest_vs_torch": largest}


def hlo_fixtures(backend: str = "cupy") -> dict:
    print(f"\n## HLO programs on {backend}\n")
    count, bad, largest = 0, [], 0.0
    for data_path in sorted(HLO.glob("*.npz")):
        name = data_path.name[: -len(".npz")]
        data = np.load(data_path)
        inputs = [data[f"input{i}"] for i in range(sum(k.startswith("input") for k in data.files))]
        expected = [data[f"output{i}"] for i in range(sum(k.startswith("output") for k in data.files))]
        for suffix in (".hlo.txt", ".opt.hlo.txt"):
            for fuse in (True, False):
                count += 1
                label = f"{name}{suffix}{'' if fuse else ' unfused'}"
                try:
                    model = kuiper.load(HLO / f"{name}{suffix}", backend=backend, fuse=fuse)
                    got = _as_tuple(model(*inputs, to_numpy=True))
                    error = _worst([_relative_error(g, w) for g, w in zip(got, expected)])
                except Exception as exc:
                    bad.append(label)
                    print(f"- {label}: ERROR {type(exc).__name__}: {str(exc)[:300]}")
                    continue
                largest = _worst([largest, error])
                if not error <= TOLERANCE:
                    bad.append(label)
                    print(f"- {label}: {error:.2e} vs JAX  FAIL")
    print(f"\n{count} runs (programs x both texts x fused/unfused): {len(bad)} failed; largest error vs JAX "
          f"{largest:.1e}")
    return {"runs": count, "failed": bad, "largest_vs_jax": largest}


# -- timing ------------------------------------------------------------------------------------------------
def _event_median_ms(call, make_events, sync, runs: int, warmup: int = 3) -> tuple[float, float]:
    """(median GPU ms between events around ``call``, median host ms the call took to return)."""
    for _ in range(warmup):
        call()
    sync()
    gpu, host = [], []
    for _ in range(runs):
        start, end = make_events()
        start.record()
        began = time.perf_counter()
        call()
        host.append((time.perf_counter() - began) * 1e3)
        end.record()
        end.synchronize()
        gpu.append(start.elapsed_time(end) if hasattr(start, "elapsed_time") else _cupy_elapsed(start, end))
    return statistics.median(gpu), statistics.median(host)


def _cupy_elapsed(start, end) -> float:
    import cupy

    return cupy.cuda.get_elapsed_time(start, end)


def _cupy_timer(runs):
    import cupy

    def events():
        return cupy.cuda.Event(), cupy.cuda.Event()

    def sync():
        cupy.cuda.get_current_stream().synchronize()

    return lambda call: _event_median_ms(call, events, sync, runs)


def _torch_timer(torch, runs):
    def events():
        return torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    return lambda call: _event_median_ms(call, events, torch.cuda.synchronize, runs)


def _kernel_events(torch, call) -> list:
    """The CUDA kernels (name, GPU microseconds) the profiler saw while ``call`` ran."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as recorded:
        call()
        torch.cuda.synchronize()
    kernels = []
    for event in recorded.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            kernels.append((event.name, event.time_range.elapsed_us()))
    return kernels


# -- 3. the fused chain ----------------------------------------------------------------------------------
def fused_chain(runs: int) -> dict:
    import cupy

    from kuiper.backends import get_backend
    from kuiper.ir import simplify
    from kuiper.pnnx_expr import parse
    from kuiper.pnnx_expr.lower import lower

    # Five nodes beside the inputs: sigmoid, tanh, add, exp(neg) as one, sub, mul.
    text = "mul(add(sigmoid(@0),tanh(@1)),sub(exp(neg(@0)),@1))"
    fused = get_backend("cupy").compile_elementwise(simplify(lower(parse(text), ["float32", "float32"])))
    rng = cupy.random.default_rng(0)
    x = rng.standard_normal(CHAIN_SHAPE, dtype=cupy.float32)
    y = rng.standard_normal(CHAIN_SHAPE, dtype=cupy.float32)

    def op_by_op():
        return (1 / (1 + cupy.exp(-x)) + cupy.tanh(y)) * (cupy.exp(-x) - y)

    error = float(cupy.abs(fused(x, y) - op_by_op()).max())
    timer = _cupy_timer(runs)
    fused_ms, _ = timer(lambda: fused(x, y))
    ops_ms, _ = timer(op_by_op)
    result = {"fused_ms": fused_ms, "op_by_op_ms": ops_ms, "speedup": ops_ms / fused_ms, "max_abs_diff": error}
    torch = _torch_cuda()
    if torch is not None:
        result["fused_launches"] = len(_kernel_events(torch, lambda: fused(x, y)))
        result["op_by_op_launches"] = len(_kernel_events(torch, op_by_op))
    print(f"\n## Fused elementwise chain, {'x'.join(map(str, CHAIN_SHAPE))} float32\n\n"
          f"`{text}`: fused {fused_ms:.3f} ms ({result.get('fused_launches', '?')} kernel launch), op by op in CuPy "
          f"{ops_ms:.3f} ms ({result.get('op_by_op_launches', '?')} launches): {result['speedup']:.2f}x; "
          f"max abs difference {error:.1e}")
    return result


# -- 4. full-size models against PyTorch ------------------------------------------------------------------
def random_weights(param: Path, folder: Path, seed: int = 0) -> Path:
    """Copy ``param`` into ``folder`` with a .pnnx.bin of seeded random weights of the declared shapes:
    matrices and kernels scaled by 1/sqrt(fan-in) (activations neither vanish nor blow up), norm
    scales near one, biases and constants small."""
    parsed = parse_param(param.read_text(), str(param))
    rng = np.random.default_rng(seed)
    target = folder / param.name
    shutil.copyfile(param, target)
    with zipfile.ZipFile(folder / param.name.replace(".param", ".bin"), "w", zipfile.ZIP_STORED) as archive:
        for op, attrs in parsed.weights.items():
            for attr, decl in attrs.items():
                dtype = np.dtype(_PNNX_DTYPES[decl.dtype])
                shape = tuple(decl.shape)
                if dtype.kind != "f":
                    values = np.zeros(shape, dtype)
                elif len(shape) > 1 and attr != "data":
                    values = rng.standard_normal(shape) / math.sqrt(max(1, math.prod(shape[1:])))
                elif attr == "weight":
                    values = 1 + 0.1 * rng.standard_normal(shape)
                else:
                    values = 0.1 * rng.standard_normal(shape)
                archive.writestr(f"{op}.{attr}", np.asarray(values, dtype).tobytes())
    return target


@functools.cache
def _model_param(full: Path, name: str) -> Path | None:
    """The .pnnx.param of a full-size model with weights beside it (random ones written once per
    run where its .pnnx.bin is absent), or None where ``full`` lacks the model."""
    param = full / name / "model.pnnx.param"
    if not param.exists():
        return None
    if param.with_name("model.pnnx.bin").exists():
        return param
    return random_weights(param, Path(tempfile.mkdtemp(prefix=f"kuiper-gpu-{name}-")))


def _torch_model(name: str):
    """The same architecture in PyTorch, on the GPU (tools/fixture_models; needs torch)."""
    from fixture_models import all_models
    from fixturelib import build_seeded

    return build_seeded(all_models()[name]).cuda().eval()


def speed(full: Path, runs: int) -> list:
    import cupy

    torch = _torch_cuda()
    rows = []
    print("\n## Full-size models: kuiper cupy vs PyTorch CUDA eager (float32, median ms from CUDA events)\n")
    print("| model | batch | kuiper ms | PyTorch ms | ratio | kuiper host ms/call | kernels kuiper/PyTorch "
          "| cupy vs numpy |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, batches, size in SPEED_MODELS:
        param = _model_param(full, name)
        if param is None:
            print(f"| {name} | - | (not in {full}) | | | | | |")
            continue
        gpu = kuiper.load(param, backend="cupy")
        x1 = np.random.default_rng(0).standard_normal((1, 3, size, size), dtype=np.float32)
        check = _relative_error(gpu(x1, to_numpy=True), kuiper.load(param, backend="numpy")(x1, to_numpy=True))
        reference = _torch_model(name) if torch is not None else None
        for batch in batches:
            x = cupy.asarray(np.random.default_rng(batch).standard_normal((batch, 3, size, size), dtype=np.float32))
            ours, host = _cupy_timer(runs)(lambda: gpu(x))
            row = {"model": name, "batch": batch, "kuiper_ms": ours, "kuiper_host_ms": host, "cupy_vs_numpy": check}
            if reference is not None:
                xt = torch.as_tensor(x, device="cuda")
                with torch.inference_mode():
                    theirs, _ = _torch_timer(torch, runs)(lambda: reference(xt))
                    row["torch_launches"] = len(_kernel_events(torch, lambda: reference(xt)))
                row["torch_ms"] = theirs
                row["ratio"] = ours / theirs
                row["kuiper_launches"] = len(_kernel_events(torch, lambda: gpu(x)))
            rows.append(row)
            print(f"| {name} | {batch} | {ours:.3f} | {row.get('torch_ms', math.nan):.3f} | "
                  f"{row.get('ratio', math.nan):.2f} | {host:.3f} | "
                  f"{row.get('kuiper_launches', '?')}/{row.get('torch_launches', '?')} | {check:.1e} |", flush=True)
        gpu = reference = None  # freed before the next model is loaded
        cupy.get_default_memory_pool().free_all_blocks()
    return rows


# -- 5. where ResNet-18's time goes ----------------------------------------------------------------------
def profile_resnet(full: Path, batch: int = 8) -> dict:
    import cupy

    torch = _torch_cuda()
    param = _model_param(full, "resnet18_full")
    if torch is None or param is None:
        return {}
    model = kuiper.load(param, backend="cupy")
    x = cupy.asarray(np.random.default_rng(0).standard_normal((batch, 3, 224, 224), dtype=np.float32))
    for _ in range(3):
        model(x)
    kernels = _kernel_events(torch, lambda: model(x))
    by_name: dict[str, list] = {}
    for kernel_name, us in kernels:
        entry = by_name.setdefault(kernel_name[:90], [0, 0.0])
        entry[0] += 1
        entry[1] += us
    total = sum(us for _, us in kernels)
    print(f"\n## ResNet-18 batch {batch} on cupy: {len(kernels)} kernels, {total / 1e3:.3f} ms of GPU time\n")
    print("| kernel | launches | GPU ms | share |")
    print("| --- | --- | --- | --- |")
    top = sorted(by_name.items(), key=lambda item: -item[1][1])[:15]
    for kernel_name, (launches, us) in top:
        print(f"| `{kernel_name}` | {launches} | {us / 1e3:.3f} | {us / total:.0%} |")
    return {"kernels": len(kernels), "gpu_ms": total / 1e3,
            "top": [(name, launches, us) for name, (launches, us) in top]}


class _HostTime(kuiper.StepObserver):
    """The host time each step takes to queue its work (no synchronisation: the GPU runs behind)."""

    def __init__(self):
        self.by_type: dict[str, list] = {}

    def before_step(self, node, inputs):
        self.started = time.perf_counter()

    def after_step(self, node, inputs, outputs):
        entry = self.by_type.setdefault(node.type, [0, 0.0])
        entry[0] += 1
        entry[1] += time.perf_counter() - self.started


def host_profile(full: Path, name: str = "resnet18_full", batch: int = 1, runs: int = 20) -> dict:
    """Where the host's time goes at a small batch, op type by op type (median of ``runs`` calls)."""
    import cupy

    param = _model_param(full, name)
    if param is None:
        return {}
    model = kuiper.load(param, backend="cupy")
    x = cupy.asarray(np.random.default_rng(0).standard_normal((batch, 3, 224, 224), dtype=np.float32))
    for _ in range(3):
        model(x)
    observers = []
    for _ in range(runs):
        observers.append(_HostTime())
        model(x, observer=observers[-1])
        cupy.cuda.get_current_stream().synchronize()
    rows = {kind: (observers[0].by_type[kind][0], statistics.median(o.by_type[kind][1] for o in observers) * 1e3)
            for kind in observers[0].by_type}
    total = sum(ms for _, ms in rows.values())
    print(f"\n## Host time per op type, {name} batch {batch} on cupy: {total:.2f} ms a call\n")
    print("| op type | steps | host ms | per step us |")
    print("| --- | --- | --- | --- |")
    for kind, (steps, ms) in sorted(rows.items(), key=lambda item: -item[1][1]):
        print(f"| {kind} | {steps} | {ms:.3f} | {ms * 1e3 / steps:.0f} |")
    return {"model": name, "batch": batch, "host_ms": total, "by_type": rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--full", type=Path, default=TOOLS / "gpu_models",
                        help="folder of the *_full fixtures (only their .pnnx.param is needed; default: %(default)s)")
    parser.add_argument("--runs", type=int, default=30, help="timed runs per row, after 3 warm-up runs")
    parser.add_argument("--workers", type=int, default=min(12, os.cpu_count() or 1),
                        help="pytest-xdist workers for the test suite")
    parser.add_argument("--test-timeout", type=int, default=300, help="seconds the test suite may take")
    parser.add_argument("--no-tests", action="store_true", help="skip the test suite")
    parser.add_argument("--test-log", type=Path, help="where pytest's output goes (default: a temporary folder)")
    parser.add_argument("--only", choices=["fixtures", "chain", "speed", "profile"], action="append",
                        help="run only these sections (repeatable); default: all")
    parser.add_argument("--json", type=Path, help="also write every result here")
    args = parser.parse_args()
    info = {b.name: b for b in kuiper.backends()}["cupy"]
    if not info.available:
        print(f"cupy backend unavailable: {info.reason}")
        return 1
    sections = set(args.only or ["fixtures", "chain", "speed", "profile"])
    results: dict = {"environment": environment()}

    def save():
        if args.json:
            args.json.write_text(json.dumps(results, indent=1, default=str))

    steps = [("fixtures", "pnnx", pnnx_fixtures), ("fixtures", "hlo", hlo_fixtures),
             ("chain", "chain", lambda: fused_chain(args.runs)), ("speed", "speed", lambda: speed(args.full, args.runs)),
             ("profile", "profile", lambda: profile_resnet(args.full)),
             ("profile", "profile_b1", lambda: profile_resnet(args.full, batch=1)),
             ("profile", "host_resnet18", lambda: host_profile(args.full)),
             ("profile", "host_mobilenet_v2", lambda: host_profile(args.full, "mobilenet_v2_full"))]
    for section, key, step in steps:
        if section not in sections:
            continue
        try:
            results[key] = step()
        except Exception as exc:  # one broken section must not hide the others
            results[key] = {"error": f"{type(exc).__name__}: {exc}"}
            print(f"\n{key}: ERROR {type(exc).__name__}: {exc}", flush=True)
        save()
    if not args.no_tests:  # last: the timings above ran on an otherwise idle machine
        log = args.test_log or Path(tempfile.mkdtemp(prefix="kuiper-gpu-")) / "pytest.log"
        results["tests"] = test_suite(args.workers, args.test_timeout, log)
        save()
    failed = (results.get("tests", {}).get("exit", 0) not in (0, None)
              or results.get("pnnx", {}).get("failed") or results.get("hlo", {}).get("failed"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
