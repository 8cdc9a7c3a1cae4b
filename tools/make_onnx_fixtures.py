"""Export fixture architectures to ONNX with torch.onnx and save PyTorch's outputs beside them.

    python tools/make_onnx_fixtures.py [NAME ...]   # writes tests/fixtures/onnx/<name>/{model.onnx, ref.npz}

The networks are the checked-in PNNX fixtures' own (tools/fixture_models, same seeds and random
BatchNorm statistics), exported by the TorchScript exporter with a free batch dim, the ResNet and
MobileNetV2 at opset 17, the ViT block, the YOLOv5-style detector and the UNet at opset 20 (their
free batch reaches Reshape, Expand and Resize through Shape); ref.npz holds the input and PyTorch's
output at batch 1 and 3. tests/onnx/test_onnx_models.py
loads the files with kuiper and compares. Needs torch and onnx (pip install torch onnx).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from fixture_models import families_classifiers, families_dense  # noqa: E402  (a script beside its helpers)
from fixturelib import build_seeded  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "onnx"
MODELS = {**families_classifiers.MODELS, **families_dense.MODELS}
OPSETS = {"resnet_basic": 17, "mobilenet_v2": 17, "vit_block": 20, "yolov5_style": 20, "unet": 20}


def export(name: str) -> None:
    spec = MODELS[name]
    module = build_seeded(spec)
    folder = OUT / name
    folder.mkdir(parents=True, exist_ok=True)
    shape = tuple(spec.input_shapes[0])
    generator = torch.Generator().manual_seed(1)
    example = torch.randn(shape, generator=generator)
    torch.onnx.export(module, (example,), str(folder / "model.onnx"), opset_version=OPSETS[name], dynamo=False,
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
    for model_name in sys.argv[1:] or OPSETS:
        export(model_name)
