"""Weights that reach a matmul are aligned, however the .pnnx.bin placed them.

pnnx's zip entries start at arbitrary byte offsets, so a memory-mapped float32 weight
may not even be 4-byte aligned; NumPy's matmul then silently skips BLAS.  These models
put their weights at odd offsets (an entry's data starts 30 + len(name) bytes into the
file) and a spy on ``matmul`` fails the test if any misaligned operand reaches it.
"""

from __future__ import annotations

import struct
import zipfile

import numpy as np
import pytest

import kuiper
from kuiper import onednn
from kuiper.backends.numpy_backend import WEIGHT_ALIGNMENT, NumpyBackend
from kuiper.formats.pnnx_bin import WeightArchive

from conftest import write_model
from test_ops_activation import one_op


@pytest.fixture
def matmul_operands(monkeypatch):
    """Every ndarray operand of a matmul, through the backend's namespace or NumPy itself
    (the compiled CPU kernels call np.matmul directly), as it was passed."""
    seen = []
    xp = NumpyBackend.xp
    real = np.matmul

    def spy(a, b, *args, **kwargs):
        seen.extend(v for v in (a, b) if isinstance(v, np.ndarray))
        return real(a, b, *args, **kwargs)

    monkeypatch.setattr(xp, "matmul", spy)
    monkeypatch.setattr(np, "matmul", spy)
    return seen


def check_weight_was_misaligned_in_the_file(model_dir, shape, entry="op.weight"):
    """The test means something only if '@weight' starts at a misaligned offset in the file;
    the loader reads it into a 64-byte-aligned buffer of its own."""
    path = next(model_dir.glob("*.pnnx.bin"))
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(entry)
    with open(path, "rb") as handle:
        handle.seek(info.header_offset + 26)
        name_length, extra_length = struct.unpack("<HH", handle.read(4))
    assert (info.header_offset + 30 + name_length + extra_length) % 4 != 0
    assert WeightArchive(path).read(entry, shape, "f32").ctypes.data % WEIGHT_ALIGNMENT == 0


CASES = {
    "linear": ("nn.Linear", {"bias": True, "in_features": 6, "out_features": 5}, (2, 4, 6),
               {"weight": (5, 6), "bias": (5,)}),
    "conv3x3_im2col": ("nn.Conv2d", {"bias": True, "stride": 2, "padding": 1}, (2, 3, 7, 7),
                       {"weight": (4, 3, 3, 3), "bias": (4,)}),
    "conv1x1_pointwise": ("nn.Conv2d", {"bias": True}, (1, 3, 5, 5), {"weight": (4, 3, 1, 1), "bias": (4,)}),
    "conv1d": ("nn.Conv1d", {"bias": True}, (2, 3, 9), {"weight": (4, 3, 3), "bias": (4,)}),
    "conv_transpose": ("nn.ConvTranspose2d", {"bias": True, "stride": 2}, (1, 3, 4, 4),
                       {"weight": (3, 4, 3, 3), "bias": (4,)}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_no_misaligned_weight_reaches_matmul(tmp_path, case, matmul_operands, monkeypatch):
    monkeypatch.setattr(onednn, "library", lambda: None)  # the convs' matmul paths (oneDNN copies the weight)
    op_type, params, x_shape, weight_shapes = CASES[case]
    rng = np.random.default_rng(0)
    weights = {k: rng.standard_normal(s).astype(np.float32) for k, s in weight_shapes.items()}
    x = rng.standard_normal(x_shape).astype(np.float32)
    (got,), _ = one_op(tmp_path, op_type, [x], params, weights=weights)
    check_weight_was_misaligned_in_the_file(tmp_path, weight_shapes["weight"])
    assert matmul_operands, "the op should compute through matmul"
    misaligned = [a.shape for a in matmul_operands if not a.flags.aligned]
    assert not misaligned, f"misaligned matmul operands: {misaligned}"
    assert np.isfinite(got).all()


def test_aligned_copies_only_a_misaligned_array():
    backend = NumpyBackend()
    raw = np.zeros(4 * 10 + 1, dtype=np.uint8)
    odd = raw[1:].view(np.float32) if raw[1:].ctypes.data % 4 else raw[2:42].view(np.float32)
    odd[...] = np.arange(odd.size)
    fixed = backend.aligned(odd)
    assert fixed.ctypes.data % WEIGHT_ALIGNMENT == 0
    np.testing.assert_array_equal(fixed, np.arange(odd.size, dtype=np.float32))
    assert backend.aligned(fixed) is fixed


def test_aligned_linear_matches_its_definition(tmp_path):
    rng = np.random.default_rng(1)
    weight, bias, x = rng.standard_normal((5, 6)), rng.standard_normal(5), rng.standard_normal((3, 6))
    weights = {"weight": weight.astype(np.float32), "bias": bias.astype(np.float32)}
    (got,), _ = one_op(tmp_path, "nn.Linear", [x.astype(np.float32)], {"bias": True}, weights=weights)
    np.testing.assert_allclose(got, x @ weight.T + bias, atol=1e-5)


def test_a_loaded_linear_keeps_its_weight_on_a_64_byte_boundary(tmp_path):
    weight = np.ones((5, 6), np.float32)
    _, model = one_op(tmp_path, "nn.Linear", [np.ones((1, 6), np.float32)], {"bias": False}, weights={"weight": weight})
    (step,) = model.steps
    assert step.op.weight_t.ctypes.data % WEIGHT_ALIGNMENT == 0


def test_a_constant_feeding_torch_matmul_is_aligned(tmp_path, matmul_operands):
    """pnnx.Attribute -> torch.matmul (a weight pnnx folded into a constant) must reach BLAS aligned too."""
    rng = np.random.default_rng(2)
    weight, x = rng.standard_normal((6, 5)).astype(np.float32), rng.standard_normal((3, 6)).astype(np.float32)
    text = ("7767517\n4 3\npnnx.Input in0 0 1 x\npnnx.Attribute op 0 1 w @data=(6,5)f32\n"
            "torch.matmul mm 2 1 x w y $input=x $other=w\npnnx.Output out0 1 0 y\n")
    param = write_model(tmp_path, text, {"op.data": weight.tobytes()})
    check_weight_was_misaligned_in_the_file(tmp_path, (6, 5), entry="op.data")
    got = kuiper.to_numpy(kuiper.load(param)(x))
    assert not [a.shape for a in matmul_operands if not a.flags.aligned]
    np.testing.assert_allclose(got, x.astype(np.float64) @ weight, atol=1e-5)
