"""Every fixture a provider claims steps of computes, with the provider, what its ops compute without it.

The fixtures' PyTorch references hold the default (providers on) to PyTorch already
(test_models.py, fused and unfused); this compares the partitions with the reference ops
themselves at every batch a fixture saves.  Only fused graphs have partitions today: the dense
chains are Linear layers whose activations are their epilogues, which fusion gives them.
"""

import numpy as np

import kuiper
from kuiper.graph.providers import PARTITION_TYPE

from conftest import MODELS, reference_batches

FIXTURE_NAMES = sorted(p.name for p in MODELS.iterdir() if (p / "model.pnnx.param").exists())


def _claimed(model) -> list:
    return [step.node for step in model.steps if step.node.type == PARTITION_TYPE]


def test_partitions_compute_what_the_ops_compute_on_every_fixture():
    claimed = {}
    for name in FIXTURE_NAMES:
        param = MODELS / name / "model.pnnx.param"
        with_providers = kuiper.load(param, backend="numpy")
        partitions = _claimed(with_providers)
        if not partitions:
            continue
        claimed[name] = [node.params["provider"] for node in partitions]
        by_ops = kuiper.load(param, backend="numpy", providers=False)
        assert not _claimed(by_ops)
        for batch, data in reference_batches(name).items():
            got, want = with_providers(*data["inputs"]), by_ops(*data["inputs"])
            for index, (g, w) in enumerate(zip(*(v if isinstance(v, tuple) else (v,) for v in (got, want)))):
                scale = max(1.0, float(np.max(np.abs(w))))
                np.testing.assert_allclose(g, w, rtol=0, atol=2e-5 * scale,
                                           err_msg=f"{name} {batch} output {index} ({claimed[name]})")
    # Not a vacuous pass: the dense chains of the MLP and transformer fixtures are claimed.
    assert len(claimed) >= 3, f"fixtures with partitions: {claimed}"
