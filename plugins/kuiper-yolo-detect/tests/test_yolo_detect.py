"""The plugin's models.yolo.Detect op, found through its entry point.

Checked against PyTorch outputs saved by tools/make_fixture.py, against values worked out
by hand, and for clear errors on bad weights.

Tolerance: 1e-4 max abs error, except the box columns whose magnitude exceeds 10 (pixel
coordinates and sizes, up to a few hundred): there 1e-5 relative to the PyTorch value,
stricter than 1e-3 relative, because float32 rounding scales with the value.
"""

import zipfile
from pathlib import Path

import numpy as np
import pytest

import kuiper
from kuiper.plugins import op_registry
from kuiper.testing import backend_params

FIXTURES = Path(__file__).parent / "fixtures"
PARAM = FIXTURES / "yolo_detect.pnnx.param"
BIN = FIXTURES / "yolo_detect.pnnx.bin"


def assert_matches(got, want, where):
    got = kuiper.to_numpy(got).astype(np.float64)
    assert got.shape == want.shape, f"{where}: shape {got.shape} != {want.shape}"
    allowed = np.where(np.abs(want) > 10, 1e-5 * np.abs(want), 1e-4)
    error = np.abs(got - want)
    worst = np.unravel_index(np.argmax(error - allowed), error.shape)
    assert np.all(error <= allowed), f"{where}: error {error[worst]:.3g} > {allowed[worst]:.3g} at {worst}"


def test_op_is_registered_by_this_plugin_through_its_entry_point():
    registered = op_registry()["models.yolo.Detect"]
    assert registered.plugin == "yolo_detect"  # the entry-point name in setup.cfg


@pytest.mark.parametrize("backend", backend_params())
@pytest.mark.parametrize("batch", ["b1", "b3"])
def test_exported_detector_matches_pytorch(batch, backend):
    ref = np.load(FIXTURES / "yolo_detect_ref.npz")
    model = kuiper.load(PARAM, backend=backend)
    out = model(ref[f"{batch}_input0"])
    assert_matches(out, ref[f"{batch}_output0"], f"yolo_detect {batch}")


def test_scores_are_probabilities_and_boxes_have_positive_size():
    ref = np.load(FIXTURES / "yolo_detect_ref.npz")
    out = kuiper.to_numpy(kuiper.load(PARAM)(ref["b3_input0"]))
    assert out.shape == (3, 3 * (8 * 12 + 4 * 6 + 2 * 3), 8)  # na * sum(ny * nx) rows, nc + 5 columns
    assert np.all((out[..., 4:] >= 0) & (out[..., 4:] <= 1))
    assert np.all(out[..., 2:4] >= 0)


# ------------------------------------------------------------ a hand-written one-op model


def write_detect_model(tmp_path, weights, channels=(4,), declared_channels=True):
    """pnnx.Input per level -> models.yolo.Detect -> pnnx.Output, with the given weights.

    ``declared_channels=False`` declares the inputs' channel dim as ``?``, so that feeding a
    wrong channel count reaches the op instead of being stopped by the model's input check.
    """
    nl = len(channels)
    lines = ["7767517", f"{nl + 2} {nl + 1}"]
    for i, c in enumerate(channels):
        lines.append(f"pnnx.Input in{i} 0 1 x{i} #x{i}=(1,{c if declared_channels else '?'},2,3)f32")
    decls = " ".join(f"@{key}=({','.join(map(str, value.shape))})f32" for key, value in sorted(weights.items()))
    inputs = " ".join(f"x{i}" for i in range(nl))
    lines.append(f"models.yolo.Detect detect {nl} 1 {inputs} y {decls}")
    lines.append("pnnx.Output out 1 0 y")
    param = tmp_path / "detect.pnnx.param"
    param.write_text("\n".join(lines) + "\n")
    with zipfile.ZipFile(tmp_path / "detect.pnnx.bin", "w", zipfile.ZIP_STORED) as archive:
        for key, value in weights.items():
            archive.writestr(f"detect.{key}", np.ascontiguousarray(value, dtype="<f4").tobytes())
    return param


