"""A conv whose weight is an input (as JAX passes weights) takes the one-input elementwise op after it as
its epilogue (kuiper/numba_kernels/conv.py, conv_native.py): oneDNN runs a ReLU as a post-op, other math
runs after the conv, and every result is the unfused model's bit for bit, NaN and infinities included."""

from __future__ import annotations

import numpy as np
import pytest

import kuiper
from kuiper import onednn
from kuiper.numba_kernels import available as compiled_available

pytestmark = pytest.mark.skipif(not compiled_available(), reason="the conv kernels come with numba")

RNG = np.random.default_rng(44)

HEAD = """HloModule conv_epilogue

ENTRY main {
  x = f32[2,7,6,3] parameter(0)
  kernel = f32[3,3,3,16] parameter(1)
  conv = f32[2,7,6,16] convolution(x, kernel), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  bias = f32[16] parameter(2)
  spread = f32[2,7,6,16] broadcast(bias), dimensions={3}
  sum = f32[2,7,6,16] add(conv, spread)
"""

TAILS = {
    "relu": "  zero = f32[] constant(0)\n  zeros = f32[2,7,6,16] broadcast(zero), dimensions={}\n"
            "  ROOT out = f32[2,7,6,16] maximum(sum, zeros)\n}\n",
    "cosine (no post-op for it)": "  ROOT out = f32[2,7,6,16] cosine(sum)\n}\n",
    "plus another argument (two inputs)": "  other = f32[2,7,6,16] parameter(3)\n"
                                          "  ROOT out = f32[2,7,6,16] add(sum, other)\n}\n",
}


def _arguments(tail):
    arguments = [RNG.standard_normal((2, 7, 6, 3)).astype(np.float32),
                 (RNG.standard_normal((3, 3, 3, 16)) / 3).astype(np.float32), RNG.standard_normal(16).astype(np.float32)]
    if "parameter(3)" in TAILS[tail]:
        arguments.append(RNG.standard_normal((2, 7, 6, 16)).astype(np.float32))
    return arguments


def float64_reference(x, kernel, bias):
    """The NHWC conv (3x3, pad 1) plus the bias, in float64."""
    padded = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    out = sum(np.einsum("nhwc,co->nhwo", padded[:, i:i + x.shape[1], j:j + x.shape[2]], kernel[i, j].astype(np.float64))
              for i in range(3) for j in range(3))
    return out + bias


def _conv(model):
    (step,) = [step for step in model.steps if step.node.type == "Conv"]
    return step


def _recording_post_ops(monkeypatch):
    """The post-op steps of every oneDNN convolution call from now on."""
    seen = []
    run = onednn.Convolution.__call__

    def recorded(self, *args, **kwargs):
        seen.append(self.post_ops)
        return run(self, *args, **kwargs)

    monkeypatch.setattr(onednn.Convolution, "__call__", recorded)
    return seen


@pytest.mark.parametrize("tail", ["relu", "cosine (no post-op for it)"])
def test_a_one_input_epilogue_joins_the_conv_and_gives_the_unfused_bits(tail, monkeypatch):
    program = HEAD + TAILS[tail]
    model = kuiper.load_hlo(program, backend="numpy")
    unfused = kuiper.load_hlo(program, backend="numpy", fuse=False)
    conv = _conv(model)
    assert "epilogue" in conv.node.params and len(conv.node.inputs) == 3  # x, the kernel and the bias: no more
    assert not [step for step in model.steps if "Elementwise" in step.node.type]
    seen = _recording_post_ops(monkeypatch)
    arguments = _arguments(tail)
    for _ in range(2):  # the first call and a specialized one
        got = model(*arguments)
        np.testing.assert_array_equal(got, unfused(*arguments))
    before = float64_reference(*arguments)
    expected = np.maximum(before, 0) if tail == "relu" else np.cos(before)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    if onednn.available():
        relu = (("eltwise_relu", 0.0, 0.0),)
        assert relu in seen if tail == "relu" else relu not in seen and seen  # oneDNN ran the conv either way
        assert ("post-ops" in conv.op.kernel_note) == (tail == "relu")


@pytest.mark.parametrize("special", [np.nan, np.inf, -np.inf])
def test_nan_and_infinities_take_the_reference_and_the_epilogue_after_it(special, monkeypatch):
    """oneDNN's ReLU post-op turns NaN into 0: the special-value guard keeps such inputs off it."""
    program = HEAD + TAILS["relu"]
    model = kuiper.load_hlo(program, backend="numpy")
    unfused = kuiper.load_hlo(program, backend="numpy", fuse=False)
    x, kernel, bias = _arguments("relu")
    x[1, 3, 2, 1] = special
    seen = _recording_post_ops(monkeypatch)
    got = model(x, kernel, bias)
    np.testing.assert_array_equal(got, unfused(x, kernel, bias))
    assert not np.isfinite(got[1, 2:5, 1:4]).all()  # the special value reached the windows around it
    assert (("eltwise_relu", 0.0, 0.0),) not in seen
    kernel[0, 0, 0, 0] = special  # in the weight: the same
    np.testing.assert_array_equal(model(np.abs(x), kernel, bias), unfused(np.abs(x), kernel, bias))


