"""The files and inputs of a benchmark: the model, the peer files beside it, seeded random inputs."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..formats.pnnx import neutral_ir
from ..formats.pnnx_param import parse_param
from ..frontends import model_in_folder
from ..graph.model import TensorSpec
from ..limits import check_size


def resolve_param(model: str | os.PathLike) -> Path:
    """MODEL may be the .pnnx.param file or a folder holding one (``frontends.model_in_folder``)."""
    path = Path(model)
    if path.is_dir():
        path = model_in_folder(path, "pnnx")
    if not path.exists():
        raise InputError(f"{path}: model file not found")
    return path


def peer_file(param: Path, suffix: str) -> Path:
    """``x/model.pnnx.param`` -> ``x/model{suffix}``: where pnnx and tools/make_fixtures.py put peers."""
    name = param.name
    stem = name[: -len(".pnnx.param")] if name.endswith(".pnnx.param") else param.stem
    return param.with_name(stem + suffix)


def random_inputs(specs, batch: int, seed: int = 0) -> list[np.ndarray]:
    """Seeded standard-normal inputs of the declared shapes, dim 0 ``batch`` where the model leaves it free
    (PNNX's batch dim); a dim 0 the model fixes (an HLO parameter, a weight JAX passes) is kept."""
    rng = np.random.default_rng(seed)
    arrays = []
    for spec in specs:
        if spec.shape is None or any(d is None for d in spec.shape[1:]):
            raise InputError(f"input '{spec.name}' has unknown dims {spec}; pass real inputs instead of random ones")
        shape = ((batch if spec.shape[0] is None else spec.shape[0]),) + tuple(spec.shape[1:]) if spec.shape else ()
        check_size(shape, np.dtype(spec.dtype or "float32").itemsize, f"random input '{spec.name}' at batch {batch}")
        arrays.append(rng.standard_normal(shape).astype(spec.dtype or "float32"))
    return arrays


def input_specs(param: Path) -> list[TensorSpec]:
    """The model's declared inputs, from the param text alone (no weights read)."""
    parsed = parse_param(param.read_text(), str(param))
    ir = neutral_ir(parsed.ops, parsed.operands, str(param))
    specs = []
    for operand in ir.inputs:
        info = ir.operands.get(operand)
        specs.append(TensorSpec(operand, info.shape if info else None, info.dtype if info else None))
    return specs
