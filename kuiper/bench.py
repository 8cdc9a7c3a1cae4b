"""``kuiper bench``: time a model in kuiper and, when installed, in PyTorch and ONNX Runtime.

All engines run in ONE process on the SAME input, interleaved round-robin (one
run of each per round) after a warm-up, so that slow drifts of the machine
(frequency, other load) hit every engine alike.  Peers are optional: PyTorch
runs the TorchScript ``model.pt`` that pnnx writes beside ``model.pnnx.param``,
ONNX Runtime a ``model.onnx`` beside it (or ``--onnx``).  A peer that is not
installed, has no file or fails to run is reported in one line and skipped.

Threads: ``--threads T`` sets torch.set_num_threads, ONNX Runtime's
intra_op_num_threads and, through threadpoolctl when it is installed, the
BLAS/OpenMP pools numpy uses.  Without threadpoolctl numpy's BLAS pool cannot
be resized once numpy is imported: start the process with
``OMP_NUM_THREADS=T OPENBLAS_NUM_THREADS=T`` instead (the report says so).

``--memory`` also starts one fresh process per engine that loads the model and
runs it once, and reports its peak resident memory (VmHWM).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .errors import InputError, UsageError
from .limits import check_size

PEERS = ("torch", "onnxruntime")
PROGRESS_AFTER_S = 2.0  # runs shorter than this print no progress line
THREAD_ENV_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


class PeerUnavailable(Exception):
    """A peer cannot take part; the message says why, for a one-line report."""


@dataclass
class Engine:
    """One thing to time: ``call()`` runs the model once on the prepared input and waits for it."""

    name: str  # kuiper / torch / onnxruntime
    label: str  # what the table shows, e.g. "kuiper 0.1.0 (numpy)"
    call: Callable[[], Any]
    to_numpy: Callable[[Any], list[np.ndarray]]
    load_ms: float = float("nan")


@dataclass
class Stats:
    median_ms: float
    p10_ms: float
    p90_ms: float
    runs: int


@dataclass
class Report:
    """What ``run_benchmark`` found; ``format_report`` turns it into text."""

    model: str
    batch: int
    runs: int
    warmup: int
    notes: list[str] = field(default_factory=list)
    engines: list[Engine] = field(default_factory=list)
    stats: dict[str, Stats] = field(default_factory=dict)
    max_abs_diff: dict[str, float] = field(default_factory=dict)
    output_scale: float = 0.0
    unavailable: dict[str, str] = field(default_factory=dict)


# -- files and inputs -------------------------------------------------------------------
def resolve_param(model: str | os.PathLike) -> Path:
    """MODEL may be the .pnnx.param file or a folder holding ``model.pnnx.param``."""
    path = Path(model)
    if path.is_dir():
        path = path / "model.pnnx.param"
    if not path.exists():
        raise InputError(f"{path}: model file not found")
    return path


def peer_file(param: Path, suffix: str) -> Path:
    """``x/model.pnnx.param`` -> ``x/model{suffix}``: where pnnx and tools/make_fixtures.py put peers."""
    name = param.name
    stem = name[: -len(".pnnx.param")] if name.endswith(".pnnx.param") else param.stem
    return param.with_name(stem + suffix)


def random_inputs(specs, batch: int, seed: int = 0) -> list[np.ndarray]:
    """Seeded standard-normal inputs of the declared shapes, with dim 0 replaced by ``batch``."""
    rng = np.random.default_rng(seed)
    arrays = []
    for spec in specs:
        if spec.shape is None or any(d is None for d in spec.shape[1:]):
            raise InputError(f"input '{spec.name}' has unknown dims {spec}; pass real inputs instead of random ones")
        shape = (batch,) + tuple(spec.shape[1:]) if spec.shape else ()
        check_size(shape, np.dtype(spec.dtype or "float32").itemsize, f"random input '{spec.name}' at batch {batch}")
        arrays.append(rng.standard_normal(shape).astype(spec.dtype or "float32"))
    return arrays


def parse_compare(text: str) -> list[str]:
    """``torch,onnxruntime`` -> ["torch", "onnxruntime"]; ``none`` or empty -> []."""
    names = [n.strip().lower() for n in text.split(",") if n.strip()]
    if names in ([], ["none"]):
        return []
    aliases = {"pytorch": "torch", "ort": "onnxruntime"}
    names = [aliases.get(n, n) for n in names]
    unknown = [n for n in names if n not in PEERS]
    if unknown:
        raise UsageError(f"--compare: unknown peer(s) {unknown}; choose from {', '.join(PEERS)} or 'none'")
    return list(dict.fromkeys(names))


# -- threads ---------------------------------------------------------------------------------
def limit_numpy_threads(threads: int | None) -> tuple[Any, str]:
    """Limit numpy's BLAS/OpenMP pools; returns (a handle to keep alive, a note for the report)."""
    try:
        from threadpoolctl import threadpool_info, threadpool_limits
    except ImportError:
        if threads is None:
            return None, "numpy BLAS threads: library default (threadpoolctl not installed to report them)"
        for var in THREAD_ENV_VARS:  # reaches only libraries loaded from now on
            os.environ[var] = str(threads)
        return None, (f"numpy BLAS threads NOT limited to {threads}: threadpoolctl is not installed and numpy is "
                      f"already imported (pip install threadpoolctl, or start with "
                      f"OMP_NUM_THREADS={threads} OPENBLAS_NUM_THREADS={threads})")
    handle = None if threads is None else threadpool_limits(limits=threads)
    pools = [f"{p.get('internal_api', '?')} {p.get('num_threads', '?')}" for p in threadpool_info()]
    return handle, "numpy thread pools: " + (", ".join(pools) or "none found")


