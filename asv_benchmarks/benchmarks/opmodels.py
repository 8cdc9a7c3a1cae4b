"""Single-op benchmark models written as real PNNX files from NumPy random weights (no torch).

Each case is a small table entry; ``write_case`` turns it into ``model.pnnx.param``
(the text pnnx would write: the same type strings, params and ``#`` shapes as real
exports) plus a stored-zip ``model.pnnx.bin``.  The same tables drive
``tools/make_bench_models.py``, which exports the equivalent torch modules with
pnnx so that ``kuiper bench`` can compare single ops with PyTorch and ONNX Runtime.

Shapes are those of real networks: 56x56 with 64 channels is ResNet stage 1.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

# -- cases ---------------------------------------------------------------------------------------
CONV_CASES = {
    # name: (in channels, out channels, kernel, stride, padding, groups, dilation)
    "3x3_s1": (64, 64, 3, 1, 1, 1, 1),
    "3x3_s2": (64, 128, 3, 2, 1, 1, 1),
    "1x1": (64, 256, 1, 1, 0, 1, 1),
    "depthwise_3x3": (64, 64, 3, 1, 1, 64, 1),
    "grouped_3x3_g8": (64, 64, 3, 1, 1, 8, 1),
    "dilated_3x3_d2": (64, 64, 3, 1, 2, 1, 2),
    "transposed_4x4_s2": (64, 32, 4, 2, 1, 1, 1),  # nn.ConvTranspose2d: 56x56 -> 112x112
}
CONV_INPUT = (1, 64, 56, 56)

POOL_CASES = {
    # name: (type, params, input shape)
    "max_3x3_s2_p1": ("nn.MaxPool2d", dict(ceil_mode=False, dilation=(1, 1), kernel_size=(3, 3), padding=(1, 1),
                                           return_indices=False, stride=(2, 2)), (1, 64, 112, 112)),
    "max_5x5_s1_p2": ("nn.MaxPool2d", dict(ceil_mode=False, dilation=(1, 1), kernel_size=(5, 5), padding=(2, 2),
                                           return_indices=False, stride=(1, 1)), (1, 64, 40, 40)),
    "avg_2x2_s2": ("nn.AvgPool2d", dict(ceil_mode=False, count_include_pad=True, divisor_override=None,
                                        kernel_size=(2, 2), padding=(0, 0), stride=(2, 2)), (1, 64, 56, 56)),
    "adaptive_avg_1x1": ("nn.AdaptiveAvgPool2d", dict(output_size=(1, 1)), (1, 512, 14, 14)),
}

ACTIVATION_CASES = {
    # name: (type, params); every one runs on ACTIVATION_INPUT
    "relu": ("nn.ReLU", {}),
    "relu6": ("nn.ReLU6", {}),
    "leaky_relu": ("nn.LeakyReLU", dict(negative_slope=0.1)),
    "sigmoid": ("nn.Sigmoid", {}),
    "silu": ("nn.SiLU", {}),
    "hardswish": ("nn.Hardswish", {}),
    "tanh": ("nn.Tanh", {}),
    "gelu": ("nn.GELU", {}),
    "gelu_tanh": ("F.gelu", dict(approximate="tanh")),
}
ACTIVATION_INPUT = (1, 64, 112, 112)

# Elementwise chains for fused-vs-unfused: (type, params, expr or None, which operands feed it).
# "@x"/"@y" are the model inputs; "prev" is the previous op's output.
CHAIN_CASES = {
    # ResNet's block tail: relu(conv_out + identity)
    "residual_relu": [
        ("pnnx.Expression", {}, "add(@0,@1)", ("@x", "@y")),
        ("nn.ReLU", {}, None, ("prev",)),
    ],
    # five ops, two of them reading the block input again
    "five_op_chain": [
        ("pnnx.Expression", {}, "add(@0,@1)", ("@x", "@y")),
        ("nn.ReLU", {}, None, ("prev",)),
        ("pnnx.Expression", {}, "sub(mul(@0,2.0),0.5)", ("prev",)),
        ("F.relu", {}, None, ("prev",)),
        ("pnnx.Expression", {}, "add(mul(@0,0.25),@1)", ("prev", "@x")),
    ],
}
CHAIN_INPUT = (1, 64, 56, 56)


# -- writing PNNX files ---------------------------------------------------------------------------
@dataclass
class OpLine:
    type: str
    name: str
    inputs: list[str]
    outputs: list[str]
    params: dict = field(default_factory=dict)
    weights: dict = field(default_factory=dict)  # attr name -> float32 array
    keyed: dict = field(default_factory=dict)  # input operand -> $key


def format_value(value) -> str:
    """A param value as pnnx writes it: (1,1), True, None, 0.1, nearest."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if value is None:
        return "None"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (tuple, list)):
        return "(" + ",".join(format_value(v) for v in value) + ")"
    return str(value)


