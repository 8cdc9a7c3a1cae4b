"""Shared helpers: where models come from, backends to parametrise over, skipping with a reason.

asv treats ``NotImplementedError`` raised in ``setup`` as "skipped", so every
reason a benchmark cannot run here (a full-size model not generated, an op type
not registered yet, a backend unavailable) becomes one with a message that says
what to do.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

import kuiper

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "models"
FULL_FIXTURES = ROOT / "build" / "fixtures-full"
# Generated single-op models; KUIPER_BENCH_CACHE moves them (e.g. to a RAM disk).
CACHE = Path(os.environ.get("KUIPER_BENCH_CACHE", Path(tempfile.gettempdir()) / "kuiper-asv-models"))


def available_backends() -> list[str]:
    """Backend names that can run on this machine (asv params are fixed at import time)."""
    names = [info.name for info in kuiper.backends() if info.available]
    return names or ["numpy"]


def model_param(name: str) -> Path:
    """A checked-in fixture, else a full-size one from build/fixtures-full/; skip when it is absent."""
    for folder in (FIXTURES / name, FULL_FIXTURES / name):
        param = folder / "model.pnnx.param"
        if param.exists():
            return param
    raise NotImplementedError(
        f"model '{name}' not found: create it with `python3 tools/make_fixtures.py {name} --keep-peers` "
        f"(needs torch + pnnx; writes {FULL_FIXTURES.relative_to(ROOT)}/{name}/)"
    )


def load_or_skip(param: Path, backend: str, fuse: bool = True, threads: int | None = None):
    """kuiper.load, turning "this op or param is not implemented yet" into a skip."""
    try:
        return kuiper.load(param, backend=backend, fuse=fuse, threads=threads)
    except kuiper.UnsupportedOperatorError as exc:
        raise NotImplementedError(f"not supported by kuiper yet: {exc}") from None
    except kuiper.BackendUnavailableError as exc:
        raise NotImplementedError(str(exc)) from None


def device_inputs(model, batch: int, seed: int = 0) -> list:
    """Seeded inputs of the model's declared shapes at ``batch``, already on the model's backend."""
    rng = np.random.default_rng(seed)
    arrays = []
    for spec in model.inputs:
        shape = (batch,) + tuple(spec.shape[1:])
        host = rng.standard_normal(shape).astype(spec.dtype or "float32")
        arrays.append(model.backend.asarray(host))
    return arrays


def run_once(model, inputs):
    """One forward pass, waiting for asynchronous backends so the time is the compute time."""
    outputs = model(*inputs)
    model.backend.synchronize()
    return outputs
