"""The engine's own cost per call (issue 44): models whose arithmetic is negligible at batch 1, one thread.

``mlp64`` (64 x Linear(32, 32) + ReLU) and ``convbn24`` (24 x Conv2d(8, 8, 3, padding=1) + ReLU,
the batch norms as pnnx folds them) are written here as PNNX text from seeded NumPy weights, so
they always run.  ``transformer4`` (nn.TransformerEncoder, 4 layers, d_model 32, 4 tokens) and the
same models as PyTorch and ONNX Runtime run them come from ``python3 tools/make_overhead_models.py``
(build/overhead-models/; compare with ``kuiper bench build/overhead-models/NAME --threads 1``).
Each runs with the execution providers on and off (``kuiper.load(..., providers=False)``).
"""

from __future__ import annotations

import numpy as np

import kuiper

from .common import CACHE, ROOT, run_once

OVERHEAD_MODELS = ROOT / "build" / "overhead-models"


def _write(name: str, lines: list[str], weights: dict[str, np.ndarray]):
    import zipfile

    folder = CACHE / "overhead" / name
    folder.mkdir(parents=True, exist_ok=True)
    param = folder / "model.pnnx.param"
    operands = len({word for line in lines for word in line.split()[4:] if "=" not in word})
    param.write_text(f"7767517\n{len(lines)} {operands}\n" + "\n".join(lines) + "\n")
    with zipfile.ZipFile(folder / "model.pnnx.bin", "w", zipfile.ZIP_STORED) as archive:
        for key, value in weights.items():
            archive.writestr(key, np.asarray(value, "<f4").tobytes())
    return param


def mlp64():
    rng = np.random.default_rng(0)
    lines, weights = ["pnnx.Input in0 0 1 v0 #v0=(1,32)f32"], {}
    for i in range(64):
        lines.append(f"nn.Linear fc{i} 1 1 v{2 * i} v{2 * i + 1} bias=True in_features=32 out_features=32 "
                     "@weight=(32,32)f32 @bias=(32)f32")
        lines.append(f"nn.ReLU act{i} 1 1 v{2 * i + 1} v{2 * i + 2}")
        weights[f"fc{i}.weight"] = rng.uniform(-0.18, 0.18, (32, 32))
        weights[f"fc{i}.bias"] = rng.uniform(-0.18, 0.18, 32)
    lines.append("pnnx.Output out0 1 0 v128")
    return _write("mlp64", lines, weights)


def convbn24():
    rng = np.random.default_rng(0)
    lines, weights = ["pnnx.Input in0 0 1 v0 #v0=(1,8,8,8)f32"], {}
    for i in range(24):
        lines.append(f"nn.Conv2d conv{i} 1 1 v{2 * i} v{2 * i + 1} bias=True dilation=(1,1) groups=1 "
                     "in_channels=8 kernel_size=(3,3) out_channels=8 padding=(1,1) padding_mode=zeros "
                     "stride=(1,1) @weight=(8,8,3,3)f32 @bias=(8)f32")
        lines.append(f"nn.ReLU act{i} 1 1 v{2 * i + 1} v{2 * i + 2}")
        weights[f"conv{i}.weight"] = rng.uniform(-0.2, 0.2, (8, 8, 3, 3))
        weights[f"conv{i}.bias"] = rng.uniform(-0.2, 0.2, 8)
    lines.append("pnnx.Output out0 1 0 v48")
    return _write("convbn24", lines, weights)


def _param(name: str):
    if name == "mlp64":
        return mlp64()
    if name == "convbn24":
        return convbn24()
    param = OVERHEAD_MODELS / name / "model.pnnx.param"
    if not param.exists():
        raise NotImplementedError(f"{param} not found: create it with `python3 tools/make_overhead_models.py {name}` "
                                  "(needs torch + pnnx)")
    return param


class CallOverhead:
    """One call at batch 1 on one thread, warm."""

    params = (["mlp64", "convbn24", "transformer4"], [True, False])
    param_names = ("model", "providers")

    def setup(self, name, providers):
        self.model = kuiper.load(_param(name), threads=1, providers=providers)
        spec = self.model.inputs[0]
        shape = (1,) + tuple(spec.shape[1:])
        self.x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        run_once(self.model, [self.x])

    def time_call(self, name, providers):
        self.model(self.x)