def format_shape(shape) -> str:
    return "(" + ",".join("?" if d is None else str(d) for d in shape) + ")f32"


def param_text(ops: list[OpLine], shapes: dict[str, tuple]) -> str:
    operands = {o for op in ops for o in op.inputs + op.outputs}
    lines = ["7767517", f"{len(ops)} {len(operands)}"]
    for op in ops:
        items = [f"{k}={format_value(v)}" for k, v in sorted(op.params.items())]
        items += [f"@{k}={format_shape(w.shape)}" for k, w in sorted(op.weights.items())]
        items += [f"${key}={operand}" for operand, key in op.keyed.items()]
        items += [f"#{o}={format_shape(shapes[o])}" for o in op.inputs + op.outputs if o in shapes]
        head = f"{op.type:<24} {op.name:<24} {len(op.inputs)} {len(op.outputs)}"
        lines.append(" ".join([head, *op.inputs, *op.outputs, *items]))
    return "\n".join(lines) + "\n"


def write_pnnx(folder: Path, ops: list[OpLine], shapes: dict[str, tuple]) -> Path:
    """Write ``folder/model.pnnx.param`` + ``.bin``; skip the write when the same model is already there."""
    text = param_text(ops, shapes)
    blobs = [(f"{op.name}.{k}", np.ascontiguousarray(w, dtype="<f4").tobytes())
             for op in ops for k, w in sorted(op.weights.items())]
    digest = hashlib.sha256(text.encode() + b"".join(name.encode() + data for name, data in blobs)).hexdigest()
    folder.mkdir(parents=True, exist_ok=True)
    param, weights, stamp = folder / "model.pnnx.param", folder / "model.pnnx.bin", folder / "sha256"
    if stamp.exists() and stamp.read_text() == digest and param.exists() and weights.exists():
        return param
    # Write to temporaries and rename, so a concurrent reader never sees half a file.
    tmp_suffix = f".tmp{os.getpid()}"
    with zipfile.ZipFile(str(weights) + tmp_suffix, "w", compression=zipfile.ZIP_STORED) as archive:
        for name, data in blobs:
            archive.writestr(name, data)
    Path(str(param) + tmp_suffix).write_text(text)
    os.replace(str(weights) + tmp_suffix, weights)
    os.replace(str(param) + tmp_suffix, param)
    stamp.write_text(digest)
    return param


def _io_ops(first_input_shapes: list[tuple], body: list[OpLine], output: str) -> list[OpLine]:
    inputs = [OpLine("pnnx.Input", f"pnnx_input_{i}", [], [f"in{i}"]) for i in range(len(first_input_shapes))]
    return inputs + body + [OpLine("pnnx.Output", "pnnx_output_0", [output], [])]


def _he_normal(rng, shape, fan_in: int) -> np.ndarray:
    return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)