# -- engines --------------------------------------------------------------------------------------
def kuiper_engine(param: Path, bin_path, backend: str | None, fuse: bool, inputs: list[np.ndarray]) -> Engine:
    import kuiper

    kuiper.backends()  # plugin discovery happens once per process; keep it out of the load time
    start = time.perf_counter()
    model = kuiper.load(param, bin_path=bin_path, backend=backend, fuse=fuse)
    load_ms = (time.perf_counter() - start) * 1e3
    backend_obj = model.backend
    device_inputs = [backend_obj.asarray(x) for x in inputs]  # a GPU backend times compute, not uploads

    def call():
        outputs = model(*device_inputs)
        backend_obj.synchronize()
        return outputs

    def to_numpy(outputs):
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        return [kuiper.to_numpy(o) for o in outputs]

    label = f"kuiper {kuiper.__version__} ({backend_obj.name}{'' if fuse else ', unfused'})"
    return Engine("kuiper", label, call, to_numpy, load_ms)


def _flatten_torch(value) -> list:
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _flatten_torch(item)]
    return [value]


def torch_engine(path: Path, inputs: list[np.ndarray], threads: int | None) -> Engine:
    try:
        import torch
    except ImportError as exc:
        raise PeerUnavailable(f"not installed ({exc})") from None
    if not path.exists():
        raise PeerUnavailable(f"no TorchScript file {path} (pnnx writes it; or pass --torchscript)")
    if threads is not None:
        torch.set_num_threads(threads)
    start = time.perf_counter()
    try:
        module = torch.jit.load(str(path), map_location="cpu").eval()
    except Exception as exc:  # noqa: BLE001 - any load failure just means "no peer"
        raise PeerUnavailable(f"cannot load {path}: {type(exc).__name__}: {_first_line(exc)}") from None
    load_ms = (time.perf_counter() - start) * 1e3
    tensors = [torch.from_numpy(x) for x in inputs]

    def call():
        with torch.inference_mode():
            return module(*tensors)

    def to_numpy(outputs):
        return [t.detach().cpu().numpy() for t in _flatten_torch(outputs)]

    label = f"torch {torch.__version__} (TorchScript, {torch.get_num_threads()} threads)"
    return Engine("torch", label, call, to_numpy, load_ms)


def onnxruntime_engine(path: Path, inputs: list[np.ndarray], threads: int | None) -> Engine:
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise PeerUnavailable(f"not installed ({exc})") from None
    if not path.exists():
        raise PeerUnavailable(f"no ONNX file {path} (tools/make_fixtures.py --keep-peers writes it; or pass --onnx)")
    options = ort.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    start = time.perf_counter()
    try:
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001
        raise PeerUnavailable(f"cannot load {path}: {type(exc).__name__}: {_first_line(exc)}") from None
    load_ms = (time.perf_counter() - start) * 1e3
    names = [i.name for i in session.get_inputs()]
    if len(names) != len(inputs):
        raise PeerUnavailable(f"{path} has {len(names)} input(s), the kuiper model {len(inputs)}")
    feeds = dict(zip(names, inputs))

    def call():
        return session.run(None, feeds)

    threads_text = f"{threads} threads" if threads is not None else "default threads"
    return Engine("onnxruntime", f"onnxruntime {ort.__version__} (CPU, {threads_text})", call, list, load_ms)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:200]


