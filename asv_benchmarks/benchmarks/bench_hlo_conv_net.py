"""A JAX conv net from HLO text against the same layers from PNNX and PyTorch.

``data/conv_net.hlo.txt.gz`` (``tools/make_hlo_fixtures.py --bench``): four 3x3 convolutions,
64 channels, 56x56, batch 1, with bias and ReLU, weights closed over (constants in the
text). The PNNX model (``nn.Conv2d`` + ``nn.ReLU``) is written at setup from the kernels
and biases in that text, so every engine runs the same weights; PyTorch runs when torch is
installed. ``tools/bench_hlo_conv_net.py`` times all three interleaved, for the ratios in
docs/performance.md.

JAX users pass weights as arguments of the jitted function: ``hlo-args`` is the same text with
every weight constant turned into an ENTRY parameter (``weights_as_parameters``), called with the
weights at every call; ``hlo-bound`` binds those parameters to the arrays at load
(``kuiper.load_hlo(text, constants=...)``, issue 44).
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

import kuiper
from kuiper.hlo import parse
from kuiper.hlo.literals import literal_array

from .common import CACHE, available_backends, run_once
from .opmodels import OpLine, write_pnnx

DATA = Path(__file__).resolve().parent / "data" / "conv_net.hlo.txt.gz"
BACKENDS = available_backends()


def hlo_text() -> str:
    return gzip.decompress(DATA.read_bytes()).decode()


def conv_layers(text: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """(kernel OIHW, bias) per convolution of the ENTRY computation, in program order.

    A bias is the constant that a broadcast after the convolution spreads over the map.
    """
    entry = parse(text, source=DATA.name).entry
    kernels = [literal_array(entry.by_name[i.operands[1]]) for i in entry.instructions if i.opcode == "convolution"]
    biases = [literal_array(entry.by_name[i.operands[0]]).reshape(-1) for i in entry.instructions
              if i.opcode == "broadcast" and entry.by_name[i.operands[0]].opcode == "constant"
              and entry.by_name[i.operands[0]].shape.size() > 1]
    if len(kernels) != len(biases):
        raise ValueError(f"{DATA.name}: {len(kernels)} convolutions but {len(biases)} bias constants")
    return list(zip(kernels, biases))


def weights_as_parameters(text: str) -> tuple[str, dict[int, np.ndarray]]:
    """The text with each array constant of the ENTRY computation (the weights) made a parameter, numbered
    after x in program order, as JAX writes weights passed as arguments; and {number: the weight}."""
    entry = parse(text, source=DATA.name).entry
    weights = [i for i in entry.instructions if i.opcode == "constant" and i.shape.size() > 1]
    lines, numbers = text.splitlines(), {}
    for number, instruction in enumerate(weights, start=1):
        numbers[instruction.name] = number
    for index, line in enumerate(lines):
        name = line.strip().split(" = ", 1)[0]
        if name in numbers and " constant(" in line:
            lines[index] = line[: line.index(" constant(")] + f" parameter({numbers[name]})"
    arrays = {numbers[i.name]: literal_array(i) for i in weights}
    return "\n".join(lines), arrays


def write_pnnx_net(layers, input_shape: tuple[int, ...], folder: Path) -> Path:
    """The layers as the PNNX file pnnx writes for nn.Conv2d(padding=1) + nn.ReLU blocks."""
    ops = [OpLine("pnnx.Input", "pnnx_input_0", [], ["x"])]
    previous = "x"
    for index, (kernel, bias) in enumerate(layers):
        out_channels, in_channels = kernel.shape[:2]
        params = dict(bias=True, dilation=(1, 1), groups=1, in_channels=in_channels, kernel_size=(3, 3),
                      out_channels=out_channels, padding=(1, 1), padding_mode="zeros", stride=(1, 1))
        ops.append(OpLine("nn.Conv2d", f"conv{index}", [previous], [f"c{index}"], params,
                          {"weight": kernel, "bias": bias}))
        ops.append(OpLine("nn.ReLU", f"relu{index}", [f"c{index}"], [f"r{index}"]))
        previous = f"r{index}"
    ops.append(OpLine("pnnx.Output", "pnnx_output_0", [previous], []))
    shapes = {operand: input_shape for op in ops for operand in op.inputs + op.outputs}
    return write_pnnx(folder, ops, shapes)


def torch_module(layers):
    """The layers as a PyTorch module: nn.Conv2d(padding=1) + nn.ReLU blocks, NCHW (needs torch)."""
    import torch  # optional: asv runs without it

    blocks = []
    for kernel, bias in layers:
        conv = torch.nn.Conv2d(kernel.shape[1], kernel.shape[0], 3, padding=1)
        conv.weight.data, conv.bias.data = torch.from_numpy(kernel.copy()), torch.from_numpy(bias.copy())
        blocks += [conv, torch.nn.ReLU()]
    return torch.nn.Sequential(*blocks).eval()


class HloConvNet:
    """The same net five ways: ``hlo`` (kuiper.load_hlo, weights in the text), ``hlo-args`` (weights passed
    per call), ``hlo-bound`` (those bound at load), ``pnnx`` (kuiper.load), ``torch``."""

    params = (["hlo", "hlo-args", "hlo-bound", "pnnx", "torch"], BACKENDS)
    param_names = ("engine", "backend")
    number = 1
    warmup_time = 0.5
    timeout = 300

    def setup(self, engine, backend):
        text = hlo_text()
        hlo_model = kuiper.load_hlo(text, backend=backend)
        shape = tuple(hlo_model.inputs[0].shape)
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        if engine == "torch":
            self.run = self.torch_net(conv_layers(text), x, backend)
            return
        if engine in ("hlo-args", "hlo-bound"):
            args_text, weights = weights_as_parameters(text)
            bound = engine == "hlo-bound"
            self.model = kuiper.load_hlo(args_text, backend=backend, constants=weights if bound else None)
            arrays = [x] if bound else [x] + [weights[number] for number in sorted(weights)]
            inputs = [self.model.backend.asarray(a) for a in arrays]
            self.run = lambda: run_once(self.model, inputs)
            self.run()
            return
        if engine == "hlo":
            self.model = hlo_model
        else:
            self.model = kuiper.load(write_pnnx_net(conv_layers(text), shape, CACHE / "hlo_conv_net"),
                                     backend=backend)
        inputs = [self.model.backend.asarray(x)]
        self.run = lambda: run_once(self.model, inputs)
        self.run()

    @staticmethod
    def torch_net(layers, x, backend):
        if backend != "numpy":
            raise NotImplementedError("PyTorch is timed on the CPU only (backend numpy)")
        try:
            import torch
        except ImportError:
            raise NotImplementedError("torch is not installed") from None
        net, tensor = torch_module(layers), torch.from_numpy(x)

        def run():
            with torch.inference_mode():
                return net(tensor)

        return run

    def time_forward(self, engine, backend):
        self.run()
