#!/usr/bin/env python3
"""(Re)generate the tensor-expression fixtures: PyTorch forward outputs and autograd gradients.

For every case in tests/fixtures/te/cases.json (the ten course cases and kuiper's own), the
forward computation is written here again in plain PyTorch, independently of kuiper's parser:
seeded float64 inputs and output gradients go in, the outputs and the autograd gradients of
sum(out * d<out>) with respect to each ``grad_to`` tensor come out, saved as
tests/fixtures/te/<name>.npz.  Tests read these files and never need torch.

    /work/toolvenv/bin/python tools/make_te_fixtures.py
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "te"


def _shifted_sum(B):
    return (B[0:8] + B[1:9] + B[2:10]) / 3.0


FORWARD = {
    "grad_case1": lambda t: {"C": t["A"] * t["B"] + 1.0},
    "grad_case2": lambda t: {"B": t["A"] * t["A"] + 1.0},
    "grad_case3": lambda t: {"C": t["A"] @ t["B"]},
    "grad_case4": lambda t: {"A": t["B"] @ t["C"]},
    "grad_case5": lambda t: {"A": torch.einsum("ikl,kj,lj->ij", t["B"], t["C"], t["D"])},
    "grad_case6": lambda t: {"A": F.conv2d(t["B"], t["C"])},
    "grad_case7": lambda t: {"B": t["A"].T},
    "grad_case8": lambda t: {"B": t["A"].reshape(32)},
    "grad_case9": lambda t: {"B": t["A"][:, None].expand(4, 6)},
    "grad_case10": lambda t: {"A": _shifted_sum(t["B"])},
    "grad_div_unary": lambda t: {
        "Y": torch.exp(t["A"]) / (t["B"] ** 2 + 1.0)
        + torch.tanh(t["A"]) * torch.sqrt(t["B"] ** 2 + 2.0)
        - torch.log(t["B"] ** 2 + 0.5) * torch.sin(t["A"])
    },
    "grad_conv_stride2": lambda t: {"O": F.conv2d(t["X"], t["W"], stride=2)},
    "grad_stride_pick": lambda t: {"Y": t["X"][1:9:2] * 2.0 - t["X"].flip(0)[0:8:2]},
    "grad_batched_matmul": lambda t: {"C": torch.bmm(t["A"], t["B"])},
    "grad_broadcast": lambda t: {"Y": t["X"] * t["S"][None, :] + t["T"][:, None]},
    "grad_two_outputs": lambda t: {"R": t["X"] @ t["V"], "Q": (t["X"] * t["X"]).sum(1)},
    "grad_many_hits": lambda t: {
        "Y": t["X"][:, None] * t["X"][None, :] + t["X"][(torch.arange(5)[:, None] + torch.arange(5)[None, :]) % 5]
    },
    "grad_shifted_products": lambda t: {"Y": t["X"][0:6] * t["X"][1:7] * t["X"][2:8]},
    "grad_select_max": lambda t: {"Y": torch.where(t["X"] > 0, t["X"], 0.1 * t["X"]) + torch.maximum(t["X"], t["W"])},
    "grad_diagonal": lambda t: {"Y": torch.diagonal(t["X"]) * t["Z"].sum(1)},
    "grad_split": lambda t: {"Y": (t["X"] + torch.roll(t["X"], -5)).reshape(2, 3, 4)},
}


def shapes_of(case) -> dict[str, tuple[int, ...]]:
    """Tensor shapes from the kernel text (``Name<d0, d1>``), without kuiper."""
    import re

    return {
        name: tuple(int(d) for d in dims.split(","))
        for name, dims in re.findall(r"([A-Za-z_][A-Za-z0-9_]*)<([0-9,\s]+)>", case["kernel"])
    }


def main() -> None:
    cases = json.loads((FIXTURES / "cases.json").read_text())
    total = 0
    for number, case in enumerate(cases):
        rng = np.random.default_rng(1000 + number)
        shapes = shapes_of(case)
        inputs = {name: rng.uniform(-1.0, 1.0, shapes[name]) for name in case["ins"]}
        tensors = {name: torch.tensor(value, requires_grad=True) for name, value in inputs.items()}
        outputs = FORWARD[case["name"]](tensors)
        assert sorted(outputs) == sorted(case["outs"]), case["name"]
        douts = {name: rng.uniform(-1.0, 1.0, shapes[name]) for name in case["outs"]}
        loss = sum((outputs[name] * torch.tensor(douts[name])).sum() for name in case["outs"])
        grads = torch.autograd.grad(loss, [tensors[x] for x in case["grad_to"]])
        arrays = {f"in_{k}": v for k, v in inputs.items()}
        arrays.update({f"out_{k}": v.detach().numpy() for k, v in outputs.items()})
        arrays.update({f"d{k}": v for k, v in douts.items()})
        arrays.update({f"grad_{x}": g.numpy() for x, g in zip(case["grad_to"], grads)})
        path = FIXTURES / f"{case['name']}.npz"
        np.savez_compressed(path, **arrays)
        total += path.stat().st_size
        print(f"{path.relative_to(ROOT)}: {path.stat().st_size} bytes")
    print(f"total {total} bytes")


if __name__ == "__main__":
    main()
