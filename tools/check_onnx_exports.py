"""Export fixture architectures with torch.onnx at several opsets and check kuiper's outputs against PyTorch's.

    python tools/check_onnx_exports.py                       # opsets 17 and 20, the six small fixture families
    python tools/check_onnx_exports.py --opsets 20 --names unet
    python tools/check_onnx_exports.py --fixed-batch 2       # no free batch dim: exported and run at batch 2

Each network is the checked-in PNNX fixture's own (tools/fixture_models, same seed), exported by the
TorchScript exporter with a free batch dim (or, with --fixed-batch, a fixed one) into a temporary
folder (nothing is written to the repo), loaded by kuiper and run at batch 1 and 2 (or the fixed batch)
on random inputs. Prints each network's largest absolute
difference from PyTorch and, relative to PyTorch's largest output, and fails (exit 1) above --tolerance.
Needs torch and onnx.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

import kuiper

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from fixture_models import families_classifiers, families_dense  # noqa: E402  (a script beside its helpers)
from fixturelib import build_seeded  # noqa: E402

MODELS = {**families_classifiers.MODELS, **families_dense.MODELS}
NAMES = ("resnet_basic", "mobilenet_v2", "mobilenet_v3_small", "vit_block", "yolov5_style", "unet")


def outputs_of(result) -> list[np.ndarray]:
    if isinstance(result, (tuple, list)):
        return [np.asarray(r) for item in result for r in outputs_of(item)]
    return [np.asarray(result.detach().numpy() if isinstance(result, torch.Tensor) else result)]


def check(name: str, opset: int, folder: Path, fixed_batch: int | None) -> float:
    """The largest difference from PyTorch, relative to PyTorch's largest output, over batch 1 and 2."""
    spec = MODELS[name]
    module = build_seeded(spec)
    shape = tuple(spec.input_shapes[0])
    generator = torch.Generator().manual_seed(1)
    path = folder / f"{name}_opset{opset}.onnx"
    batches = (1, 2) if fixed_batch is None else (fixed_batch,)
    example = torch.randn((batches[0], *shape[1:]), generator=generator)
    torch.onnx.export(module, (example,), str(path), opset_version=opset, dynamo=False, input_names=["input"],
                      dynamic_axes=None if fixed_batch else {"input": {0: "batch"}})
    model = kuiper.load(path)
    worst = 0.0
    for batch in batches:
        x = torch.randn((batch, *shape[1:]), generator=generator)
        with torch.no_grad():
            want = outputs_of(module(x))
        got = model(x.numpy(), to_numpy=True)
        got = list(got) if isinstance(got, tuple) else [got]
        if len(got) != len(want) or any(g.shape != w.shape for g, w in zip(got, want)):
            raise AssertionError(f"{name} opset {opset}: shapes {[g.shape for g in got]} != {[w.shape for w in want]}")
        for g, w in zip(got, want):
            scale = max(float(np.abs(w).max()), 1e-12)
            worst = max(worst, float(np.abs(g - w).max()) / scale)
    return worst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--opsets", type=int, nargs="+", default=[17, 20])
    parser.add_argument("--names", nargs="+", default=list(NAMES))
    parser.add_argument("--tolerance", type=float, default=1e-4, help="largest relative difference allowed")
    parser.add_argument("--fixed-batch", type=int, default=None, help="export with this batch, not a free one")
    arguments = parser.parse_args()
    failed = False
    with tempfile.TemporaryDirectory() as temporary:
        for name in arguments.names:
            for opset in arguments.opsets:
                try:
                    difference = check(name, opset, Path(temporary), arguments.fixed_batch)
                except Exception as error:  # noqa: BLE001 - every network is reported, then the exit code says
                    print(f"{name:20s} opset {opset}: FAILED {type(error).__name__}: {str(error)[:300]}")
                    failed = True
                    continue
                verdict = "ok" if difference <= arguments.tolerance else "MISMATCH"
                failed |= verdict != "ok"
                print(f"{name:20s} opset {opset}: max |kuiper - torch| / max |torch| = {difference:.1e}  {verdict}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