# -- timing and statistics ----------------------------------------------------------------------------
def summarise(seconds: Sequence[float]) -> Stats:
    ms = np.asarray(seconds, dtype=np.float64) * 1e3
    return Stats(float(np.median(ms)), float(np.percentile(ms, 10)), float(np.percentile(ms, 90)), len(ms))


def interleaved_timings(engines: Sequence[Engine], runs: int, warmup: int, progress=None,
                        pause: float = 0.0, clock=time.perf_counter, sleep=time.sleep) -> dict[str, list[float]]:
    """Round-robin: each round runs every engine once; returns seconds per engine for the timed rounds.

    ``pause`` seconds of sleep before each run let the previous engine's worker threads
    stop spinning (OpenBLAS, OpenMP and ONNX Runtime pools busy-wait after a call), so
    they do not steal cores from the next engine.  ``progress`` (a text stream or
    None) gets one line, rewritten each round, once the run has taken PROGRESS_AFTER_S.
    """
    samples: dict[str, list[float]] = {e.name: [] for e in engines}
    began = clock()
    total = warmup + runs
    shown = False
    for round_index in range(total):
        for engine in engines:
            if pause > 0:
                sleep(pause)
            start = clock()
            engine.call()
            elapsed = clock() - start
            if round_index >= warmup:
                samples[engine.name].append(elapsed)
        if progress is not None and (shown or clock() - began > PROGRESS_AFTER_S):
            phase = "warm-up" if round_index < warmup else "timed"
            latest = ", ".join(f"{n} {s[-1] * 1e3:.1f} ms" for n, s in samples.items() if s)
            progress.write(f"\rkuiper bench: round {round_index + 1}/{total} ({phase}) {latest}   ")
            progress.flush()
            shown = True
    if shown:
        progress.write("\n")
        progress.flush()
    return samples


def max_abs_difference(reference: list[np.ndarray], other: list[np.ndarray]) -> float:
    """Largest |reference - other| over all outputs; inf when counts or shapes do not match."""
    if len(reference) != len(other):
        return float("inf")
    worst = 0.0
    for ref, got in zip(reference, other):
        got = np.asarray(got)
        if ref.shape != got.shape:
            return float("inf")
        if ref.size:
            worst = max(worst, float(np.max(np.abs(ref.astype(np.float64) - got.astype(np.float64)))))
    return worst


def agreement_tolerance(scale: float) -> float:
    """float32 engines differ by summation order: allow 1e-3 of the largest output magnitude, at least 1e-4."""
    return max(1e-4, 1e-3 * scale)


def agrees(diff: float, scale: float) -> bool:
    return diff <= agreement_tolerance(scale)


def run_benchmark(engines: list[Engine], batch: int, runs: int, warmup: int, model: str = "",
                  notes: Sequence[str] = (), unavailable: dict[str, str] | None = None, progress=None,
                  pause: float = 0.0) -> Report:
    """Check outputs once (first call of every engine), then time them interleaved."""
    report = Report(model, batch, runs, warmup, list(notes), unavailable=dict(unavailable or {}))
    reference = None
    working = []
    for engine in engines:
        try:
            outputs = engine.to_numpy(engine.call())
        except Exception as exc:  # a failing peer is reported, not fatal
            if engine.name == "kuiper":
                raise
            report.unavailable[engine.name] = f"failed to run at batch {batch}: {type(exc).__name__}: {_first_line(exc)}"
            continue
        if reference is None:  # kuiper comes first
            reference = outputs
            report.output_scale = max((float(np.max(np.abs(o))) for o in outputs if o.size), default=0.0)
        else:
            report.max_abs_diff[engine.name] = max_abs_difference(reference, outputs)
        working.append(engine)
    report.engines = working
    samples = interleaved_timings(working, runs, warmup, progress=progress, pause=pause)
    report.stats = {name: summarise(s) for name, s in samples.items()}
    return report