def one_level_weights(na=1, no=6, channels=4):
    return {
        "anchors": np.array([[[1.5, 2.0]]] * na, dtype=np.float32).reshape(1, na, 2),
        "stride": np.array([8.0], dtype=np.float32),
        "m.0.weight": np.zeros((na * no, channels, 1, 1), dtype=np.float32),
        "m.0.bias": np.zeros((na * no,), dtype=np.float32),
    }


def test_zero_logits_give_cell_centres_and_anchor_sizes(tmp_path):
    # Zero conv weights and bias: every sigmoid is 0.5, so by the YOLOv5 equations
    # x = (0.5*2 + gx - 0.5) * 8 = (gx + 0.5) * 8, w = (0.5*2)**2 * 1.5 * 8 = 12, h = 16.
    model = kuiper.load(write_detect_model(tmp_path, one_level_weights()))
    out = kuiper.to_numpy(model(np.random.default_rng(0).standard_normal((2, 4, 2, 3), dtype=np.float32)))
    rows = [(gx, gy) for gy in range(2) for gx in range(3)]  # row-major over (ny, nx)
    want = np.array([[(gx + 0.5) * 8, (gy + 0.5) * 8, 12.0, 16.0, 0.5, 0.5] for gx, gy in rows], dtype=np.float32)
    np.testing.assert_allclose(out, np.stack([want, want]), rtol=0, atol=1e-6)


def test_wrong_input_channels_are_a_shape_error(tmp_path):
    model = kuiper.load(write_detect_model(tmp_path, one_level_weights(), declared_channels=False))
    with pytest.raises(kuiper.ShapeError, match=r"'detect'.*\(N, 4, H, W\)"):
        model(np.zeros((1, 5, 2, 3), dtype=np.float32))


def test_missing_stride_is_reported(tmp_path):
    weights = one_level_weights()
    del weights["stride"]
    with pytest.raises(kuiper.ModelFormatError, match=r"'detect'.*@stride"):
        kuiper.load(write_detect_model(tmp_path, weights))


def test_level_without_conv_weight_is_reported(tmp_path):
    weights = one_level_weights()
    weights["anchors"] = np.ones((2, 1, 2), dtype=np.float32)  # says two levels
    weights["stride"] = np.array([8.0, 16.0], dtype=np.float32)
    with pytest.raises(kuiper.ModelFormatError, match=r"'detect'.*@m\.1\.weight"):
        kuiper.load(write_detect_model(tmp_path, weights, channels=(4, 4)))


def test_inputs_must_match_the_number_of_levels(tmp_path):
    with pytest.raises(kuiper.ModelFormatError, match="'detect'.*expects 1 input"):
        kuiper.load(write_detect_model(tmp_path, one_level_weights(), channels=(4, 4)))


# ------------------------------------------------------------ the exported file, corrupted


def corrupted_copy(tmp_path, old, new):
    """The fixture with one weight declaration changed (same byte count, so the loader accepts it)."""
    text = PARAM.read_text()
    assert old in text
    (tmp_path / "m.pnnx.param").write_text(text.replace(old, new))
    (tmp_path / "m.pnnx.bin").write_bytes(BIN.read_bytes())
    return tmp_path / "m.pnnx.param"


@pytest.mark.parametrize("old, new, message", [
    ("@anchors=(3,3,2)f32", "@anchors=(3,6)f32", r"'@anchors' must have shape \(nl, na, 2\)"),
    ("@stride=(3)f32", "@stride=(1,3)f32", r"'@stride' must have shape \(3,\)"),
    ("@m.1.weight=(24,12,1,1)f32", "@m.1.weight=(24,6,2,1)f32", r"'@m\.1\.weight' must be a 1x1 conv"),
    ("@m.1.weight=(24,12,1,1)f32", "@m.1.weight=(12,24,1,1)f32", r"gives 4 outputs per anchor"),
    ("@m.2.bias=(24)f32", "@m.2.bias=(2,12)f32", r"'@m\.2\.bias' must have shape \(24,\)"),
])
def test_bad_weights_are_reported_with_the_op_name(tmp_path, old, new, message):
    with pytest.raises(kuiper.ModelFormatError, match=r"op 'detect' of type models\.yolo\.Detect.*" + message):
        kuiper.load(corrupted_copy(tmp_path, old, new))
