#!/usr/bin/env python3
"""Train kuiper's demo model: a small CNN on scikit-learn's bundled 8x8 digits.

Writes kuiper/demo/digits.pnnx.param + digits.pnnx.bin (exported at batch 1; kuiper runs
it at any batch) and digits_heldout.npz with the held-out ``images`` (N,1,8,8 float32 in
[0,1]), ``labels`` (int64) and ``torch_logits`` (eager PyTorch outputs), so the demo can
show real accuracy and compare against PyTorch without torch installed.

The data ships inside scikit-learn (no download); seeds, the split (last 360 images held
out) and single-threaded training make the result reproducible.

  python3 tools/make_demo_model.py [--out kuiper/demo] [--epochs 30]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
from torch import nn

TOOLS = Path(__file__).resolve().parent
sys.path.insert(0, str(TOOLS))

import fixturelib  # noqa: E402

HELD_OUT = 360
MIN_ACCURACY = 0.95


class DigitsCNN(nn.Module):
    """Conv-BN-ReLU (BN folds at export), max pool, global average pool, linear.

    Named attributes rather than nn.Sequential: pnnx names Sequential children "0",
    "1", ... and its generated Python (``self.2 = ...``) then fails to import.
    """

    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16)
        self.conv2, self.bn2 = nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32)
        self.pool = nn.MaxPool2d(2)
        self.conv3 = nn.Conv2d(32, 32, 3, padding=1)
        self.relu = nn.ReLU()
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.pool(self.relu(self.bn2(self.conv2(x))))
        x = self.gap(self.relu(self.conv3(x)))
        return self.fc(torch.flatten(x, 1))


def load_split():
    from sklearn.datasets import load_digits
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None]  # pixels are 0..16
    y = digits.target.astype(np.int64)
    return (x[:-HELD_OUT], y[:-HELD_OUT]), (x[-HELD_OUT:], y[-HELD_OUT:])


def train(model: nn.Module, x: np.ndarray, y: np.ndarray, epochs: int, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs)
    model.train()
    for _ in range(epochs):
        for idx in torch.randperm(len(xt), generator=gen).split(64):
            opt.zero_grad()
            nn.functional.cross_entropy(model(xt[idx]), yt[idx]).backward()
            opt.step()
        sched.step()
    model.eval()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=TOOLS.parent / "kuiper" / "demo", help="output folder")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    torch.set_num_threads(1)  # bitwise-reproducible training on CPU
    torch.manual_seed(args.seed)
    (x_tr, y_tr), (x_ho, y_ho) = load_split()
    model = DigitsCNN()
    train(model, x_tr, y_tr, args.epochs, args.seed)

    with torch.no_grad():
        logits = model(torch.from_numpy(x_ho)).numpy()
    acc = float((logits.argmax(1) == y_ho).mean())
    print(f"held-out accuracy: {acc:.4f} ({int(round(acc * HELD_OUT))}/{HELD_OUT}), train size {len(x_tr)}")
    if acc <= MIN_ACCURACY:
        print(f"error: accuracy must exceed {MIN_ACCURACY}; not writing files", file=sys.stderr)
        return 1

    def check(tmpdir: Path) -> None:
        """The exported graph must reproduce the logits at the full held-out batch."""
        gen = fixturelib.load_pnnx_py(tmpdir)
        got = fixturelib.run_eager(gen, [x_ho])[0]
        err = float(np.abs(got - logits).max())
        print(f"pnnx graph at batch {HELD_OUT}: max |logit diff| = {err:.2e}")
        if err > 1e-4 * max(1.0, float(np.abs(logits).max())):
            raise RuntimeError("pnnx export disagrees with PyTorch")

    fixturelib.pnnx_export(model, [torch.from_numpy(x_ho[:1])], args.out, stem="digits", check=check)
    fixturelib.save_npz(args.out / "digits_heldout.npz",
                        {"images": x_ho, "labels": y_ho, "torch_logits": logits.astype(np.float32)})
    for p in sorted(args.out.glob("digits*")):
        print(f"{p.relative_to(TOOLS.parent) if p.is_relative_to(TOOLS.parent) else p}: {p.stat().st_size / 1024:.1f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
