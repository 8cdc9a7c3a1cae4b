#!/usr/bin/env python3
"""(Re)generate kuiper's PNNX test fixtures with torch + pnnx.

Each fixture is a folder with model.pnnx.param/.bin (what kuiper loads), ref.npz (seeded
inputs and eager PyTorch outputs per batch size) and meta.json. Seeds are fixed, so
rerunning reproduces the same files. Tests only read the output; they never need torch.

Examples:
  python3 tools/make_fixtures.py                 # all small fixtures -> tests/fixtures/models/
  python3 tools/make_fixtures.py --list
  python3 tools/make_fixtures.py conv2d_reflect resnet18_w8
  python3 tools/make_fixtures.py --full --keep-peers   # + full-size models -> build/fixtures-full/
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
ROOT = TOOLS.parent
sys.path.insert(0, str(TOOLS))

import fixturelib  # noqa: E402
from fixture_models import all_models  # noqa: E402

DEFAULT_OUT = ROOT / "tests" / "fixtures" / "models"
FULL_OUT = ROOT / "build" / "fixtures-full"
SIZE_BUDGET = 5 * 1024 * 1024  # the whole tests/fixtures tree must stay under this


def op_types(param: Path) -> collections.Counter:
    lines = param.read_text().splitlines()[2:]
    return collections.Counter(line.split()[0] for line in lines if line.strip())


def tree_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help="fixtures to (re)generate (default: every non-full one; see --list)")
    parser.add_argument("--list", action="store_true", help="list fixture names and descriptions, then exit")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help=f"folder for small fixtures (default: {DEFAULT_OUT.relative_to(ROOT)})")
    parser.add_argument("--full", action="store_true",
                        help=f"also export the full-size models into {FULL_OUT.relative_to(ROOT)}/ "
                             "(gitignored; never check these in)")
    parser.add_argument("--full-out", type=Path, default=FULL_OUT, help="folder for full-size models")
    parser.add_argument("--keep-peers", action="store_true",
                        help="also keep pnnx's TorchScript .pt, its .pnnx.onnx and a runnable model.onnx beside "
                             "each model for benchmarks (ignored for the checked-in tests/fixtures)")
    args = parser.parse_args(argv)

    models = all_models()
    if args.list:
        for name, spec in models.items():
            tag = " [full]" if spec.full else ""
            print(f"{name:24s}{tag} {spec.description}")
        return 0

    unknown = [n for n in args.names if n not in models]
    if unknown:
        parser.error(f"unknown fixture(s) {unknown}; known: {', '.join(models)}")
    names = args.names or [n for n, s in models.items() if args.full or not s.full]

    for name in names:
        spec = models[name]
        outdir = args.full_out if spec.full else args.out
        start = time.perf_counter()
        # peers are tens of MB for real models: never put them into the checked-in tree
        keep = args.keep_peers and outdir.resolve() != DEFAULT_OUT.resolve()
        folder = fixturelib.export_spec(name, spec, outdir, keep_peers=keep)
        ops = op_types(folder / "model.pnnx.param")
        ops.pop("pnnx.Input", None)
        ops.pop("pnnx.Output", None)
        summary = ", ".join(f"{t}x{n}" if n > 1 else t for t, n in sorted(ops.items()))
        print(f"{name:24s} {tree_size(folder) / 1024:8.1f} KiB {time.perf_counter() - start:5.1f}s  {summary}")

    fixtures_root = args.out.parent if args.out == DEFAULT_OUT else args.out
    if fixtures_root.exists():
        total = tree_size(fixtures_root)
        print(f"total {fixtures_root}: {total / 1024:.1f} KiB")
        if args.out == DEFAULT_OUT and total > SIZE_BUDGET:
            print(f"error: tests/fixtures exceeds the {SIZE_BUDGET // 2**20} MiB budget", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