# -- report -----------------------------------------------------------------------------------------------
def format_report(report: Report) -> str:
    rounds = (f"batch {report.batch}; {report.runs} timed rounds after {report.warmup} warm-up, "
              f"engines interleaved round-robin in one process")
    lines = [f"model: {report.model}", rounds, *report.notes]
    header = ("engine", "load ms", "median ms", "p10 ms", "p90 ms", "images/s", "kuiper/peer", "max|diff|")
    rows = [header]
    kuiper_median = report.stats["kuiper"].median_ms if "kuiper" in report.stats else float("nan")
    for engine in report.engines:
        s = report.stats[engine.name]
        ratio = "-" if engine.name == "kuiper" else f"{kuiper_median / s.median_ms:.2f}x"
        diff = report.max_abs_diff.get(engine.name)
        diff_text = "-" if diff is None else f"{diff:.2e}" + ("" if agrees(diff, report.output_scale) else " DIFFERS")
        rows.append((engine.label, f"{engine.load_ms:.1f}", f"{s.median_ms:.2f}", f"{s.p10_ms:.2f}",
                     f"{s.p90_ms:.2f}", f"{report.batch / s.median_ms * 1e3:.1f}", ratio, diff_text))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        cells = [row[0].ljust(widths[0])] + [cell.rjust(w) for cell, w in zip(row[1:], widths[1:])]
        lines.append("  ".join(cells))
    lines.append("kuiper/peer = kuiper median / peer median (above 1: kuiper is slower); "
                 f"max|diff| = largest |kuiper - peer| over the outputs (output scale {report.output_scale:.3g}, "
                 f"DIFFERS above {agreement_tolerance(report.output_scale):.2g})")
    for name, reason in report.unavailable.items():
        lines.append(f"not compared: {name}: {reason}")
    return "\n".join(lines)


# -- per-op profile ---------------------------------------------------------------------------------------
class _StepTimer:
    """A StepObserver that times each step, synchronising the backend around it."""

    def __init__(self, model):
        self.backend = model.backend
        self.index = {id(step.node): i for i, step in enumerate(model.steps)}
        self.samples: dict[int, list[float]] = {i: [] for i in range(len(model.steps))}
        self.started = 0.0

    def before_step(self, node, inputs):
        self.backend.synchronize()
        self.started = time.perf_counter()

    def after_step(self, node, inputs, outputs):
        self.backend.synchronize()
        self.samples[self.index[id(node)]].append(time.perf_counter() - self.started)


def profile_steps(model, inputs: list, rounds: int) -> dict[int, list[float]]:
    """Seconds per step (index into model.steps), through the model's own executor and a StepObserver.

    Each step is synchronised on its own, so on an asynchronous backend the per-op
    times add up to more than a normal run (which overlaps launches).
    """
    timer = _StepTimer(model)
    for _ in range(rounds):
        model(*inputs, observer=timer)
    return timer.samples


def format_profile(model, samples: dict[int, list[float]], top: int = 12) -> list[str]:
    """Median time per op type (summed over its ops) and the slowest single ops."""
    medians = {i: float(np.median(s)) * 1e3 for i, s in samples.items()}
    total = sum(medians.values()) or float("nan")
    by_type: dict[str, list[float]] = {}
    for index, ms in medians.items():
        by_type.setdefault(model.steps[index].node.type, []).append(ms)
    rounds = len(next(iter(samples.values()), []))
    lines = [f"kuiper per-op profile (median of {rounds} step-by-step runs, sum {total:.2f} ms):", "  by op type:"]
    for op_type, times in sorted(by_type.items(), key=lambda kv: -sum(kv[1])):
        lines.append(f"    {op_type:<28} {sum(times):9.2f} ms {100 * sum(times) / total:5.1f}%  ({len(times)} ops)")
    lines.append(f"  slowest {min(top, len(medians))} ops:")
    for index in sorted(medians, key=lambda i: -medians[i])[:top]:
        node = model.steps[index].node
        shape = ", ".join(str(tuple(d for d in info.shape)) for o in node.inputs[:1]
                          if (info := model.ir.operands.get(o)) is not None and info.shape is not None)
        lines.append(f"    {node.name:<28} {node.type:<22} {medians[index]:9.2f} ms  input {shape or '?'}")
    return lines


# -- fresh-process memory ------------------------------------------------------------------------------------
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


def input_specs(param: Path):
    """The model's declared inputs, from the param text alone (no weights read)."""
    from .formats.pnnx import neutral_ir
    from .formats.pnnx_param import parse_param
    from .graph.model import TensorSpec

    parsed = parse_param(param.read_text(), str(param))
    ir = neutral_ir(parsed.ops, parsed.operands, str(param))
    specs = []
    for operand in ir.inputs:
        info = ir.operands.get(operand)
        specs.append(TensorSpec(operand, info.shape if info else None, info.dtype if info else None))
    return specs


