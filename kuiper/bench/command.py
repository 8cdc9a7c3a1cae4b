"""The ``kuiper bench`` subcommand: its options, and the steps from a model path to the printed report."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import kuiper

from ..errors import InputError, UsageError
from .agreement import agrees
from .engines import kuiper_engine, parse_compare
from .fresh_process import measure_fresh_processes
from .inputs import peer_file, random_inputs, resolve_param
from .machine import limit_numpy_threads, machine_note
from .op_profile import format_profile, profile_steps
from .peers import PeerUnavailable, load_peer_first, onnxruntime_engine, torch_engine
from .report import format_report
from .run import run_benchmark

# The pause before each run when peers are compared.  After a run, libgomp's idle threads (kuiper's
# oneDNN and PyTorch share them) spin for up to its GOMP_SPINCOUNT before sleeping, on the cores the
# next engine needs; 10 ms gave ONNX Runtime its speed alone (17-18 ms on ResNet-18) where, with
# no pause, it took 21-23 ms after PyTorch (docs/performance.md, "Engines side by side").
PEER_PAUSE_MS = 10.0


def cmd_bench(args) -> int:
    param = resolve_param(args.model)
    if args.batch < 1 or args.runs < 1 or args.warmup < 0:
        raise UsageError("--batch and --runs must be at least 1, --warmup at least 0")
    if args.threads is not None and args.threads < 1:
        raise UsageError("--threads must be at least 1")
    if args.pause is not None and args.pause < 0:
        raise UsageError("--pause must be at least 0")
    compare = parse_compare(args.compare)
    _check_peer_files(args)
    # kuiper's own cap travels with its model (kuiper.load(threads=N)); this one is for the
    # rest of numpy in the process and names the pools in the report.
    handle, thread_note = limit_numpy_threads(args.threads)
    try:
        return _bench(args, param, compare, thread_note)
    finally:
        if handle is not None:  # callers in the same process (tests) get their thread pools back
            handle.restore_original_limits()


def _check_peer_files(args) -> None:
    """A peer file the user named must exist: a typo is an error, not a peer quietly left out.

    A peer file looked for beside the model, when none is named, may be absent: that peer
    is reported as not compared.
    """
    for option, given in (("--torchscript", args.torchscript), ("--onnx", args.onnx)):
        if given is not None and not Path(given).is_file():
            raise InputError(f"{option} {given}: file not found")


def _load(args, param: Path):
    """The kuiper model as the options ask, its threads capped per model (``kuiper.load(threads=N)``)."""
    return kuiper.load(param, bin_path=args.bin, backend=args.backend, fuse=not args.no_fuse, threads=args.threads,
                       providers=not args.no_providers)


def _bench(args, param: Path, compare: list[str], thread_note: str) -> int:
    notes = [machine_note(), thread_note]
    if "torch" in compare and load_peer_first("torch"):
        # PyTorch and kuiper's oneDNN both need an OpenMP runtime named libgomp.so.1, and a process
        # holds one: the first to load it sets how its idle threads wait.  PyTorch goes first, so
        # that it runs as it does in a process of its own; oneDNN then runs on PyTorch's runtime.
        notes.append("PyTorch loaded first: kuiper's oneDNN convolutions share its OpenMP runtime and its "
                     "wait policy (docs/performance.md)")
    # The kuiper model declares the input shapes every engine gets.  This first load also
    # warms the process (imports, plugin discovery), so the engine's load time below is warm.
    probe = _load(args, param)
    inputs = random_inputs(probe.inputs, args.batch, seed=args.seed)
    del probe

    engines = [kuiper_engine(lambda: _load(args, param), inputs, fuse=not args.no_fuse, providers=not args.no_providers)]
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

    pause_ms = args.pause if args.pause is not None else (PEER_PAUSE_MS if len(engines) > 1 else 0.0)
    if pause_ms > 0:
        notes.append(f"{pause_ms:g} ms pause before each run (not timed), so that no engine runs beside the "
                     "previous one's spinning threads")
    progress = sys.stderr if sys.stderr.isatty() else None
    report = run_benchmark(engines, args.batch, args.runs, args.warmup, model=str(param),
                           notes=notes, unavailable=unavailable, progress=progress,
                           pause=pause_ms / 1e3)
    print(format_report(report))
    if args.profile:
        model = _load(args, param)
        model(*inputs)  # the first call compiles expressions and specializes the steps
        model(*inputs)  # the second records the memory plan the profile reports
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
    p.add_argument("model", help="the model file (.pnnx.param, .onnx, .hlo.txt), or a folder holding model.pnnx.param; "
                   "peers are found beside it (model.pt, model.onnx)")
    p.add_argument("--bin", help="the .pnnx.bin file, when it is not beside the param file")
    p.add_argument("--backend", help="kuiper backend (see `kuiper backends`)")
    p.add_argument("--no-fuse", action="store_true", help="keep kuiper's elementwise ops separate")
    p.add_argument("--no-providers", action="store_true",
                   help="run every kuiper op on its own: no execution provider compiles runs of them")
    p.add_argument("--batch", type=int, default=1, help="batch size (default 1)")
    p.add_argument("--threads", type=int, help="threads for every engine (default: each library's own)")
    p.add_argument("--compare", default="torch,onnxruntime",
                   help="peers to time beside kuiper: torch, onnxruntime, or none (default: torch,onnxruntime)")
    p.add_argument("--torchscript", help="TorchScript file for the torch peer (default: model.pt beside MODEL)")
    p.add_argument("--onnx", help="ONNX file for the onnxruntime peer (default: model.onnx beside MODEL)")
    p.add_argument("--runs", type=int, default=20, help="timed rounds (default 20)")
    p.add_argument("--warmup", type=int, default=3, help="untimed rounds first (default 3)")
    p.add_argument("--pause", type=float, metavar="MS",
                   help="sleep MS milliseconds before each run (not timed) so the previous engine's spinning "
                        f"worker threads go idle (default {PEER_PAUSE_MS:g} when peers are compared, else 0)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random input (default 0)")
    p.add_argument("--profile", action="store_true",
                   help="also time kuiper op by op and list the op types and single ops that take longest")
    p.add_argument("--memory", action="store_true",
                   help="also start a fresh process per engine and report its peak RSS over five calls (and after the first), load time, first-run time and start-up (launch to the end of the first run, wall and CPU); kuiper gets a second row with its kernel plugin off (KUIPER_NUMBA=0: no numba, no oneDNN ops)")
    p.set_defaults(func=cmd_bench)
    return p
