"""Nearest 2x upsampling between oneDNN convolutions stays in their channel-blocked layout
(kuiper/numba_kernels/resize_native.py): conv -> upsample -> conv, as YOLOv5's neck has it.

The upsampling's own output, bit for bit against ``np.repeat`` of its input (every value is copied);
the model's against a float64 reference worked out with NumPy and against the same model whose
upsampling takes no blocked input; 20 channels fill the last block of 16 only in part; a NaN input
sends the first conv down its own path.
"""

from __future__ import annotations

import numpy as np
import pytest

import kuiper
from kuiper import onednn

from conftest import write_model

resize_native = pytest.importorskip("kuiper.numba_kernels.resize_native")
pytestmark = pytest.mark.skipif(not onednn.available(), reason=onednn.describe())

RNG = np.random.default_rng(44)
NECK = """7767517
5 4
pnnx.Input in0 0 1 x
nn.Conv2d c1 1 1 x a bias=False kernel_size=(3,3) in_channels=3 out_channels=20 padding=(1,1) @weight=(20,3,3,3)f32
nn.Upsample up 1 1 a b mode=nearest scale_factor=(2.0,2.0) size=None
nn.Conv2d c2 1 1 b c bias=False kernel_size=(1,1) in_channels=20 out_channels=8 @weight=(8,20,1,1)f32
pnnx.Output out 1 0 c
"""
W1 = (RNG.standard_normal((20, 3, 3, 3)) / 5).astype(np.float32)
W2 = (RNG.standard_normal((8, 20, 1, 1)) / 4).astype(np.float32)


def _reference(x):
    x64 = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    height, width = x.shape[2], x.shape[3]
    a = sum(np.einsum("oc,nchw->nohw", W1[:, :, i, j].astype(np.float64), x64[:, :, i:i + height, j:j + width])
            for i in range(3) for j in range(3))
    b = np.repeat(np.repeat(a, 2, axis=2), 2, axis=3)
    return np.einsum("oc,nchw->nohw", W2[:, :, 0, 0].astype(np.float64), b)


def _load(tmp_path, threads, **options):
    param = write_model(tmp_path, NECK, {"c1.weight": W1.tobytes(), "c2.weight": W2.tobytes()})
    return kuiper.load(param, threads=threads, **options)


def _run_seeing(model, x):
    """(output, {step: class of its first input}, the upsampling's (input, output))."""
    seen, ends = {}, {}

    class Observer:
        def before_step(self, node, inputs):
            seen[node.name] = type(inputs[0])

        def after_step(self, node, inputs, outputs):
            if node.name == "up":
                ends["up"] = (inputs[0], outputs[0])

    return model(x, observer=Observer()), seen, ends["up"]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("providers", [False, True])
@pytest.mark.parametrize("copy", ["compiled", "numpy"])
def test_a_conv_upsample_conv_model_keeps_the_blocked_layout_through_the_upsampling(tmp_path, monkeypatch,
                                                                                     threads, providers, copy):
    monkeypatch.setattr(resize_native, "COMPILED_ELEMENTS", 0 if copy == "compiled" else float("inf"))
    model = _load(tmp_path, threads, providers=providers)
    assert {step.node.name: step.op.output_layout for step in model.steps} == {"c1": "onednn", "up": "onednn",
                                                                              "c2": None}
    x = RNG.standard_normal((2, 3, 9, 7)).astype(np.float32)
    model(x)
    got, seen, (before, after) = _run_seeing(model, x)
    assert seen == {"c1": np.ndarray, "up": onednn.Blocked, "c2": onednn.Blocked}
    assert isinstance(after, onednn.Blocked) and after.shape == (2, 20, 18, 14)
    assert np.asarray(after).tobytes() == np.repeat(np.repeat(np.asarray(before), 2, axis=2), 2, axis=3).tobytes()
    if before.norm_bound is not None:  # each value four times: twice the norm, and still a bound on it
        assert after.norm_bound == 2 * before.norm_bound >= np.linalg.norm(np.asarray(after, np.float64))
    assert np.max(np.abs(got - _reference(x))) <= 2e-5
    with monkeypatch.context() as patch:  # the same model with the upsampling taking plain arrays only
        patch.setattr(resize_native.CompiledNearest2x, "takes_layout", lambda self, position, layout: False)
        patch.setattr(resize_native.CompiledNearest2x, "native_layout", lambda self: None)
        plain = _load(tmp_path, threads, providers=providers)
    assert [step.op.output_layout for step in plain.steps] == [None, None, None]
    # the last conv reads another layout there, so it may pick another kernel: equal to rounding
    assert np.max(np.abs(plain(x) - got)) <= 2e-5
    x[1, 2, 4, 3] = np.nan  # the first conv's guard takes its own path; the NaN spreads alike
    with_nan, seen, _ = _run_seeing(model, x)
    np.testing.assert_array_equal(np.isnan(with_nan), np.isnan(plain(x)))
    assert np.isnan(with_nan).any() and not np.isnan(with_nan[0]).any()
