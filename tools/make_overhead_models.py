#!/usr/bin/env python3
"""Export the three call-overhead models of issue 44 with torch + pnnx, with peers, for `kuiper bench`.

Their arithmetic is negligible at batch 1, so a call's time is the engine's own cost per op:

  mlp64          64 x (Linear(32, 32) + ReLU) on (1, 32)                        128 ops
  convbn24       24 x (Conv2d(8, 8, 3, padding=1) + BatchNorm2d + ReLU) on (1, 8, 8, 8)
  transformer4   nn.TransformerEncoder, 4 layers, d_model 32, 4 heads, 4 tokens

  python3 tools/make_overhead_models.py                    # -> build/overhead-models/<name>/
  kuiper bench build/overhead-models/mlp64 --threads 1 --compare torch,onnxruntime

Each folder holds model.pnnx.param/.bin, the TorchScript model.pt and a standard model.onnx
(tools/fixturelib.py, keep_peers), so every engine runs the same weights.  Output is gitignored.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
ROOT = TOOLS.parent
sys.path.insert(0, str(TOOLS))

import torch  # noqa: E402
from torch import nn  # noqa: E402

import fixturelib  # noqa: E402

OUT = ROOT / "build" / "overhead-models"


class Stack(nn.Module):
    """Layers under a named attribute: pnnx's generated Python cannot name a bare Sequential's "0"."""

    def __init__(self, layers):
        super().__init__()
        self.body = nn.Sequential(*layers)

    def forward(self, x):
        return self.body(x)


def mlp64() -> nn.Module:
    return Stack([layer for _ in range(64) for layer in (nn.Linear(32, 32), nn.ReLU())])


def convbn24() -> nn.Module:
    return Stack([layer for _ in range(24) for layer in (nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())])


def transformer4() -> nn.Module:
    torch.backends.mha.set_fastpath_enabled(False)  # ordinary ops in the trace, as users export it
    layer = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True)
    return nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=False)


MODELS = {
    "mlp64": (mlp64, (1, 32)),
    "convbn24": (convbn24, (1, 8, 8, 8)),
    "transformer4": (transformer4, (1, 4, 32)),
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", choices=[[], *MODELS], help="models to export (default: all)")
    parser.add_argument("--out", type=Path, default=OUT, help=f"output folder (default {OUT.relative_to(ROOT)})")
    args = parser.parse_args(argv)
    for name in args.names or MODELS:
        build, shape = MODELS[name]
        torch.manual_seed(0)
        module = build().eval()
        if name == "convbn24":  # running statistics that are not the identity, so the fold is exercised
            for norm in module.modules():
                if isinstance(norm, nn.BatchNorm2d):
                    norm.running_mean.uniform_(-0.5, 0.5)
                    norm.running_var.uniform_(0.5, 1.5)
        example = [torch.from_numpy(x) for x in fixturelib.make_inputs([shape], shape[0], 0)]
        folder = fixturelib.export_model(name, module, example, args.out, extra_batches=(), keep_peers=True,
                                         description=f"call-overhead model {name} (issue 44)")
        print(f"{name}: {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
