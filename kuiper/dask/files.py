"""``map_files``: one task per input file, outputs written atomically, finished files skipped.

An input ``NAME.npy`` (one-input models) or ``NAME.npz`` (keyed by input name) gives an
output of the same name in ``output_dir``: ``.npy`` holds a one-output model's result,
``.npz`` every output keyed by output name (a ``.npy`` input of a multi-output model gives
``NAME.npz``).  Each output is written to a hidden temporary name and renamed into place,
so a worker killed mid-write leaves no half-written output, and a re-run skips outputs that
exist (resume).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError, KuiperError
from ..user_files import count_rows, prepare_output_dir, read_arrays, write_arrays
from .cluster import connect
from .model_cache import ModelSpec, cached_model, resolve_model


@dataclass(frozen=True)
class ItemResult:
    """What happened to one input file."""

    name: str
    status: str  # "written", "skipped" (output already there) or "failed"
    samples: int = 0  # rows (dim 0) of the first input
    error: str = ""


@dataclass
class FilesSummary:
    results: list[ItemResult]
    seconds: float
    workers: int

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)

    @property
    def failures(self) -> list[ItemResult]:
        return [r for r in self.results if r.status == "failed"]

    def text(self) -> str:
        written, samples = self.count("written"), sum(r.samples for r in self.results if r.status == "written")
        seconds = max(self.seconds, 1e-9)
        return (f"{len(self.results)} item(s): {written} written, {self.count('skipped')} skipped (already done), "
                f"{self.count('failed')} failed; {self.seconds:.2f} s, {written / seconds:.1f} items/s, "
                f"{samples / seconds:.1f} samples/s on {self.workers} worker(s)")


def output_path(input_path: str | os.PathLike, output_dir: str | os.PathLike, output_count: int) -> Path:
    name = Path(input_path).name
    if output_count > 1 and name.endswith(".npy"):
        name = name[: -len(".npy")] + ".npz"
    return Path(output_dir) / name


def map_files(model, input_paths: Iterable[str | os.PathLike], output_dir: str | os.PathLike, *,
              backend: str | None = None, batch_size: int | None = None, client=None,
              on_result: Callable[[ItemResult], None] | None = None, **load_options) -> FilesSummary:
    """Run ``model`` on every input file on a Dask cluster and write one output file per input.

    ``client``: a ``distributed.Client``; None uses the current one, else starts a local
    cluster for this call.  ``batch_size`` splits a file's rows into batches of at most that
    many (bounds a worker's memory; the output is the same).  A file that fails (unreadable,
    wrong shape, ...) is reported in the summary by name with the error; the others complete.
    ``on_result`` is called on the client as each item finishes.
    """
    if batch_size is not None and (not isinstance(batch_size, int) or batch_size < 1):
        raise InputError(f"batch_size must be a positive integer, got {batch_size!r}")
    spec, local = resolve_model(model, backend, load_options)
    with connect(client) as active:
        return run_files_on(active, spec, local, input_paths, output_dir, batch_size, on_result)


def run_files_on(client, spec: ModelSpec, local, input_paths, output_dir, batch_size: int | None = None,
                 on_result: Callable[[ItemResult], None] | None = None) -> FilesSummary:
    """``map_files`` once the model is resolved (``resolve_model``) and a client is connected."""
    from distributed import as_completed

    # Absolute, not resolved: a symlink is named after itself (two links to one file are two
    # items with two outputs), and its target's suffix does not matter.
    paths = [Path(os.path.abspath(p)) for p in input_paths]
    _check_names(paths)
    output_dir = prepare_output_dir(output_dir, "output folder")
    outputs_of = {path: output_path(path, output_dir, len(local.outputs)) for path in paths}
    start = time.perf_counter()
    results = [ItemResult(path.name, "skipped") for path in paths if outputs_of[path].exists()]
    # Keys name the file, so the dashboard and the scheduler's logs say which input a task is.
    futures = {
        client.submit(process_file, spec, str(path), str(outputs_of[path]), batch_size,
                      key=f"kuiper-file-{path.name}-{uuid.uuid4().hex[:8]}"): path
        for path in paths if not outputs_of[path].exists()
    }
    for item in results:
        if on_result:
            on_result(item)
    for future in as_completed(futures):
        try:
            item = future.result()
        except Exception as exc:  # noqa: BLE001 - not a KuiperError: still one item's failure, reported by name
            item = ItemResult(futures[future].name, "failed", error=f"{type(exc).__name__}: {exc}")
        results.append(item)
        if on_result:
            on_result(item)
    order = {path.name: i for i, path in enumerate(paths)}
    results.sort(key=lambda r: order[r.name])
    workers = len(client.scheduler_info().get("workers", {}))
    return FilesSummary(results, time.perf_counter() - start, workers)


def _check_names(paths: list[Path]) -> None:
    """Two inputs that would write one output are a mistake of the whole run (a bad file is one item's)."""
    seen: dict[str, Path] = {}
    for path in paths:
        if path.name in seen and seen[path.name] != path:
            raise InputError(f"{seen[path.name]} and {path} would write the same output file; rename one")
        seen[path.name] = path


def process_file(spec: ModelSpec, input_path: str, out_path: str, batch_size: int | None) -> ItemResult:
    """On a worker: read one input file, run the cached model, write the output atomically."""
    name = Path(input_path).name
    if Path(input_path).suffix not in (".npy", ".npz"):
        return ItemResult(name, "failed", error=f"{input_path}: inputs must be .npy or .npz files")
    if Path(out_path).exists():
        # The client submits only missing outputs, so this is a rerun of a task whose first
        # attempt wrote the file before its worker died (its result was lost with the worker).
        return ItemResult(name, "written", samples=count_rows(input_path))
    try:
        model = cached_model(spec)
        feeds = read_feeds(model, input_path)
        outputs = _run_in_batches(model, feeds, batch_size)
        write_arrays(out_path, outputs, out_path)
    except KuiperError as exc:
        return ItemResult(name, "failed", error=str(exc))
    except OSError as exc:  # the file vanished or its disk failed between the checks and the read
        return ItemResult(name, "failed", error=str(InputError(f"{input_path}: {exc.strerror or exc}")))
    except MemoryError:
        return ItemResult(name, "failed", error=f"{input_path}: out of memory (see KUIPER_MEMORY_BUDGET)")
    return ItemResult(name, "written", samples=int(np.shape(next(iter(feeds.values())))[0]) if feeds else 0)


def read_feeds(model, input_path: str) -> dict:
    arrays = read_arrays(input_path, input_path)
    if isinstance(arrays, dict):
        return arrays
    if len(model.inputs) != 1:
        names = [spec.name for spec in model.inputs]
        raise InputError(f"{input_path}: the model has {len(names)} inputs {names}; give a .npz keyed by input name")
    return {model.inputs[0].name: arrays}


def _run_in_batches(model, feeds: dict, batch_size: int | None) -> dict:
    rows = {np.ndim(a) and np.shape(a)[0] for a in feeds.values()}
    if batch_size is None or len(rows) != 1 or next(iter(rows)) <= batch_size:
        return model.run(feeds, to_numpy=True)
    total = next(iter(rows))
    parts = [model.run({k: v[i:i + batch_size] for k, v in feeds.items()}, to_numpy=True)
             for i in range(0, total, batch_size)]
    return {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}
