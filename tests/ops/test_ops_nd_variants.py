"""The 1-D and 3-D spellings of conv, pooling and padding, checked against NumPy references.

Their 2-D twins are checked against PyTorch through the fixtures; these share the
class logic but differ in the number of spatial dims, which is where they can go
wrong.  The last test keeps the registry honest: every registered op type must be
exercised somewhere in the tests.
"""

import glob
from pathlib import Path

import numpy as np
import pytest

from kuiper.formats.pnnx_ops import pnnx_spellings
from kuiper.plugins import op_registry

from conftest import op_model

RNG = np.random.default_rng(0)


def _run(model, x):
    return np.asarray(model(x))


# -- conv and pooling in 1-D and 3-D ---------------------------------------------------------


def test_conv3d_matches_a_direct_sum(tmp_path):
    x = RNG.standard_normal((2, 3, 5, 6, 4)).astype(np.float32)
    w = RNG.standard_normal((4, 3, 3, 2, 3)).astype(np.float32)
    b = RNG.standard_normal(4).astype(np.float32)
    model = op_model(
        tmp_path,
        "nn.Conv3d c 1 1 x y bias=True dilation=(1,1,1) groups=1 padding=(1,0,1) stride=(1,2,1)",
        weights={"weight": w, "bias": b},
    )
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (0, 0), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 2, 3), axis=(2, 3, 4))[:, :, :, ::2, :]
    want = np.einsum("ncdhwijk,ocijk->nodhw", windows, w.astype(np.float64)) + b[None, :, None, None, None]
    np.testing.assert_allclose(_run(model, x), want, atol=1e-4, rtol=0)


def test_functional_conv3d_takes_its_weight_as_an_input(tmp_path):
    x = RNG.standard_normal((1, 2, 3, 3, 3)).astype(np.float32)
    w = RNG.standard_normal((1, 2, 3, 3, 3)).astype(np.float32)
    model = op_model(tmp_path, "F.conv3d c 2 1 x w y $input=x $weight=w", inputs=("x", "w"))
    got = np.asarray(model(x, w))
    np.testing.assert_allclose(got.reshape(-1), [np.sum(x[0] * w[0], dtype=np.float64)], atol=1e-4)


@pytest.mark.parametrize("op_type", ["nn.MaxPool1d", "F.max_pool1d"])
def test_max_pool_1d(tmp_path, op_type):
    x = RNG.standard_normal((2, 3, 9)).astype(np.float32)
    model = op_model(tmp_path, f"{op_type} p 1 1 x y ceil_mode=False dilation=(1) kernel_size=(3) padding=(1) stride=(2)")
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1)), constant_values=-np.inf)
    want = np.lib.stride_tricks.sliding_window_view(padded, 3, axis=2)[:, :, ::2].max(axis=-1)
    np.testing.assert_array_equal(_run(model, x), want)


@pytest.mark.parametrize("op_type", ["nn.AdaptiveAvgPool1d", "F.adaptive_avg_pool1d"])
def test_adaptive_avg_pool_1d_uses_pytorchs_bins(tmp_path, op_type):
    x = np.arange(7, dtype=np.float32).reshape(1, 1, 7)
    model = op_model(tmp_path, f"{op_type} p 1 1 x y output_size=(3)")
    # bins [floor(i*7/3), ceil((i+1)*7/3)): [0,3) [2,5) [4,7)
    np.testing.assert_allclose(_run(model, x), [[[1.0, 3.0, 5.0]]], rtol=1e-6)


# -- padding modules in 1-D, 2-D and 3-D ------------------------------------------------------

NUMPY_MODES = {"Zero": "constant", "Constant": "constant", "Reflection": "reflect", "Replication": "edge",
               "Circular": "wrap"}


@pytest.mark.parametrize(
    "op_type",
    ["nn.ZeroPad1d", "nn.ZeroPad3d", "nn.ConstantPad3d", "nn.ReflectionPad3d", "nn.ReplicationPad3d",
     "nn.CircularPad1d", "nn.CircularPad2d", "nn.CircularPad3d"],
)
def test_padding_modules_match_numpy_pad(tmp_path, op_type):
    kind, dims = op_type[3 : op_type.index("Pad")], int(op_type[-2])
    x = RNG.standard_normal((1, 2) + (4,) * dims).astype(np.float32)
    torch_order = [1, 2, 0, 3, 2, 1][: 2 * dims]  # (last dim before, after, next dim before, after, ...)
    value = " value=1.5" if kind == "Constant" else ""
    model = op_model(tmp_path, f"{op_type} p 1 1 x y padding=({','.join(map(str, torch_order))}){value}")
    pairs = [(torch_order[2 * i], torch_order[2 * i + 1]) for i in range(dims)][::-1]
    extra = {"constant_values": 1.5} if kind == "Constant" else {}
    want = np.pad(x, [(0, 0), (0, 0)] + pairs, mode=NUMPY_MODES[kind], **extra)
    np.testing.assert_array_equal(_run(model, x), want)


def test_contiguous_is_the_identity(tmp_path):
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    model = op_model(tmp_path, "Tensor.contiguous c 1 1 x y memory_format=torch.contiguous_format")
    np.testing.assert_array_equal(_run(model, x), x)


# -- the registry is covered ------------------------------------------------------------------


def test_every_builtin_op_type_is_exercised_by_some_test_or_fixture():
    root = Path(__file__).resolve().parents[2]
    text = " ".join(Path(p).read_text() for p in glob.glob(str(root / "tests" / "**" / "*.py"), recursive=True))
    text += " ".join(Path(p).read_text() for p in glob.glob(str(root / "tests/fixtures/models/*/model.pnnx.param")))
    registry = {t: r for t, r in op_registry().items() if r.plugin == "builtin_ops"}  # plugins test their own
    spellings = pnnx_spellings()
    # A canonical type is exercised through its own name or any PNNX spelling translated to it.
    exercised = {t for t in registry if t in text or any(spelling in text for spelling in spellings.get(t, ()))}
    # An alias shares its class with an exercised type.
    tested_classes = {registry[t].obj for t in exercised}
    untested = sorted(t for t in registry if t not in exercised and registry[t].obj not in tested_classes)
    assert not untested, f"registered op types with no test: {untested}"
