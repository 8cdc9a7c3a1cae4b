"""A U-Net's up-step as JAX writes it, weights as arguments: a transposed conv (an lhs-dilated convolution,
kuiper/hlo/translate_conv.py) whose weight is an input runs on oneDNN's deconvolution
(numba_kernels/conv_transpose_native.py, conv_native.WeightInputPath), and the NHWC concat of its output
with the skip connection becomes an NCHW concat (graph/transposes.py) that joins both in oneDNN's blocked
layout.  Checked against float64 references written from HLO's definition of a convolution."""

from __future__ import annotations

import numpy as np
import pytest

import kuiper
from kuiper import onednn
from kuiper.numba_kernels import available as compiled_available

pytestmark = pytest.mark.skipif(not compiled_available(), reason="the conv kernels come with numba")

MAXIMUM = "max {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT m = f32[] maximum(a, b)\n}\n\n"

# conv -> ReLU (the skip) -> 2x2 max pool -> conv -> ReLU -> 2x2/2 transposed conv + bias -> concat with the
# skip along channels -> conv: Flax's U-Net, one level, NHWC.
UP_STEP = MAXIMUM + """ENTRY main {
  x = f32[1,32,32,8] parameter(0)
  k1 = f32[3,3,8,16] parameter(1)
  c1 = f32[1,32,32,16] convolution(x, k1), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  zero = f32[] constant(0)
  zeros1 = f32[1,32,32,16] broadcast(zero), dimensions={}
  skip = f32[1,32,32,16] maximum(c1, zeros1)
  low = f32[] constant(-inf)
  pool = f32[1,16,16,16] reduce-window(skip, low), window={size=1x2x2x1 stride=1x2x2x1}, to_apply=max
  k2 = f32[3,3,16,32] parameter(2)
  c2 = f32[1,16,16,32] convolution(pool, k2), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  zeros2 = f32[1,16,16,32] broadcast(zero), dimensions={}
  r2 = f32[1,16,16,32] maximum(c2, zeros2)
  kt = f32[2,2,32,16] parameter(3)
  up = f32[1,32,32,16] convolution(r2, kt), window={size=2x2 pad=1_1x1_1 lhs_dilate=2x2}, dim_labels=b01f_01io->b01f
  bt = f32[16] parameter(4)
  spread = f32[1,32,32,16] broadcast(bt), dimensions={3}
  upb = f32[1,32,32,16] add(up, spread)
  cat = f32[1,32,32,32] concatenate(upb, skip), dimensions={3}
  k3 = f32[3,3,32,16] parameter(5)
  ROOT c3 = f32[1,32,32,16] convolution(cat, k3), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
}
"""