def child_main(argv: list[str]) -> int:
    """``python -m kuiper.bench --child ENGINE PARAM PEER_FILE BATCH THREADS BACKEND``: load, run once, print JSON.

    Thread limits come from the environment the parent sets (OMP_NUM_THREADS ...).
    """
    engine_name, param, peer, batch, threads, backend = argv
    param, batch = Path(param), int(batch)
    threads = None if threads == "-" else int(threads)
    if engine_name == "kuiper":
        import kuiper
    elif engine_name == "torch":
        import torch  # noqa: F401
    else:
        import onnxruntime  # noqa: F401
    after_import = _peak_rss_mib()
    inputs = random_inputs(input_specs(param), batch)
    if engine_name == "kuiper":
        start = time.perf_counter()
        model = kuiper.load(param, backend=None if backend == "-" else backend)
        load_ms = (time.perf_counter() - start) * 1e3
        engine = Engine("kuiper", "", lambda: model(*inputs), list, load_ms)
    elif engine_name == "torch":
        engine = torch_engine(Path(peer), inputs, threads)
    else:
        engine = onnxruntime_engine(Path(peer), inputs, threads)
    start = time.perf_counter()
    engine.call()
    first_run_ms = (time.perf_counter() - start) * 1e3
    print(json.dumps({"engine": engine_name, "load_ms": engine.load_ms, "first_run_ms": first_run_ms,
                      "maxrss_after_import_mib": after_import, "maxrss_mib": _peak_rss_mib()}))
    return 0


def measure_fresh_processes(param: Path, peers: dict[str, Path], batch: int, threads: int | None,
                            backend: str | None) -> list[str]:
    """One fresh interpreter per engine: load + one run; its peak RSS, load and first-run time."""
    jobs = [("kuiper", "-")] + [(name, str(path)) for name, path in peers.items()]
    lines = ["fresh process per engine (python + import + load + one run; peak RSS = VmHWM):"]
    env = dict(os.environ)
    if threads is not None:
        env.update({var: str(threads) for var in THREAD_ENV_VARS})  # before numpy loads: honoured
    # Run from the folder holding THIS kuiper package, so `-m kuiper.bench` finds the same
    # kuiper even when the current directory holds another checkout.
    package_root = Path(__file__).resolve().parents[1]
    for name, peer in jobs:
        command = [sys.executable, "-m", "kuiper.bench", "--child", name, str(param.resolve()),
                   peer if peer == "-" else str(Path(peer).resolve()), str(batch),
                   "-" if threads is None else str(threads), backend or "-"]
        done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=package_root, check=False)
        if done.returncode != 0:
            tail = (done.stderr.strip().splitlines() or ["?"])[-1]
            lines.append(f"  {name:<12} failed: {tail}")
            continue
        data = json.loads(done.stdout.strip().splitlines()[-1])
        lines.append(f"  {name:<12} peak RSS {data['maxrss_mib']:7.1f} MiB (after imports "
                     f"{data['maxrss_after_import_mib']:6.1f} MiB); load {data['load_ms']:7.1f} ms; "
                     f"first run {data['first_run_ms']:7.1f} ms")
    return lines


# -- command -------------------------------------------------------------------------------------------------
def cmd_bench(args) -> int:
    param = resolve_param(args.model)
    if args.batch < 1 or args.runs < 1 or args.warmup < 0:
        raise UsageError("--batch and --runs must be at least 1, --warmup at least 0")
    if args.threads is not None and args.threads < 1:
        raise UsageError("--threads must be at least 1")
    compare = parse_compare(args.compare)
    handle, thread_note = limit_numpy_threads(args.threads)
    from .numba_kernels import set_threads

    set_threads(args.threads)  # the compiled CPU kernels' own pool (numba)
    try:
        return _bench(args, param, compare, thread_note)
    finally:
        set_threads(None)
        if handle is not None:  # callers in the same process (tests) get their thread pools back
            handle.restore_original_limits()


def machine_note() -> str:
    """CPU count and load: other busy processes make every number here noisy."""
    cpus = os.cpu_count() or 0
    try:
        load = os.getloadavg()[0]
    except OSError:
        return f"machine: {cpus} CPUs"
    note = f"machine: {cpus} CPUs, 1-minute load average {load:.2f} before the run"
    if cpus and load > 0.5 * cpus:
        note += " (busy: other processes, or a benchmark just before this one, compete for the CPUs)"
    return note


