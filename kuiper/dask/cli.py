"""``kuiper run MODEL --inputs 'data/*.npy' --output-dir out/``: many input files over a Dask cluster.

Argument parsing imports nothing from Dask, so ``kuiper`` works without the extra; running
the path does, and says how to install it when missing.
"""

from __future__ import annotations

import glob
import sys

from ..errors import InputError, KuiperError, UsageError
from ..user_files import prepare_output_dir
from .cluster import connect
from .files import run_files_on
from .model_cache import resolve_model


def add_arguments(run_parser) -> None:
    group = run_parser.add_argument_group("many inputs over a Dask cluster (pip install \"kuiper[dask]\")")
    group.add_argument("--inputs", nargs="+", metavar="PATTERN",
                       help="input files (.npy, or .npz keyed by input name), as paths or quoted glob patterns")
    group.add_argument("--output-dir", help="folder for the outputs: one file per input, of the same name")
    where = group.add_mutually_exclusive_group()
    where.add_argument("--workers", type=int, help="start a local cluster of N worker processes (default: one per core)")
    where.add_argument("--scheduler", metavar="ADDR", help="use a running Dask cluster, e.g. tcp://host:8786")
    group.add_argument("--batch-size", type=int, help="run each file in batches of at most B rows")


def wants_files(args) -> bool:
    """True for the many-files path; a usage error for its cluster options given without it."""
    if getattr(args, "inputs", None) or getattr(args, "output_dir", None):
        # --threads too: each worker runs one thread, and --workers sets how many run at once.
        single = [flag for flag, key in (("--input", "input"), ("--random", "random"), ("--output", "output"),
                                         ("--batch", "batch"), ("--threads", "threads")) if getattr(args, key, None)]
        if single:
            raise UsageError(f"{', '.join(single)}: for one run; --inputs ... --output-dir runs many files "
                             "(rows per task: --batch-size); use one or the other")
        return True
    stray = [flag for flag, key in (("--workers", "workers"), ("--scheduler", "scheduler"), ("--batch-size", "batch_size"))
             if getattr(args, key, None) is not None]
    if stray:
        raise UsageError(f"{', '.join(stray)} only apply to --inputs ... --output-dir (many files over Dask)")
    return False


def expand_inputs(patterns: list[str]) -> list[str]:
    paths: list[str] = []
    for pattern in patterns:
        matches = sorted(glob.glob(pattern, recursive=True))
        if not matches:
            raise InputError(f"--inputs {pattern}: no file matches")
        paths += [m for m in matches if m not in paths]
    return paths


def run_files(args) -> int:
    if not (args.inputs and args.output_dir):
        raise UsageError("--inputs and --output-dir go together")
    if args.batch_size is not None and args.batch_size < 1:
        raise UsageError(f"--batch-size must be at least 1, got {args.batch_size}")
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers must be at least 1, got {args.workers}")
    try:
        import dask.array  # noqa: F401
        import distributed  # noqa: F401
    except ImportError as exc:
        raise KuiperError(f'--inputs runs on Dask, which is not installed: pip install "kuiper[dask]" ({exc})') from None
    paths = expand_inputs(args.inputs)
    prepare_output_dir(args.output_dir, "--output-dir")
    options = {"fuse": not args.no_fuse}
    if args.strict:
        options["strict"] = True
    if args.bin:
        options["bin_path"] = args.bin
    # Load here first: a broken model fails before a cluster is started or a task submitted.
    spec, local = resolve_model(args.model, args.backend, options)

    def echo(text):
        print(text, file=sys.stderr)

    with connect(scheduler=args.scheduler, workers=args.workers, echo=echo) as client:
        echo(f"model {spec.path} on backend '{spec.backend}': {len(paths)} input file(s) -> {args.output_dir}")
        bar = ProgressBar(len(paths))
        summary = run_files_on(client, spec, local, paths, args.output_dir, args.batch_size, on_result=bar.update)
        bar.close()
    for item in summary.failures:
        print(f"FAILED {item.name}: {item.error}", file=sys.stderr)
    print(summary.text())
    return 1 if summary.failures else 0


class ProgressBar:
    """A one-line bar on stderr, redrawn in place on a terminal; every 10% a line otherwise (logs, CI).

    Not tqdm: a log should get a few whole lines rather than carriage-return redraws, and the
    bar counts failures as they come; both need configuring in tqdm, which would be one more
    dependency for these twenty lines.
    """

    WIDTH = 30

    def __init__(self, total: int, stream=None):
        self.total, self.done, self.failed = total, 0, 0
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty()
        self._last_decile = -1

    def update(self, item) -> None:
        self.done += 1
        self.failed += item.status == "failed"
        fraction = self.done / max(self.total, 1)
        filled = round(fraction * self.WIDTH)
        line = f"[{'#' * filled}{'.' * (self.WIDTH - filled)}] {self.done}/{self.total}"
        line += f" ({self.failed} failed)" if self.failed else ""
        if self.live:
            self.stream.write("\r" + line)
        elif int(fraction * 10) != self._last_decile:
            self._last_decile = int(fraction * 10)
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.live:
            self.stream.write("\n")
            self.stream.flush()
