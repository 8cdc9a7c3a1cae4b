"""The plugin's op, found through the entry point, against PyTorch outputs saved by tools/make_fixture.py."""

from pathlib import Path

import numpy as np
import pytest

import kuiper
from kuiper.plugins import op_registry

FIXTURES = Path(__file__).parent / "fixtures"


def test_op_is_registered_by_this_plugin_through_its_entry_point():
    registered = op_registry()["example.layers.ScaledTanh"]
    assert registered.plugin == "scaled_tanh"  # the entry-point name in setup.cfg


@pytest.mark.parametrize("batch", ["b1", "b3"])
def test_model_with_custom_module_matches_pytorch(batch):
    ref = np.load(FIXTURES / "scaled_tanh_ref.npz")
    model = kuiper.load(FIXTURES / "scaled_tanh.pnnx.param")
    out = kuiper.to_numpy(model(ref[f"{batch}_input0"]))
    np.testing.assert_allclose(out, ref[f"{batch}_output0"], atol=1e-5, rtol=0)


def test_mismatched_weights_are_reported_with_the_op_name(tmp_path):
    param = (FIXTURES / "scaled_tanh.pnnx.param").read_text().replace("@beta=(4)f32", "@beta=(2,2)f32")
    (tmp_path / "m.pnnx.param").write_text(param)
    (tmp_path / "m.pnnx.bin").write_bytes((FIXTURES / "scaled_tanh.pnnx.bin").read_bytes())
    with pytest.raises(kuiper.ModelFormatError, match="'act'"):
        kuiper.load(tmp_path / "m.pnnx.param")