def test_a_two_input_epilogue_stays_an_elementwise_op():
    """A conv whose weight is an input reads x, kernel and bias by position: no epilogue input may follow."""
    program = HEAD + TAILS["plus another argument (two inputs)"]
    model = kuiper.load_hlo(program, backend="numpy")
    assert "epilogue" not in _conv(model).node.params
    arguments = _arguments("plus another argument (two inputs)")
    np.testing.assert_array_equal(model(*arguments), kuiper.load_hlo(program, backend="numpy", fuse=False)(*arguments))


POOLED = """HloModule conv_pool

max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}

ENTRY main {
  x = f32[2,16,16,8] parameter(0)
  kernel = f32[3,3,8,32] parameter(1)
  conv = f32[2,16,16,32] convolution(x, kernel), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  bias = f32[32] parameter(2)
  spread = f32[2,16,16,32] broadcast(bias), dimensions={3}
  sum = f32[2,16,16,32] add(conv, spread)
  zero = f32[] constant(0)
  zeros = f32[2,16,16,32] broadcast(zero), dimensions={}
  relu = f32[2,16,16,32] maximum(sum, zeros)
  low = f32[] constant(-inf)
  ROOT pool = f32[2,8,8,32] reduce-window(relu, low), window={size=1x2x2x1 stride=1x2x2x1}, to_apply=max
}
"""


def _pool_input_classes(model, arguments):
    """The class of the value the max pool reads, per call."""
    seen = []

    class Observer:
        def before_step(self, node, inputs):
            if node.type == "MaxPool2d":
                seen.append(type(inputs[0]).__name__)

        def after_step(self, node, inputs, outputs):
            pass

    return model(*arguments, observer=Observer()), seen


@pytest.mark.skipif(not onednn.available(), reason=onednn.describe())
def test_the_conv_hands_its_output_to_the_pool_in_onednns_layout():
    """Flax's conv -> ReLU -> max pool with the weights as arguments: the conv (its ReLU a post-op) writes
    oneDNN's blocked layout, the pool reads it there; the same bits as the unfused model, op by op (a conv of
    over PLAIN_CONV_WORK multiply-adds: smaller ones run another kernel on plain arrays)."""
    model = kuiper.load_hlo(POOLED, backend="numpy")
    unfused = kuiper.load_hlo(POOLED, backend="numpy", fuse=False)
    # Unfused, the conv's reader is JAX's transpose to NHWC: it writes channels-last (graph/channels_last.py).
    assert _conv(model).op.output_layout == "onednn" and _conv(unfused).op.output_layout == "channels-last"
    x = RNG.standard_normal((2, 16, 16, 8)).astype(np.float32)
    kernel = (RNG.standard_normal((3, 3, 8, 32)) / 8).astype(np.float32)
    bias = RNG.standard_normal(32).astype(np.float32)
    for _ in range(2):
        got, seen = _pool_input_classes(model, (x, kernel, bias))
        assert seen == ["Blocked"]
        np.testing.assert_array_equal(got, unfused(x, kernel, bias))
    expected = np.maximum(float64_reference(x, kernel, bias), 0).reshape(2, 8, 2, 8, 2, 32).max(axis=(2, 4))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    x[0, 1, 1, 0] = np.nan  # the special-value guard: the reference conv, a plain array for the pool
    got, seen = _pool_input_classes(model, (x, kernel, bias))
    assert seen == ["ndarray"]
    np.testing.assert_array_equal(got, unfused(x, kernel, bias))
    assert np.isnan(got[0, :2, :2]).any()


def test_a_conv_whose_epilogue_runs_after_it_hands_on_a_plain_array():
    model = kuiper.load_hlo(POOLED.replace("maximum(sum, zeros)", "cosine(sum)"), backend="numpy")
    assert "epilogue" in _conv(model).node.params and _conv(model).op.output_layout is None


@pytest.mark.skipif(not onednn.available(), reason=onednn.describe())
def test_the_conv_bounds_its_blocked_output_and_the_pool_reads_nothing_to_guard_it(monkeypatch):
    """The conv's Blocked output carries a bound on its norm (from |x|, |W| and the bias, as a conv with constant
    weights gives one): at least the output's true norm, and finite, so the max pool's special-value guard
    reads nothing; the pool's output carries its own bound on."""
    from kuiper.numba_kernels import pool_native

    model = kuiper.load_hlo(POOLED, backend="numpy")
    unfused = kuiper.load_hlo(POOLED, backend="numpy", fuse=False)
    x = RNG.standard_normal((2, 16, 16, 8)).astype(np.float32)
    kernel = (RNG.standard_normal((3, 3, 8, 32)) / 8).astype(np.float32)
    bias = RNG.standard_normal(32).astype(np.float32)
    bounds = []

    class Observer:
        def before_step(self, node, inputs):
            pass

        def after_step(self, node, inputs, outputs):
            for value in outputs if isinstance(outputs, (list, tuple)) else [outputs]:
                if isinstance(value, onednn.Blocked):
                    bounds.append((node.type, value.norm_bound, float(np.linalg.norm(np.asarray(value)))))

    expected = unfused(x, kernel, bias)
    read = []
    is_tame = pool_native.is_tame
    monkeypatch.setattr(pool_native, "is_tame", lambda xp, value: read.append(value.shape) or is_tame(xp, value))
    for _ in range(2):
        bounds.clear()
        got = model(x, kernel, bias, observer=Observer())
        np.testing.assert_array_equal(got, expected)
    assert [kind for kind, _, _ in bounds] == ["Conv"]  # the pool is the model's output: plain
    (_, bound, norm), = bounds
    assert norm <= bound < np.finfo(np.float32).max
    assert read == []
