"""Regenerate tests/fixtures/ (needs torch and pnnx; the tests themselves do not).

    cd plugins/kuiper-yolo-detect && python3 tools/make_fixture.py

A tiny conv backbone feeds three feature maps (strides 4, 8, 16) to ``models.yolo.Detect``;
pnnx keeps the head as one op because of ``moduleop=``. The input is not square, so a
swapped x/y grid would show. Writes yolo_detect.pnnx.param/.bin and yolo_detect_ref.npz
(``b{B}_input0`` / ``b{B}_output0`` for batch 1 and 3, eager PyTorch outputs).
"""

import io
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pnnx
import torch
import torch.nn as nn

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from models.yolo import Detect  # noqa: E402  (importable by its dotted path, as in YOLOv5)

ANCHORS = ((10, 13, 16, 30, 33, 23), (30, 61, 62, 45, 59, 119), (116, 90, 156, 198, 373, 326))
INPUT_SHAPE = (3, 32, 48)  # C, H, W: feature maps 8x12, 4x6, 2x3


class TinyDetector(nn.Module):
    """conv stride-2 stages; the stride 4, 8 and 16 maps go to the head."""

    def __init__(self, nc: int = 3):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, 2, 1)
        self.p2 = nn.Conv2d(8, 8, 3, 2, 1)
        self.p3 = nn.Conv2d(8, 12, 3, 2, 1)
        self.p4 = nn.Conv2d(12, 16, 3, 2, 1)
        self.act = nn.ReLU()  # an op the core ships, so only the head is the plugin's
        self.detect = Detect(nc, ANCHORS, (8, 12, 16), (4, 8, 16))

    def forward(self, x):
        p2 = self.act(self.p2(self.act(self.stem(x))))
        p3 = self.act(self.p3(p2))
        p4 = self.act(self.p4(p3))
        return self.detect([p2, p3, p4])


def save_npz(path: Path, arrays: dict) -> None:
    """np.savez with a fixed zip timestamp, so reruns do not churn git."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for key in sorted(arrays):
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(arrays[key]), allow_pickle=False)
            zf.writestr(zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0)), buf.getvalue(),
                        compress_type=zipfile.ZIP_DEFLATED)


def main():
    torch.manual_seed(0)
    model = TinyDetector().eval()
    inputs = {b: torch.from_numpy(np.random.default_rng(b).standard_normal((b, *INPUT_SHAPE), dtype=np.float32))
              for b in (1, 3)}
    out = HERE.parent / "tests" / "fixtures"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        pnnx.export(model, f"{tmp}/model.pt", (inputs[1],), moduleop="models.yolo.Detect")
        for suffix in (".pnnx.param", ".pnnx.bin"):
            shutil.copy(f"{tmp}/model{suffix}", out / f"yolo_detect{suffix}")
    refs = {}
    with torch.no_grad():
        for b, x in inputs.items():
            refs[f"b{b}_input0"] = x.numpy()
            refs[f"b{b}_output0"] = model(x).numpy()
    save_npz(out / "yolo_detect_ref.npz", refs)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