def conv_model(case: str) -> tuple[list[OpLine], dict]:
    cin, cout, k, stride, pad, groups, dilation = CONV_CASES[case]
    n, _, h, w = CONV_INPUT
    rng = np.random.default_rng(0)
    transposed = case.startswith("transposed")
    if transposed:
        out_hw = [(s - 1) * stride - 2 * pad + dilation * (k - 1) + 1 for s in (h, w)]
        weight = _he_normal(rng, (cin, cout // groups, k, k), cin * k * k // stride ** 2)
        params = dict(bias=True, dilation=(dilation, dilation), groups=groups, in_channels=cin,
                      kernel_size=(k, k), out_channels=cout, output_padding=(0, 0), padding=(pad, pad),
                      stride=(stride, stride))
        op_type = "nn.ConvTranspose2d"
    else:
        out_hw = [(s + 2 * pad - dilation * (k - 1) - 1) // stride + 1 for s in (h, w)]
        weight = _he_normal(rng, (cout, cin // groups, k, k), cin // groups * k * k)
        params = dict(bias=True, dilation=(dilation, dilation), groups=groups, in_channels=cin,
                      kernel_size=(k, k), out_channels=cout, padding=(pad, pad), padding_mode="zeros",
                      stride=(stride, stride))
        op_type = "nn.Conv2d"
    bias = (rng.standard_normal(cout) * 0.1).astype(np.float32)
    shapes = {"in0": CONV_INPUT, "out": (n, cout, *out_hw)}
    body = [OpLine(op_type, "op", ["in0"], ["out"], params, {"bias": bias, "weight": weight})]
    return _io_ops([CONV_INPUT], body, "out"), shapes


def pool_model(case: str) -> tuple[list[OpLine], dict]:
    op_type, params, shape = POOL_CASES[case]
    n, c, h, w = shape
    if op_type == "nn.AdaptiveAvgPool2d":
        out_hw = list(params["output_size"])
    else:
        (kh, kw), (sh, sw), (ph, pw) = params["kernel_size"], params["stride"], params["padding"]
        out_hw = [(h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1]
    shapes = {"in0": shape, "out": (n, c, *out_hw)}
    return _io_ops([shape], [OpLine(op_type, "op", ["in0"], ["out"], dict(params))], "out"), shapes


def activation_model(case: str) -> tuple[list[OpLine], dict]:
    op_type, params = ACTIVATION_CASES[case]
    shapes = {"in0": ACTIVATION_INPUT, "out": ACTIVATION_INPUT}
    keyed = {"in0": "input"} if op_type.startswith("F.") else {}
    body = [OpLine(op_type, "op", ["in0"], ["out"], dict(params), keyed=keyed)]
    return _io_ops([ACTIVATION_INPUT], body, "out"), shapes


def chain_model(case: str) -> tuple[list[OpLine], dict]:
    shapes = {"in0": CHAIN_INPUT, "in1": CHAIN_INPUT}
    names = {"@x": "in0", "@y": "in1"}
    body, prev = [], None
    for index, (op_type, params, expr, sources) in enumerate(CHAIN_CASES[case]):
        inputs = [prev if s == "prev" else names[s] for s in sources]
        out = f"t{index}"
        shapes[out] = CHAIN_INPUT
        params = dict(params, expr=expr) if expr is not None else dict(params)
        keyed = {inputs[0]: "input"} if op_type.startswith("F.") else {}
        body.append(OpLine(op_type, f"op{index}", inputs, [out], params, keyed=keyed))
        prev = out
    return _io_ops([CHAIN_INPUT, CHAIN_INPUT], body, prev), shapes


BUILDERS = {"conv": conv_model, "pool": pool_model, "activation": activation_model, "chain": chain_model}


def write_case(kind: str, case: str, root: Path) -> Path:
    """Write one case under ``root/<kind>_<case>/`` and return its param path."""
    ops, shapes = BUILDERS[kind](case)
    return write_pnnx(root / f"{kind}_{case}", ops, shapes)