def _bench(args, param: Path, compare: list[str], thread_note: str) -> int:

    # The kuiper model declares the input shapes every engine gets.  This first load also
    # warms the process (imports, plugin discovery), so the engine's load time below is warm.
    import kuiper

    probe = kuiper.load(param, bin_path=args.bin, backend=args.backend, fuse=not args.no_fuse)
    inputs = random_inputs(probe.inputs, args.batch, seed=args.seed)
    del probe

    engines = [kuiper_engine(param, args.bin, args.backend, not args.no_fuse, inputs)]
    unavailable: dict[str, str] = {}
    peer_paths: dict[str, Path] = {}
    for name in compare:
        try:
            if name == "torch":
                path = Path(args.torchscript) if args.torchscript else peer_file(param, ".pt")
                engines.append(torch_engine(path, inputs, args.threads))
            else:
                path = Path(args.onnx) if args.onnx else peer_file(param, ".onnx")
                engines.append(onnxruntime_engine(path, inputs, args.threads))
            peer_paths[name] = path
        except PeerUnavailable as exc:
            unavailable[name] = str(exc)

    progress = sys.stderr if sys.stderr.isatty() else None
    report = run_benchmark(engines, args.batch, args.runs, args.warmup, model=str(param),
                           notes=[machine_note(), thread_note], unavailable=unavailable, progress=progress,
                           pause=args.pause / 1e3)
    print(format_report(report))
    if args.profile:
        model = kuiper.load(param, bin_path=args.bin, backend=args.backend, fuse=not args.no_fuse)
        model(*inputs)  # first call compiles expressions
        for line in format_profile(model, profile_steps(model, inputs, max(1, min(args.runs, 10)))):
            print(line)
    if args.memory:
        working = {name: path for name, path in peer_paths.items() if name in report.stats}
        for line in measure_fresh_processes(param, working, args.batch, args.threads, args.backend):
            print(line)
    differing = [n for n, d in report.max_abs_diff.items() if not agrees(d, report.output_scale)]
    if differing:
        print(f"kuiper bench: outputs of {', '.join(differing)} differ from kuiper's beyond float32 noise",
              file=sys.stderr)
        return 1
    return 0


def add_bench_command(subparsers) -> argparse.ArgumentParser:
    text = ("time a model in kuiper and, when installed, PyTorch (TorchScript model.pt) and ONNX Runtime "
            "(model.onnx), interleaved on the same input; check their outputs agree")
    p = subparsers.add_parser("bench", help=text, description=text,
                              epilog="Example: kuiper bench build/fixtures-full/resnet18_full --batch 8 --threads 2")
    p.add_argument("model", help="the .pnnx.param file, or a folder holding model.pnnx.param")
    p.add_argument("--bin", help="the .pnnx.bin file, when it is not beside the param file")
    p.add_argument("--backend", help="kuiper backend (see `kuiper backends`)")
    p.add_argument("--no-fuse", action="store_true", help="keep kuiper's elementwise ops separate")
    p.add_argument("--batch", type=int, default=1, help="batch size (default 1)")
    p.add_argument("--threads", type=int, help="threads for every engine (default: each library's own)")
    p.add_argument("--compare", default="torch,onnxruntime",
                   help="peers to time beside kuiper: torch, onnxruntime, or none (default: torch,onnxruntime)")
    p.add_argument("--torchscript", help="TorchScript file for the torch peer (default: model.pt beside MODEL)")
    p.add_argument("--onnx", help="ONNX file for the onnxruntime peer (default: model.onnx beside MODEL)")
    p.add_argument("--runs", type=int, default=20, help="timed rounds (default 20)")
    p.add_argument("--warmup", type=int, default=3, help="untimed rounds first (default 3)")
    p.add_argument("--pause", type=float, default=0.0, metavar="MS",
                   help="sleep MS milliseconds before each run so the previous engine's spinning worker "
                        "threads go idle (default 0; try 200 when engines seem to slow each other down)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random input (default 0)")
    p.add_argument("--profile", action="store_true",
                   help="also time kuiper op by op and list the op types and single ops that take longest")
    p.add_argument("--memory", action="store_true",
                   help="also report peak RSS, load and first-run time of a fresh process per engine")
    p.set_defaults(func=cmd_bench)
    return p


if __name__ == "__main__":  # the --memory child processes
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        sys.exit(child_main(sys.argv[2:]))
    sys.exit("usage: kuiper bench ... (this module runs directly only as a --memory child)")
