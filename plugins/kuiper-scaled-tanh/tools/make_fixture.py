"""Regenerate tests/fixtures/ (needs torch and pnnx; the tests themselves do not).

    cd plugins/kuiper-scaled-tanh && python3 tools/make_fixture.py
"""

import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pnnx
import torch
import torch.nn as nn

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from example.layers import ScaledTanh  # noqa: E402  (the custom module, importable by its dotted path)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.act = ScaledTanh(4)

    def forward(self, x):
        return self.act(self.conv(x))


def main():
    torch.manual_seed(0)
    model = Net().eval()
    x1, x3 = torch.rand(1, 3, 8, 8), torch.rand(3, 3, 8, 8)
    out = HERE.parent / "tests" / "fixtures"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        pnnx.export(model, f"{tmp}/model.pt", (x1,), moduleop="example.layers.ScaledTanh")
        for suffix in (".pnnx.param", ".pnnx.bin"):
            shutil.copy(f"{tmp}/model{suffix}", out / f"scaled_tanh{suffix}")
    with torch.no_grad():
        np.savez(out / "scaled_tanh_ref.npz", b1_input0=x1.numpy(), b1_output0=model(x1).numpy(),
                 b3_input0=x3.numpy(), b3_output0=model(x3).numpy())
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
