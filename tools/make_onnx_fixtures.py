"""Export fixture architectures to ONNX with torch.onnx and save PyTorch's outputs beside them.

    python tools/make_onnx_fixtures.py            # writes tests/fixtures/onnx/<name>/{model.onnx, ref.npz}

The networks are the checked-in PNNX fixtures' own (tools/fixture_models, same seeds and random
BatchNorm statistics), exported at opset 17 by the TorchScript exporter with a free batch dim;
ref.npz holds the input and PyTorch's output at batch 1 and 3. tests/onnx/test_onnx_models.py
loads the files with kuiper and compares. Needs torch and onnx (pip install torch onnx).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from fixture_models.families_classifiers import MODELS  # noqa: E402  (a script beside its helpers)
from fixturelib import build_seeded  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "onnx"
NAMES = ("resnet_basic", "mobilenet_v2")
OPSET = 17


def export(name: str) -> None:
    spec = MODELS[name]
    module = build_seeded(spec)
    folder = OUT / name
    folder.mkdir(parents=True, exist_ok=True)
    shape = tuple(spec.input_shapes[0])
    generator = torch.Generator().manual_seed(1)
    example = torch.randn(shape, generator=generator)
    torch.onnx.export(module, (example,), str(folder / "model.onnx"), opset_version=OPSET, dynamo=False,
                      input_names=["input"], output_names=["output"], dynamic_axes={"input": {0: "batch"}})
    arrays = {}
    for batch in (1, 3):
        x = torch.randn((batch, *shape[1:]), generator=generator)
        with torch.no_grad():
            arrays[f"b{batch}_input"] = x.numpy()
            arrays[f"b{batch}_output"] = module(x).numpy()
    np.savez_compressed(folder / "ref.npz", **arrays)
    print(f"{name}: {(folder / 'model.onnx').stat().st_size} bytes")


if __name__ == "__main__":
    for model_name in NAMES:
        export(model_name)
