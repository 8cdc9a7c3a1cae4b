"""The ``kuiper`` command line: run, inspect and benchmark PNNX models."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import os
import sys
import time

import numpy as np

import kuiper

from . import demo
from .bench import add_bench_command, random_inputs
from .config import choose_backend
from .dask.cli import add_arguments as add_dask_arguments
from .dask.cli import run_files, wants_files
from .errors import BackendUnavailableError, KuiperError, UnsupportedOperatorError, UsageError
from .formats.pnnx_ops import pnnx_spellings
from .frontends import load_ir
from .graph.providers import PARTITION_TYPE
from .hlo.cli import add_hlo_command
from .numba_kernels import kernel_notes
from .plugins import backend_registry, kernel_registry, op_registry
from .te.cli import add_te_command
from .user_files import ARRAY_SUFFIXES, check_output_file, read_feeds, write_arrays


def _load(args):
    options = {"strict": True} if getattr(args, "strict", False) else {}
    threads = getattr(args, "threads", None)
    if threads is not None:
        options["threads"] = threads
    return kuiper.load(args.model, bin_path=getattr(args, "bin", None), backend=args.backend,
                       fuse=not getattr(args, "no_fuse", False), providers=not getattr(args, "no_providers", False),
                       **options)


def _check_run_flags(args) -> None:
    """Before the model loads: contradicting flags are usage errors, an unusable --output is refused."""
    if args.input and args.random:
        raise UsageError("--input and --random both give the inputs; use one")
    if args.batch is not None and not args.random:
        raise UsageError("--batch sets the batch of --random inputs; with --input the files set it")
    if args.output == "-":
        raise UsageError("--output -: arrays are not written to stdout; name a .npy or .npz file")
    if args.output:
        check_output_file(args.output, f"--output {args.output}", (*ARRAY_SUFFIXES, ""))


def _random_feeds(model, batch: int) -> dict:
    return {spec.name: array for spec, array in zip(model.inputs, random_inputs(model.inputs, batch))}


def _summarise(name: str, array: np.ndarray) -> str:
    text = f"{name}: shape {tuple(array.shape)} {array.dtype}"
    if array.size and array.dtype.kind in "fiub":
        text += f"  min {array.min():.6g} max {array.max():.6g} mean {array.astype(np.float64).mean():.6g}"
        if array.ndim == 2 and array.shape[1] > 1:
            text += f"  argmax[:8] {array.argmax(axis=1)[:8].tolist()}"
    return text


def cmd_run(args) -> int:
    if wants_files(args):  # many files over a Dask cluster: kuiper/dask/cli.py
        return run_files(args)
    _check_run_flags(args)
    model = _load(args)
    if args.output and not args.output.lower().endswith(".npz") and len(model.outputs) != 1:
        raise UsageError(f"--output {args.output}: the model has {len(model.outputs)} outputs; use a .npz file")
    if not (args.input or args.random) and model.inputs:
        names = [spec.name for spec in model.inputs]
        raise UsageError(f"the model takes {len(names)} input(s) {names}: give them with --input FILE.npy "
                         "(or NAME=FILE.npy, or one .npz keyed by input name), or use --random")
    if args.random:
        feeds = _random_feeds(model, args.batch or 1)
    else:
        feeds = read_feeds(args.input, [spec.name for spec in model.inputs])
    start = time.perf_counter()
    outputs = model.run(feeds, to_numpy=True)
    elapsed = (time.perf_counter() - start) * 1e3
    for name, array in outputs.items():
        print(_summarise(name, array))
    print(f"ran on backend '{model.backend.name}' in {elapsed:.1f} ms")
    if args.output:
        write_arrays(args.output, outputs, f"--output {args.output}")
        print(f"wrote {args.output}")
    return 0


def _shape_text(ir, names) -> str:
    out = []
    for operand in names:
        info = ir.operands.get(operand)
        out.append("?" if info is None or info.shape is None else "x".join("?" if d is None else str(d) for d in info.shape))
    return ",".join(out) or "-"


def _print_op_table(ir, nodes, note=None) -> None:
    """One row per op: name, type, input and output shapes, weight count (and a note column if given).

    Padded by hand: plain columns that grep and cut can read need no table library
    (tabulate, rich) as a dependency of every install.
    """
    header = ("name", "type", "inputs", "outputs", "params") + (("",) if note else ())
    rows = [header]
    for node in nodes:
        count = sum(int(a.size) for a in node.attrs.values())
        row = (node.name, node.type, _shape_text(ir, node.inputs), _shape_text(ir, node.outputs), f"{count:,}" if count else "")
        rows.append(row + ((note(node),) if note else ()))
    widths = [min(40, max(len(r[i]) for r in rows)) for i in range(len(header))]
    for row in rows:
        print("  ".join(cell[:40].ljust(w) for cell, w in zip(row, widths)).rstrip())


def _steps_and_members(model) -> list:
    """Each step's node, and under a provider's partition its members' nodes, their names indented (the
    layers a user looks for are there, run as one call)."""
    nodes = []
    for step in model.steps:
        nodes.append(step.node)
        if step.node.type == PARTITION_TYPE:
            nodes += [dataclasses.replace(unit.node, name=f"  {unit.node.name}") for unit in step.op.members]
    return nodes


def cmd_info(args) -> int:
    try:
        model = _load(args)
    except UnsupportedOperatorError as exc:
        # Still show the user what the file holds, and mark what kuiper cannot run yet.
        options = {"bin_path": args.bin} if getattr(args, "bin", None) else {}
        ir = load_ir(args.model, **options)
        registry = op_registry()
        print(f"model: {ir.source}")
        _print_op_table(ir, ir.ops, note=lambda node: "" if node.type in registry else "UNSUPPORTED")
        print(f"kuiper: error: {exc}", file=sys.stderr)
        return 1
    ir = model.ir
    print(f"model: {model.source}")
    print(f"backend: {model.backend.name}")
    print("inputs:  " + "; ".join(str(s) for s in model.inputs))
    print("outputs: " + "; ".join(str(s) for s in model.outputs))
    print(f"parameters: {model.parameter_count:,}")
    _print_op_table(ir, _steps_and_members(model))
    print(f"{len(model.steps)} op(s) to run")
    if model.fused_groups:
        print(f"fused {len(model.fused_groups)} elementwise chain(s):")
        for group in model.fused_groups:
            print("  " + " + ".join(group))
    partitions = [step.node for step in model.steps if step.node.type == PARTITION_TYPE]
    if partitions:
        print(f"{len(partitions)} run(s) of ops claimed by execution providers, one compiled call each:")
        for node in partitions:
            members = node.params["members"]
            print(f"  {node.params['provider']}: {' + '.join(members)} ({len(members)} ops)")
    if "numpy-arrays" in model.backend.capabilities:  # the compiled CPU kernels' backends
        print("\n".join(kernel_notes(model)))
    return 0


def cmd_backends(args) -> int:
    choice = choose_backend(None)
    registered = backend_registry()
    if choice.name not in registered:
        # Not listed as the default: every model load would fail with it.
        raise BackendUnavailableError(f"unknown backend '{choice.name}' (from {choice.source}); "
                                      f"registered backends: {', '.join(sorted(registered))}")
    print(f"default backend: {choice.name} (from {choice.source})")
    for info in kuiper.backends():
        state = "available" if info.available else f"unavailable: {info.reason}"
        print(f"  {info.name:<8} [{info.plugin}] {state}")
        if info.description:
            print(f"           {info.description}")
    return 0


def cmd_ops(args) -> int:
    registry = op_registry()
    spellings = pnnx_spellings()
    backends = sorted(backend_registry())
    kernels = {backend: kernel_registry(backend) for backend in backends}
    print(f"{len(registry)} op types:")
    print(f"(each served by its plugin on every backend, {', '.join(backends)}, except where a kernel "
          "plugin replaces it: 'on BACKEND' under it)")
    for op_type in sorted(registry):
        registered = registry[op_type]
        print(f"  {op_type:<36} {registered.obj.__qualname__:<24} [{registered.plugin}]")
        if op_type in spellings:
            print(f"      PNNX: {', '.join(spellings[op_type])}")
        for backend in backends:
            kernel = kernels[backend].get(op_type)
            if kernel is not None:
                print(f"      on {backend}: {kernel.obj.__qualname__} [{kernel.plugin}]")
    return 0


def cmd_demo(args) -> int:
    param = demo.MODEL
    data = np.load(demo.DATA)
    images, labels, torch_logits = data["images"], data["labels"], data["torch_logits"]
    start = time.perf_counter()
    model = kuiper.load(param, backend=args.backend)
    load_ms = (time.perf_counter() - start) * 1e3
    model(images[:1])  # warm-up: first-call compilation is not what we time
    start = time.perf_counter()
    logits = kuiper.to_numpy(model(images))
    run_ms = (time.perf_counter() - start) * 1e3
    predictions = logits.argmax(axis=1)
    accuracy = float((predictions == labels).mean())
    agreement = float((predictions == torch_logits.argmax(axis=1)).mean())
    print("kuiper demo: a small CNN trained in PyTorch on scikit-learn's handwritten digits, exported by PNNX")
    print(f"model: {param}  ({model.parameter_count:,} parameters, {len(model.steps)} ops)")
    print(f"backend: {model.backend.name}; load {load_ms:.1f} ms; {len(images)} held-out 8x8 images in {run_ms:.1f} ms")
    print(f"accuracy on held-out digits: {accuracy:.2%} ({int((predictions == labels).sum())}/{len(labels)})")
    print(f"agreement with PyTorch predictions: {agreement:.2%}; "
          f"max |kuiper - PyTorch| logit difference: {float(np.abs(logits - torch_logits).max()):.2e}")
    print(f"first 16 predictions: {predictions[:16].tolist()}")
    print(f"first 16 labels:      {labels[:16].tolist()}")
    return 0


class _Parser(argparse.ArgumentParser):
    """Usage errors as one ``kuiper: error:`` line and exit status 2 (no usage dump)."""

    def error(self, message: str):
        self.exit(2, f"kuiper: error: {message} (see `{self.prog} --help`)\n")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, found {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, found {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="kuiper",
        description="Run models exported by PNNX (.pnnx.param + .pnnx.bin) on NumPy or CuPy.",
        epilog="Backend choice: --backend, else $KUIPER_BACKEND, else kuiper.toml / [tool.kuiper] in "
        "pyproject.toml, else numpy.  Try `kuiper demo` first.",
    )
    parser.add_argument("--version", action="version", version=f"kuiper {kuiper.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def model_command(name, help_text):
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("model", help="the model: a .pnnx.param file (its .pnnx.bin found beside it), an XLA HLO "
                       "text file (.hlo.txt), or a folder holding one")
        p.add_argument("--bin", help="the .pnnx.bin file, when it is not beside the param file")
        p.add_argument("--backend", help="backend name (see `kuiper backends`)")
        p.add_argument("--no-fuse", action="store_true", help="keep elementwise ops separate")
        p.add_argument("--no-providers", action="store_true",
                       help="run every op on its own: no execution provider compiles runs of them")
        p.add_argument("--strict", action="store_true", help="refuse params kuiper does not know (default: warn)")
        p.add_argument("--threads", type=_positive_int, metavar="N",
                       help="threads this model's kernels use (default: OMP_NUM_THREADS, else every core)")
        return p

    run = model_command("run", "run a model on inputs from .npy/.npz files and print or save the outputs")
    run.add_argument("--input", "-i", action="append", default=[], metavar="[NAME=]FILE",
                     help="an input: FILE.npy in model input order, NAME=FILE.npy, or a .npz keyed by input name; repeatable")
    run.add_argument("--random", action="store_true", help="feed seeded random inputs of the declared shapes instead")
    run.add_argument("--batch", type=_positive_int, help="batch size for --random (default 1)")
    run.add_argument("--output", "-o", help="save outputs: .npy for one output, .npz for several")
    add_dask_arguments(run)
    run.set_defaults(func=cmd_run)

    info = model_command("info", "print the model's inputs, outputs, op table and parameter count")
    info.set_defaults(func=cmd_info)

    backends = sub.add_parser("backends", help="list backends, which one is the default, and why others are unavailable")
    backends.set_defaults(func=cmd_backends)

    ops = sub.add_parser("ops", help="list every registered op type, its plugin and its PNNX spellings")
    ops.set_defaults(func=cmd_ops)

    demo = sub.add_parser("demo", help="classify bundled handwritten digits with a bundled model and report accuracy")
    demo.add_argument("--backend", help="backend name (default: configured, else numpy)")
    demo.set_defaults(func=cmd_demo)

    add_hlo_command(sub)

    add_te_command(sub)

    add_bench_command(sub)
    return parser


@contextlib.contextmanager
def library_notes_on_stderr():
    """While a command runs, show the library's notes (e.g. that a first run is compiling kernels)
    on stderr: kuiper logs them at INFO on the "kuiper" logger and leaves showing them to the
    application.  Undone afterwards, for callers of ``main`` in their own process."""
    library = logging.getLogger("kuiper")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("kuiper: %(message)s"))
    handler.setLevel(logging.INFO)
    level = library.level
    library.addHandler(handler)
    if library.getEffectiveLevel() > logging.INFO:
        library.setLevel(logging.INFO)
    try:
        yield
    finally:
        library.removeHandler(handler)
        library.setLevel(level)


def _check_shared_options(args) -> None:
    """Options that several subcommands share (run, info, bench, demo, te run): an empty string
    is a usage error, checked once here, so that no subcommand reads ``--backend ''`` as "the
    default" or a model path ``''`` as the current folder."""
    if getattr(args, "model", None) == "":
        raise UsageError("MODEL: expected the path of a model file, found an empty string")
    backend = getattr(args, "backend", None)
    if backend is not None:
        if not backend.strip():
            raise UsageError("--backend: expected a backend name (see `kuiper backends`), found an empty string")
        args.backend = backend.strip()


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        _check_shared_options(args)
        with library_notes_on_stderr():
            return args.func(args)
    except UsageError as exc:
        command = " ".join(filter(None, (args.command, getattr(args, "hlo_command", None), getattr(args, "te_command", None))))
        print(f"kuiper: error: {exc} (see `kuiper {command} --help`)", file=sys.stderr)
        return 2
    except KuiperError as exc:
        print(f"kuiper: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("kuiper: interrupted", file=sys.stderr)
        return 130
    except MemoryError:
        print("kuiper: error: out of memory (see KUIPER_MEMORY_BUDGET in kuiper.limits)", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader went away (`kuiper ops | head`): not an error.  Point stdout at
        # /dev/null so Python's own flush at exit does not complain again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:
        # Bad input should always give a KuiperError; anything else is a kuiper bug.  One
        # line for the user, the traceback when asked for it.
        if os.environ.get("KUIPER_DEBUG"):
            raise
        print(f"kuiper: error: internal error, please report it (rerun with KUIPER_DEBUG=1 for the traceback): "
              f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
