#!/usr/bin/env python3
"""PyTorch's answers to the special-value feeds of tests/reliability/test_special_values.py.

Builds that test's small models in PyTorch (its ``PYTORCH_MODELS``) from the same weights (seeded),
feeds it the same NaN, +inf and -inf feeds (its ``_feeds``; the huge finite ones are left out, where
the order of a float32 sum decides what overflows), and saves where PyTorch puts NaN, +inf and -inf
(bits, packed) and a seeded sample of its finite values, into tests/fixtures/special_values.npz.
The test then holds kuiper's default engine to PyTorch's positions.  Needs torch (and numba, which
the test module imports).

    PYTHONPATH=. python3 tools/make_special_value_references.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "reliability")]
import test_special_values as suite  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "special_values.npz"
SAMPLE = 32  # finite values kept per output, at seeded positions


def _tensor(weights, key):
    return torch.from_numpy(np.asarray(weights[key], np.float32))


def _activation(name, value):
    return {"relu": F.relu, "relu6": F.relu6, "hardtanh": lambda v: F.hardtanh(v, -1.0, 1.0),
            "silu": F.silu}[name](value)


def pytorch_model(name: str):
    """A function of a torch tensor computing the test's model ``name`` as PyTorch does."""
    _, _, weights = suite.MODELS[name]
    if name.startswith("identity_conv_"):
        return lambda x: _activation(name.rsplit("_", 1)[1], F.conv2d(x, _tensor(weights, "c.weight"), groups=32))
    if name.startswith("conv1d"):
        return lambda x: F.relu(F.conv1d(x, _tensor(weights, "c.weight"), _tensor(weights, "c.bias"), padding=1))
    if name.startswith("conv_transpose"):
        return lambda x: F.relu(F.conv_transpose2d(x, _tensor(weights, "c.weight"), _tensor(weights, "c.bias"),
                                                   padding=1))
    if name.startswith("conv"):
        def conv(x, key="c"):
            return F.conv2d(x, _tensor(weights, f"{key}.weight"), _tensor(weights, f"{key}.bias"), padding=1)
        tail = name.split("_", 1)[1]
        if tail == "residual_relu":
            return lambda x: F.relu(conv(conv(x), "d") + conv(x))
        if tail == "maxpool":
            return lambda x: F.max_pool2d(conv(x), 2, 2)
        return lambda x: _activation(tail, conv(x))
    if name.startswith("linear"):
        return lambda x: _activation(name.split("_")[1], F.linear(x, _tensor(weights, "l.weight"),
                                                                  _tensor(weights, "l.bias")))
    if name == "maxpool":
        return lambda x: F.max_pool2d(x, 2, 2)
    if name == "chain":
        return lambda x: (x + 1.0) * 2.0 - x * 2.0
    if name == "layernorm":
        return lambda x: F.layer_norm(x, (768,), _tensor(weights, "n.weight"), _tensor(weights, "n.bias"), 1e-5)
    if name == "instancenorm":
        return lambda x: F.instance_norm(x, eps=1e-5)
    if name == "softmax":
        return lambda x: F.softmax(x, dim=-1)
    if name == "causal_attention":
        return lambda x: F.scaled_dot_product_attention(x, x, x, is_causal=True)
    raise KeyError(name)


def main() -> None:
    torch.set_grad_enabled(False)
    arrays = {}
    for name in suite.PYTORCH_MODELS:
        run = pytorch_model(name)
        for label, x in suite._feeds(suite.MODELS[name][0]):
            if label.startswith("huge"):
                continue
            out = run(torch.from_numpy(x)).numpy()
            key = f"{name}|{label}"
            for kind in ("nan", "posinf", "neginf"):
                arrays[f"{key}|{kind}"] = np.packbits(getattr(np, f"is{kind}")(out).ravel())
            positions = np.random.default_rng(0).choice(out.size, min(SAMPLE, out.size), replace=False)
            arrays[f"{key}|sample"] = out.ravel()[positions]
    np.savez_compressed(OUT, **arrays)
    print(f"{OUT}: {len(arrays)} arrays, {OUT.stat().st_size} bytes (torch {torch.__version__})")


if __name__ == "__main__":
    main()
