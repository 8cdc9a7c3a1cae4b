#!/usr/bin/env python3
"""Export the asv single-op cases with torch + pnnx, with peers, for `kuiper bench`.

The asv benchmarks write these ops as PNNX text from NumPy (no torch).  This script
builds the same ops as torch modules from the same case tables
(asv_benchmarks/benchmarks/opmodels.py) and exports each with pnnx, keeping the
TorchScript ``model.pt`` and a ``model.onnx``, so one op can be timed against
PyTorch and ONNX Runtime:

  python3 tools/make_bench_models.py                 # every case -> build/bench-models/
  python3 tools/make_bench_models.py conv_3x3_s1 pool_max_3x3_s2_p1
  kuiper bench build/bench-models/conv_3x3_s1 --threads 2

Output is gitignored (build/); nothing here is checked in.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
ROOT = TOOLS.parent
sys.path.insert(0, str(TOOLS))
sys.path.insert(0, str(ROOT / "asv_benchmarks"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import fixturelib  # noqa: E402
from fixturelib import Single  # noqa: E402
from benchmarks import opmodels  # noqa: E402

OUT = ROOT / "build" / "bench-models"

class GeluTanh(nn.Module):
    def forward(self, x):
        return F.gelu(x, approximate="tanh")


class ResidualRelu(nn.Module):
    def forward(self, x, y):
        return torch.relu(x + y)


class FiveOpChain(nn.Module):
    def forward(self, x, y):
        t = torch.relu(x + y)
        t = F.relu(t * 2.0 - 0.5)
        return t * 0.25 + x


def conv_module(case: str) -> nn.Module:
    cin, cout, k, stride, pad, groups, dilation = opmodels.CONV_CASES[case]
    if case.startswith("transposed"):
        return Single(nn.ConvTranspose2d(cin, cout, k, stride, pad, groups=groups, dilation=dilation))
    return Single(nn.Conv2d(cin, cout, k, stride, pad, dilation=dilation, groups=groups))


def pool_module(case: str) -> nn.Module:
    op_type, p, _ = opmodels.POOL_CASES[case]
    if op_type == "nn.MaxPool2d":
        return Single(nn.MaxPool2d(p["kernel_size"], p["stride"], p["padding"], p["dilation"]))
    if op_type == "nn.AvgPool2d":
        return Single(nn.AvgPool2d(p["kernel_size"], p["stride"], p["padding"]))
    return Single(nn.AdaptiveAvgPool2d(p["output_size"]))


ACTIVATIONS = {
    "relu": nn.ReLU, "relu6": nn.ReLU6, "leaky_relu": lambda: nn.LeakyReLU(0.1), "sigmoid": nn.Sigmoid,
    "silu": nn.SiLU, "hardswish": nn.Hardswish, "tanh": nn.Tanh, "gelu": nn.GELU, "gelu_tanh": GeluTanh,
}
CHAINS = {"residual_relu": ResidualRelu, "five_op_chain": FiveOpChain}


def cases() -> dict[str, tuple]:
    """name -> (module builder, input shapes), in the asv naming <kind>_<case>."""
    table = {}
    for case in opmodels.CONV_CASES:
        table[f"conv_{case}"] = (lambda c=case: conv_module(c), [opmodels.CONV_INPUT])
    for case, (_, _, shape) in opmodels.POOL_CASES.items():
        table[f"pool_{case}"] = (lambda c=case: pool_module(c), [shape])
    for case in opmodels.ACTIVATION_CASES:
        table[f"activation_{case}"] = (lambda c=case: Single(ACTIVATIONS[c]()), [opmodels.ACTIVATION_INPUT])
    for case in opmodels.CHAIN_CASES:
        table[f"chain_{case}"] = (CHAINS[case], [opmodels.CHAIN_INPUT] * 2)
    return table


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="cases to export (default: all; see --list)")
    parser.add_argument("--list", action="store_true", help="list the case names and exit")
    parser.add_argument("--out", type=Path, default=OUT, help=f"output folder (default {OUT.relative_to(ROOT)})")
    args = parser.parse_args(argv)
    table = cases()
    if args.list:
        print("\n".join(table))
        return 0
    unknown = [n for n in args.names if n not in table]
    if unknown:
        parser.error(f"unknown case(s) {unknown}; see --list")
    for name in args.names or table:
        build, shapes = table[name]
        torch.manual_seed(0)
        module = build().eval()
        example = [torch.from_numpy(x) for x in fixturelib.make_inputs(shapes, shapes[0][0], 0)]
        folder = fixturelib.export_model(name, module, example, args.out, extra_batches=(), keep_peers=True,
                                         description=f"asv single-op case {name}")
        types = sorted({line.split()[0] for line in (folder / "model.pnnx.param").read_text().splitlines()[2:]}
                       - {"pnnx.Input", "pnnx.Output"})
        print(f"{name:28s} {', '.join(types)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
