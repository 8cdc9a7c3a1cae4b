"""Flax programs as JAX runs them: the weights passed as arguments at every call.

``data/flax_*.hlo.txt.gz`` are the texts ``tools/bench_flax_models.py --save-hlo`` writes (jitted
``model.apply`` lowered to HLO before XLA's passes): MLP, CNN, ResNet-18, ViT-Ti, GPT-2 blocks, an
LSTM, U-Net, MobileNet, a top-2 mixture of experts, fori_loop + while_loop.  The weights are
ENTRY parameters, so the files hold no numbers; here they are seeded random arrays of the declared
shapes.  Only kuiper is timed (asv's environment has no jax): the ratios against XLA come from
the tool, both engines interleaved in one process (docs/performance.md).
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

import kuiper

from .common import run_once

DATA = Path(__file__).resolve().parent / "data"
PROGRAMS = sorted(path.name[len("flax_"):-len(".hlo.txt.gz")] for path in DATA.glob("flax_*.hlo.txt.gz"))


def program_inputs(model, seed: int = 0) -> list[np.ndarray]:
    """Seeded arrays of the parameters' shapes: small normal floats, integers in [0, 8) (token ids)."""
    rng = np.random.default_rng(seed)
    arrays = []
    for spec in model.inputs:
        if spec.dtype and spec.dtype.startswith(("int", "uint")):
            arrays.append(rng.integers(0, 8, spec.shape).astype(spec.dtype))
        else:
            arrays.append((rng.standard_normal(spec.shape) * 0.05).astype(spec.dtype or "float32"))
    return arrays


class FlaxPrograms:
    """One call of each program with its weights passed, on one thread (as services call small models)."""

    params = (PROGRAMS,)
    param_names = ("program",)
    number = 1
    warmup_time = 0.5
    timeout = 300

    def setup(self, program):
        text = gzip.decompress((DATA / f"flax_{program}.hlo.txt.gz").read_bytes()).decode()
        self.model = kuiper.load_hlo(text, threads=1)
        self.inputs = program_inputs(self.model)
        run_once(self.model, self.inputs)

    def time_call(self, program):
        run_once(self.model, self.inputs)
