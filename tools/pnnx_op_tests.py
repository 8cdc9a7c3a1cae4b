#!/usr/bin/env python3
"""Run pnnx's own operator test scripts (ncnn's tools/pnnx/tests/test_*.py) through kuiper.

Each upstream script builds a tiny model, seeds its inputs, traces it and checks pnnx's
result against eager PyTorch.  This tool reuses the model and inputs and swaps the check:

  1. export (needs torch + pnnx; run with the tool venv):
       /work/toolvenv/bin/python tools/pnnx_op_tests.py export TESTS_DIR OUT_DIR [NAME ...]
     For every test_*.py in TESTS_DIR it imports the script with torch.jit.trace replaced by a
     catcher (so the script stops right where it would trace), runs the model eagerly, exports
     it with pnnx.export and writes OUT_DIR/<test>/ with model.pnnx.param/.bin and ref.npz
     (inputs and eager outputs, any dtype, complex included), or a status.txt saying why not.
  2. check (needs kuiper only; run with the project venv):
       .venv/bin/python tools/pnnx_op_tests.py check OUT_DIR [--markdown]
     Loads every export with kuiper, runs it on the saved inputs (fused; --no-fuse) and compares with
     the eager outputs: exact for integer/bool outputs, else max abs error <= 1e-4 relative to
     max(1, |output|).  Prints one line per test and a summary grouped by reason.

Get the scripts without cloning, e.g. from a mirror: ``git archive HEAD tools/pnnx/tests | tar x``.
Nothing here executes model data: the test scripts are upstream Python, run only in step 1.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import importlib.util
import io
import os
import sys
import tempfile
import traceback
from pathlib import Path

STATUS = "status.txt"


# ---------------------------------------------------------------- step 1: export (torch + pnnx)


class _Traced(Exception):
    """Raised by the stand-in torch.jit.trace: carries the model and its example inputs."""

    def __init__(self, net, inputs):
        super().__init__("traced")
        self.net, self.inputs = net, inputs


def _catch_model(script: Path):
    """(net, inputs) the script would trace, or None when it returns early (e.g. a torch version gate)."""
    import torch

    def fake_trace(net, inputs, *args, **kwargs):
        raise _Traced(net, inputs)

    spec = importlib.util.spec_from_file_location(f"pnnx_test_{script.stem}", script)
    module = importlib.util.module_from_spec(spec)
    real_trace = torch.jit.trace
    torch.jit.trace = fake_trace
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            spec.loader.exec_module(module)
            module.test()
    except _Traced as caught:
        inputs = caught.inputs if isinstance(caught.inputs, tuple) else (caught.inputs,)
        return caught.net, inputs
    finally:
        torch.jit.trace = real_trace
    return None


def _flatten(out):
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for item in out for t in _flatten(item)]
    raise TypeError(f"output of type {type(out).__name__}")


def export_one(script: Path, dest: Path) -> str:
    import numpy as np
    import pnnx
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from fixturelib import _quiet

    caught = _catch_model(script)
    if caught is None:
        return "skipped: the script returns before tracing (version gate)"
    net, inputs = caught
    with torch.no_grad():
        outputs = [o.resolve_conj().resolve_neg() for o in _flatten(net(*inputs))]
    arrays = {f"input{i}": x.numpy() for i, x in enumerate(inputs)}
    arrays.update({f"output{j}": y.detach().numpy() for j, y in enumerate(outputs)})
    with tempfile.TemporaryDirectory(prefix="pnnx-op-test-") as tmp:
        export_error = None
        with _quiet(Path(tmp) / "pnnx.log"):
            try:
                pnnx.export(net, str(Path(tmp) / "model.pt"), inputs)
            except Exception as exc:  # noqa: BLE001 - pnnx may fail after writing the graph (its own .py)
                export_error = exc
        param, weights = Path(tmp) / "model.pnnx.param", Path(tmp) / "model.pnnx.bin"
        if not param.exists():
            reason = f" ({type(export_error).__name__}: {export_error})" if export_error else ""
            return f"export failed: pnnx wrote no model.pnnx.param{reason}"[:240]
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "model.pnnx.param").write_bytes(param.read_bytes())
        (dest / "model.pnnx.bin").write_bytes(weights.read_bytes() if weights.exists() else b"")
    np.savez(dest / "ref.npz", **arrays)  # not fixturelib.save_npz: that makes 0-d outputs 1-d
    return "exported"


def export_all(tests_dir: Path, out_dir: Path, names: list[str]) -> int:
    scripts = sorted(tests_dir.glob("test_*.py"))
    if names:
        scripts = [s for s in scripts if s.stem in names or s.stem.removeprefix("test_") in names]
    os.chdir(tempfile.mkdtemp(prefix="pnnx-op-tests-cwd-"))  # scripts write .pt files into the cwd
    sys.path.insert(0, str(tests_dir))
    for script in scripts:
        dest = out_dir / script.stem
        try:
            status = export_one(script, dest)
        except Exception as exc:  # noqa: BLE001 - any failure is a line in the report
            status = f"export failed: {type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:160]}"
            if os.environ.get("PNNX_OP_TESTS_DEBUG"):
                traceback.print_exc()
        dest.mkdir(parents=True, exist_ok=True)
        (dest / STATUS).write_text(status + "\n")
        print(f"{script.stem:40s} {status}", flush=True)
    return 0


# ---------------------------------------------------------------- step 2: check (kuiper only)


def _compare(got, want) -> str | None:
    import numpy as np

    got = np.asarray(got)
    if got.shape != want.shape:
        return f"shape {got.shape} != PyTorch {want.shape}"
    if want.dtype.kind in "biu":
        return None if np.array_equal(got, want) else f"{int(np.sum(got != want))} integer element(s) differ"
    if want.size == 0:
        return None
    both_nan = np.isnan(want) & np.isnan(got)
    diff = np.where(both_nan, 0.0, np.abs(got.astype(np.complex128 if want.dtype.kind == "c" else np.float64) - want))
    scale = max(1.0, float(np.nanmax(np.abs(np.where(np.isfinite(want), want, 0)))))
    error = float(np.nanmax(np.where(np.isinf(want) & (got == want), 0.0, diff)))
    return None if error <= 1e-4 * scale else f"max abs error {error:.3g} (scale {scale:.3g})"


def check_one(folder: Path, fuse: bool = True) -> tuple[str, str]:
    """(outcome, detail): outcome is pass, mismatch, unsupported, error or the export status."""
    import numpy as np

    import kuiper
    from kuiper.errors import OperatorParamError, UnsupportedOperatorError

    status = (folder / STATUS).read_text().strip() if (folder / STATUS).exists() else "no export"
    if status != "exported":
        return ("skipped" if status.startswith("skipped") else "no export"), status
    ref = np.load(folder / "ref.npz")
    inputs = [ref[f"input{i}"] for i in range(sum(k.startswith("input") for k in ref.files))]
    wants = [ref[f"output{j}"] for j in range(sum(k.startswith("output") for k in ref.files))]
    try:
        model = kuiper.load(folder / "model.pnnx.param", fuse=fuse)
    except (UnsupportedOperatorError, OperatorParamError) as exc:
        return "unsupported", " ".join(str(exc).split())[:300]
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        return "error", f"load: {type(exc).__name__}: {' '.join(str(exc).split())[:240]}"
    try:
        outputs = model(*inputs, to_numpy=True)
    except Exception as exc:  # noqa: BLE001
        return "error", f"run: {type(exc).__name__}: {' '.join(str(exc).split())[:240]}"
    outputs = list(outputs) if isinstance(outputs, tuple) else [outputs]
    if len(outputs) != len(wants):
        return "mismatch", f"{len(outputs)} outputs, PyTorch gives {len(wants)}"
    for index, (got, want) in enumerate(zip(outputs, wants)):
        problem = _compare(got, want)
        if problem:
            return "mismatch", f"output {index}: {problem}"
    return "pass", ""


def check_all(out_dir: Path, markdown: bool, fuse: bool = True) -> int:
    results = {folder.name: check_one(folder, fuse) for folder in sorted(p for p in out_dir.iterdir() if p.is_dir())}
    counts = collections.Counter(outcome for outcome, _ in results.values())
    for name, (outcome, detail) in results.items():
        if markdown:
            if outcome not in ("pass", "skipped"):
                print(f"| `{name}` | {outcome} | {detail.replace('|', '/')} |")
        else:
            print(f"{name:40s} {outcome:12s} {detail}")
    print("summary: " + ", ".join(f"{outcome} {count}" for outcome, count in sorted(counts.items())))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    export = commands.add_parser("export", help="export every upstream test model (torch + pnnx)")
    export.add_argument("tests_dir", type=Path)
    export.add_argument("out_dir", type=Path)
    export.add_argument("names", nargs="*", help="only these tests (test_torch_cumsum or torch_cumsum)")
    check = commands.add_parser("check", help="run the exports with kuiper and compare")
    check.add_argument("out_dir", type=Path)
    check.add_argument("--markdown", action="store_true", help="print the failures as Markdown table rows")
    check.add_argument("--no-fuse", action="store_true", help="build the models without elementwise fusion")
    args = parser.parse_args(argv)
    if args.command == "export":
        return export_all(args.tests_dir.resolve(), args.out_dir.resolve(), args.names)
    return check_all(args.out_dir.resolve(), args.markdown, fuse=not args.no_fuse)


if __name__ == "__main__":
    sys.exit(main())
