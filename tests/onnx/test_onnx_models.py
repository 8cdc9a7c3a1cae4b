"""Real networks exported by torch.onnx (tools/make_onnx_fixtures.py) give PyTorch's outputs through kuiper.

Tolerance: every fixture's, conftest.assert_close_to_pytorch: 1e-4 max abs error for outputs up to 10,
1e-5 of the largest output above (the detector's decoded boxes reach about 1,500).
The same files load from a path, from bytes and from an onnx.ModelProto, and ``kuiper run``/``info`` read them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import kuiper
from kuiper.cli import main

from conftest import assert_close_to_pytorch

onnx = pytest.importorskip("onnx")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "onnx"
# The ViT block, the YOLOv5-style detector and the UNet are opset-20 exports whose free batch reaches
# Reshape, Expand and Resize targets through Shape (kuiper/onnx/partial_shapes.py).
NAMES = ("resnet_basic", "mobilenet_v2", "vit_block", "yolov5_style", "unet")
TOLERANCE = 1e-4


@pytest.mark.parametrize("name", NAMES)
def test_exported_network_matches_pytorch_at_two_batch_sizes(name):
    reference = np.load(FIXTURES / name / "ref.npz")
    model = kuiper.load(FIXTURES / name / "model.onnx")
    for batch in (1, 3):
        got = model(reference[f"b{batch}_input"], to_numpy=True)
        assert_close_to_pytorch(got, reference[f"b{batch}_output"], f"{name} batch {batch}")


def test_a_model_loads_from_bytes_and_from_a_model_proto_alike():
    path = FIXTURES / "resnet_basic" / "model.onnx"
    reference = np.load(FIXTURES / "resnet_basic" / "ref.npz")
    x, want = reference["b1_input"], reference["b1_output"]
    for source in (path.read_bytes(), onnx.load(path), open(path, "rb")):
        got = kuiper.load(source)(x, to_numpy=True)
        assert float(np.abs(got - want).max()) <= TOLERANCE, type(source).__name__


def test_the_batch_dim_stays_free():
    model = kuiper.load(FIXTURES / "resnet_basic" / "model.onnx")
    assert model.inputs[0].shape[0] is None
    assert model.inputs[0].shape[1:] == (3, 32, 32)


def test_cli_runs_and_describes_an_onnx_file(tmp_path, capsys):
    path = FIXTURES / "mobilenet_v2" / "model.onnx"
    reference = np.load(FIXTURES / "mobilenet_v2" / "ref.npz")
    np.save(tmp_path / "x.npy", reference["b1_input"])
    assert main(["run", str(path), "-i", str(tmp_path / "x.npy"), "-o", str(tmp_path / "y.npy")]) == 0
    assert float(np.abs(np.load(tmp_path / "y.npy") - reference["b1_output"]).max()) <= TOLERANCE
    capsys.readouterr()
    assert main(["info", str(path)]) == 0
    assert "onnx" in capsys.readouterr().out
