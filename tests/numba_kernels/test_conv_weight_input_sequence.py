"""A conv whose weight is an input (as JAX passes weights), once its call has been seen, runs as one oneDNN
sequence that reorders each call's weight itself (``WeightInputPath.specialized``,
``Convolution.weight_input_sequence_for``): every result is, bit for bit, what the same model gives with that
step left to the op's forward, and any call the sequence does not fit (a weight of other strides, NaN or a
norm too large for the bound) takes the forward.  Float64 NumPy checks the values."""

from __future__ import annotations

import numpy as np
import pytest

import kuiper
from kuiper import onednn
from kuiper.numba_kernels import available as compiled_available
from kuiper.numba_kernels.conv_native import WeightInputPath

pytestmark = [pytest.mark.skipif(not compiled_available(), reason="the conv kernels come with numba"),
              pytest.mark.skipif(not onednn.available(), reason=onednn.describe())]

RNG = np.random.default_rng(45)

# Two convs: the first reads JAX's NHWC input as a transposed view (no sequence for that: its forward runs);
# the second reads the first's output in oneDNN's blocked layout, and its weight and bias are arguments.
PROGRAM = """HloModule two_convs

ENTRY main {
  x = f32[2,12,12,8] parameter(0)
  k1 = f32[3,3,8,16] parameter(1)
  c1 = f32[2,12,12,16] convolution(x, k1), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  b1 = f32[16] parameter(2)
  s1 = f32[2,12,12,16] broadcast(b1), dimensions={3}
  a1 = f32[2,12,12,16] add(c1, s1)
  zero = f32[] constant(0)
  zeros = f32[2,12,12,16] broadcast(zero), dimensions={}
  r1 = f32[2,12,12,16] maximum(a1, zeros)
  k2 = f32[3,3,16,16] parameter(3)
  c2 = f32[2,12,12,16] convolution(r1, k2), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  b2 = f32[16] parameter(4)
  s2 = f32[2,12,12,16] broadcast(b2), dimensions={3}
  a2 = f32[2,12,12,16] add(c2, s2)
  ROOT r2 = f32[2,12,12,16] maximum(a2, zeros)
}
"""


def _arguments():
    return [RNG.standard_normal((2, 12, 12, 8)).astype(np.float32),
            (RNG.standard_normal((3, 3, 8, 16)) / 8).astype(np.float32), RNG.standard_normal(16).astype(np.float32),
            (RNG.standard_normal((3, 3, 16, 16)) / 12).astype(np.float32), RNG.standard_normal(16).astype(np.float32)]


def _conv_nhwc(x, kernel, bias):
    padded = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    out = sum(np.einsum("nhwc,co->nhwo", padded[:, i:i + x.shape[1], j:j + x.shape[2]], kernel[i, j].astype(np.float64))
              for i in range(3) for j in range(3))
    return np.maximum(out + bias, 0)


def _oneDNN_calls(monkeypatch) -> list:
    """The weight shapes of the oneDNN convolutions called op by op (``Convolution.__call__``) from now on."""
    seen = []
    run = onednn.Convolution.__call__

    def recorded(self, *args, **kwargs):
        seen.append(self.weight_layouts.shape)
        return run(self, *args, **kwargs)

    monkeypatch.setattr(onednn.Convolution, "__call__", recorded)
    return seen


@pytest.fixture(scope="module")
def models():
    """The model, and a function calling a second one of the same program whose weight-input convs always run
    their forward (never specialized)."""
    model, forward_only = (kuiper.load_hlo(PROGRAM, backend="numpy", threads=1) for _ in range(2))

    def by_forward(*arguments):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(WeightInputPath, "specialized", lambda self, inputs: None)
            return forward_only(*arguments)

    return model, by_forward


def test_a_warm_call_runs_the_second_conv_as_a_sequence_with_each_calls_weight(models, monkeypatch):
    model, by_forward = models
    for _ in range(2):  # the calls that make the plans and the specialized steps
        model(*_arguments())
    seen = _oneDNN_calls(monkeypatch)
    for _ in range(3):  # new weights and biases every call
        arguments = _arguments()
        seen.clear()
        got = model(*arguments)
        assert seen == [(16, 8, 3, 3)]  # the first conv (its x a transposed view) op by op; the second a sequence
        np.testing.assert_array_equal(got, by_forward(*arguments))
    np.testing.assert_allclose(got, _conv_nhwc(_conv_nhwc(*arguments[:3]), *arguments[3:]), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", ["NaN in the weight", "a norm too large for the bound", "a weight of other strides"])
def test_a_call_the_sequence_does_not_fit_takes_the_forward(case, models, monkeypatch):
    model, by_forward = models
    for _ in range(2):
        model(*_arguments())
    arguments = _arguments()
    if case == "NaN in the weight":
        arguments[3][1, 1, 2, 3] = np.nan
    elif case == "a norm too large for the bound":
        arguments[3] *= np.float32(1e36)  # finite, but the outputs' bound is not: the reference takes it
    else:
        arguments[3] = np.asfortranarray(arguments[3])
    seen = _oneDNN_calls(monkeypatch)
    got = model(*arguments)
    calls = list(seen)
    np.testing.assert_array_equal(got, by_forward(*arguments))
    if case == "a weight of other strides":  # still oneDNN, through the op's forward
        assert calls == [(16, 8, 3, 3), (16, 16, 3, 3)]
        np.testing.assert_allclose(got, _conv_nhwc(_conv_nhwc(*arguments[:3]), *arguments[3:]), rtol=1e-4, atol=1e-4)
    else:  # the reference conv, which follows IEEE 754
        assert calls == [(16, 8, 3, 3)]
        if case == "NaN in the weight":
            assert np.isnan(got).any()