def _arguments(seed=0):
    rng = np.random.default_rng(seed)

    def normal(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    return [normal(1, 32, 32, 8), normal(3, 3, 8, 16, scale=0.3), normal(3, 3, 16, 32, scale=0.2),
            normal(2, 2, 32, 16, scale=0.2), normal(16), normal(3, 3, 32, 16, scale=0.2)]


def conv_nhwc(x, kernel, pad, lhs_dilate=1):
    """HLO's convolution in float64: x with lhs_dilate - 1 zeros between its elements, padded by ``pad`` (lo, hi)
    on both spatial dims, correlated with the HWIO kernel (no flip)."""
    x = x.astype(np.float64)
    if lhs_dilate > 1:
        n, h, w, c = x.shape
        dilated = np.zeros((n, (h - 1) * lhs_dilate + 1, (w - 1) * lhs_dilate + 1, c))
        dilated[:, ::lhs_dilate, ::lhs_dilate] = x
        x = dilated
    x = np.pad(x, ((0, 0), pad, pad, (0, 0)))
    kh, kw = kernel.shape[:2]
    oh, ow = x.shape[1] - kh + 1, x.shape[2] - kw + 1
    return sum(np.einsum("nhwc,co->nhwo", x[:, i:i + oh, j:j + ow], kernel[i, j].astype(np.float64))
               for i in range(kh) for j in range(kw))


def float64_up_step(x, k1, k2, kt, bt, k3):
    skip = np.maximum(conv_nhwc(x, k1, (1, 1)), 0)
    n, h, w, c = skip.shape
    pool = skip.reshape(n, h // 2, 2, w // 2, 2, c).max(axis=(2, 4))
    r2 = np.maximum(conv_nhwc(pool, k2, (1, 1)), 0)
    up = conv_nhwc(r2, kt, (1, 1), lhs_dilate=2) + bt
    return conv_nhwc(np.concatenate([up, skip], axis=3), k3, (1, 1))


def _deconvolution_calls(monkeypatch):
    """Every oneDNN deconvolution call from now on: (input class, whether a weight came with the call)."""
    seen = []
    run = onednn.Convolution.__call__

    def recorded(self, x, *args, **kwargs):
        if self.output_padding is not None:
            seen.append((type(x).__name__, kwargs.get("weight") is not None))
        return run(self, x, *args, **kwargs)

    monkeypatch.setattr(onednn.Convolution, "__call__", recorded)
    return seen


def _made_by(model):
    return {operand: step.node for step in model.steps for operand in step.node.outputs}


def test_the_up_step_matches_float64_and_the_unfused_model():
    model = kuiper.load_hlo(UP_STEP, backend="numpy")
    unfused = kuiper.load_hlo(UP_STEP, backend="numpy", fuse=False)
    arguments = _arguments()
    expected = float64_up_step(*arguments)
    for _ in range(2):  # the first call, then the steps as specialized
        got = model(*arguments)
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
        np.testing.assert_array_equal(got, unfused(*arguments))


def test_the_join_reads_both_maps_in_nchw_with_no_transpose_around_it():
    """The NHWC concat between two transposes became an NCHW concat of the transposed conv's output and the
    skip, read by the last conv directly."""
    model = kuiper.load_hlo(UP_STEP, backend="numpy")
    made_by = _made_by(model)
    (join,) = [step.node for step in model.steps if step.node.type == "Concat"]
    assert join.params["dim"] == 1
    assert [made_by[operand].type for operand in join.inputs] == ["ConvTranspose2d", "Conv"]
    (last,) = [step.node for step in model.steps if join.outputs[0] in step.node.inputs]
    assert last.type == "Conv"
    unfused = kuiper.load_hlo(UP_STEP, backend="numpy", fuse=False)
    transposes = [step for step in model.steps if step.node.type == "Transpose"]
    assert len(transposes) < len([step for step in unfused.steps if step.node.type == "Transpose"])


@pytest.mark.skipif(not onednn.available(), reason=onednn.describe())
def test_the_transposed_conv_runs_on_onednn_and_the_join_takes_blocked_maps(monkeypatch):
    model = kuiper.load_hlo(UP_STEP, backend="numpy")
    (up,) = [step for step in model.steps if step.node.type == "ConvTranspose2d"]
    assert "oneDNN" in up.op.kernel_note
    seen = _deconvolution_calls(monkeypatch)
    classes = []

    class Observer:
        def before_step(self, node, inputs):
            if node.type == "Concat":
                classes.append([type(value).__name__ for value in inputs])

        def after_step(self, node, inputs, outputs):
            pass

    arguments = _arguments()
    got = model(*arguments, observer=Observer())
    assert seen == [("Blocked", True)]  # the conv before it handed over its blocked output; the weight per call
    assert classes == [["Blocked", "Blocked"]]
    np.testing.assert_allclose(got, float64_up_step(*arguments), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("special", [np.nan, np.inf])
def test_a_special_value_in_the_transposed_weight_takes_the_reference(special, monkeypatch):
    """oneDNN's kernels may turn NaN or infinities into other values: such a weight goes to the reference,
    which follows IEEE 754, and the result is the unfused model's."""
    model = kuiper.load_hlo(UP_STEP, backend="numpy")
    unfused = kuiper.load_hlo(UP_STEP, backend="numpy", fuse=False)
    arguments = _arguments(1)
    model(*arguments)
    arguments[3][1, 0, 5, 7] = special
    seen = _deconvolution_calls(monkeypatch)
    got = model(*arguments)
    assert seen == [] and not np.isfinite(got).all()  # the guard kept it off oneDNN
    # The unfused model's transposed conv is the same op: its reference path, which multiplies none of the
    # zeros HLO's lhs dilation inserts (inf * 0 would be NaN there), then the same convs.
    np.testing.assert_array_equal(got, unfused(*arguments))
