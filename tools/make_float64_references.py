#!/usr/bin/env python3
"""Save PyTorch's float64 outputs of fixtures beside their float32 ones (needs torch):

    python3 tools/make_float64_references.py transformer_encoder [NAME ...]

For each fixture, the module is built again from its seed (the weights of the export), run on the
saved inputs in float32, which must reproduce the saved outputs exactly, and then in float64; the
float64 outputs go to ``ref64.npz`` (keys ``b{B}_output{j}``, as in ``ref.npz``).

tests/end_to_end/test_models.py uses them where a fixture is ill-conditioned: where PyTorch's own
float32 output is far from the exact answer, a backend that sums in another order (cuBLAS on a GPU)
can be as accurate and still miss PyTorch's float32 by more than the tolerance.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

TOOLS = Path(__file__).resolve().parent
sys.path.insert(0, str(TOOLS))

from fixture_models import all_models  # noqa: E402
from fixturelib import build_seeded  # noqa: E402

MODELS = TOOLS.parent / "tests" / "fixtures" / "models"


def _outputs(module, inputs) -> list[np.ndarray]:
    with torch.no_grad():
        result = module(*inputs)
    return [t.numpy() for t in (result if isinstance(result, (tuple, list)) else (result,))]


def float64_references(name: str) -> dict[str, np.ndarray]:
    specs = all_models()
    if name not in specs:
        raise SystemExit(f"{name}: no such fixture (see tools/make_fixtures.py --list)")
    module = build_seeded(specs[name])
    ref = np.load(MODELS / name / "ref.npz")
    batches = sorted({key.split("_")[0] for key in ref.files})
    saved = {}
    for batch in batches:
        count = sum(key.startswith(f"{batch}_input") for key in ref.files)
        inputs = [torch.from_numpy(ref[f"{batch}_input{i}"]) for i in range(count)]
        single = _outputs(module.float(), inputs)
        for j, out in enumerate(single):
            if not np.array_equal(out, ref[f"{batch}_output{j}"]):
                raise SystemExit(f"{name} {batch}: the rebuilt module does not reproduce output {j}; "
                                 "regenerate the fixture first (tools/make_fixtures.py)")
        wide = [x.double() if x.is_floating_point() else x for x in inputs]
        for j, out in enumerate(_outputs(module.double(), wide)):
            saved[f"{batch}_output{j}"] = out
            print(f"{name} {batch} output {j}: PyTorch float32 is {np.abs(single[j] - out).max():.3g} "
                  f"from float64 (largest |output| {np.abs(out).max():.3g})")
    return saved


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="+", metavar="NAME", help="fixtures under tests/fixtures/models")
    args = parser.parse_args(argv)
    for name in args.names:
        np.savez(MODELS / name / "ref64.npz", **float64_references(name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
