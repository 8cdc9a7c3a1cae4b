"""An HLO reduce-window that is a max pool becomes the shared MaxPool{n}d (kuiper/hlo/translate_reduce.py);
the others stay ReduceWindows.  Every case against a float64 loop over the windows written here (XLA's
rule: taps in the padding take the initial value), bit for bit: a max is exact."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import kuiper

RNG = np.random.default_rng(44)


def window_max(x, window, strides, pads, dilation, init):
    """XLA's reduce-window with a max reducer, one window at a time, in float64."""
    padded = np.pad(x.astype(np.float64), [tuple(p) for p in pads], constant_values=init)
    spans = [(k - 1) * d + 1 for k, d in zip(window, dilation)]
    out_shape = [(n - span) // s + 1 for n, span, s in zip(padded.shape, spans, strides)]
    out = np.empty(out_shape)
    for position in itertools.product(*(range(n) for n in out_shape)):
        taps = [padded[tuple(p * s + t * d for p, s, t, d in zip(position, strides, tap, dilation))]
                for tap in itertools.product(*(range(k) for k in window))]
        result = init
        for value in taps:  # NaN wins, as XLA's maximum makes it
            result = value if np.isnan(value) or value > result else result
        out[position] = result
    return out


def program(shape, window, strides=None, pads=None, dilation=None, init="-inf", element="f32", reducer="maximum",
            base_dilation=None):
    rank = len(shape)
    strides = strides or [1] * rank
    pads = pads or [(0, 0)] * rank
    dilation = dilation or [1] * rank
    spans = [(k - 1) * d + 1 for k, d in zip(window, dilation)]
    out = [(n + lo + hi - span) // s + 1 for n, (lo, hi), span, s in zip(shape, pads, spans, strides)]
    text = "x".join(map(str, window))
    attributes = (f"size={text} stride={'x'.join(map(str, strides))} "
                  f"pad={'x'.join(f'{lo}_{hi}' for lo, hi in pads)} rhs_dilate={'x'.join(map(str, dilation))}")
    if base_dilation:
        attributes += f" lhs_dilate={'x'.join(map(str, base_dilation))}"
    dims = ",".join(map(str, shape))
    return f"""HloModule pool

reducer {{
  a = {element}[] parameter(0)
  b = {element}[] parameter(1)
  ROOT c = {element}[] {reducer}(a, b)
}}

ENTRY main {{
  x = {element}[{dims}] parameter(0)
  init = {element}[] constant({init})
  ROOT y = {element}[{','.join(map(str, out))}] reduce-window(x, init), window={{{attributes}}}, to_apply=reducer
}}
"""


# name: (input shape, window, strides, pads, window dilation, the pool op it becomes)
POOLS = {
    "Flax 2x2 on NHWC": ((2, 6, 8, 5), [1, 2, 2, 1], [1, 2, 2, 1], None, None, "MaxPool2d"),
    "Flax 2x2 on NHWC, odd sizes floored": ((1, 7, 9, 3), [1, 2, 2, 1], [1, 2, 2, 1], None, None, "MaxPool2d"),
    "ResNet's 3x3/2 SAME on NHWC (pad after only: ceil)": ((1, 8, 10, 4), [1, 3, 3, 1], [1, 2, 2, 1],
                                                          [(0, 0), (0, 1), (0, 1), (0, 0)], None, "MaxPool2d"),
    "3x3/1 pad 1 on NCHW (no transposes)": ((2, 3, 5, 6), [1, 1, 3, 3], None, [(0, 0), (0, 0), (1, 1), (1, 1)],
                                           None, "MaxPool2d"),
    "window dilation": ((1, 9, 9, 2), [1, 2, 3, 1], [1, 1, 2, 1], [(0, 0), (1, 1), (1, 2), (0, 0)],
                        [1, 2, 2, 1], "MaxPool2d"),
    "2x1 window: three dims left alone": ((2, 6, 5, 3), [1, 2, 1, 1], [1, 2, 1, 1], None, None, "MaxPool2d"),
    "1-D on NWC": ((2, 9, 4), [1, 3, 1], [1, 2, 1], [(0, 0), (1, 1), (0, 0)], None, "MaxPool1d"),
    "3-D on NDHWC": ((1, 4, 6, 5, 2), [1, 2, 2, 2, 1], [1, 2, 2, 2, 1], None, None, "MaxPool3d"),
}


def _build(text):
    model = kuiper.load_hlo(text, backend="numpy")
    return model, [step.node.type for step in model.steps]


@pytest.mark.parametrize("element", ["f32", "f64"])
@pytest.mark.parametrize("name", list(POOLS))
def test_a_max_pool_window_becomes_the_shared_max_pool(name, element):
    shape, window, strides, pads, dilation, op_type = POOLS[name]
    rank = len(shape)
    model, types = _build(program(shape, window, strides, pads, dilation, element=element))
    assert op_type in types and "ReduceWindow" not in types
    dtype = np.float32 if element == "f32" else np.float64
    x = RNG.standard_normal(shape).astype(dtype)
    expected = window_max(x, window, strides or [1] * rank, pads or [(0, 0)] * rank, dilation or [1] * rank, -np.inf)
    for _ in range(2):  # the first call and a specialized one
        got = model(x, to_numpy=True)
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, expected.astype(dtype))


@pytest.mark.parametrize("special", [np.nan, -np.inf, np.inf])
def test_nan_and_infinities_pool_as_xla_pools_them(special):
    """NaN wins a window, -inf stays -inf (oneDNN's max drops the one and clips the other: the kernel
    must not take such inputs there)."""
    shape, window, strides, pads, dilation, _ = POOLS["ResNet's 3x3/2 SAME on NHWC (pad after only: ceil)"]
    model, _ = _build(program(shape, window, strides, pads, dilation))
    x = RNG.standard_normal(shape).astype(np.float32)
    x[0, 2:4, 2:4, 1] = special
    x[0, 7, 9, 3] = special  # the corner window that reaches into the padding
    expected = window_max(x, window, strides, pads, [1] * 4, -np.inf).astype(np.float32)
    np.testing.assert_array_equal(model(x, to_numpy=True), expected)
    finite = RNG.standard_normal(shape).astype(np.float32)
    np.testing.assert_array_equal(model(finite, to_numpy=True),
                                  window_max(finite, window, strides, pads, [1] * 4, -np.inf).astype(np.float32))


# name: (program keyword arguments, the input shape): reduce-windows that are no max pool PyTorch would run
NOT_POOLS = {
    "initial value 0 (a max with ReLU's floor)": (dict(window=[1, 2, 2, 1], strides=[1, 2, 2, 1], init="0"),
                                                  (1, 4, 4, 3)),
    "a sum": (dict(window=[1, 2, 2, 1], strides=[1, 2, 2, 1], init="0", reducer="add"), (1, 4, 4, 3)),
    "padding over half the window": (dict(window=[1, 3, 3, 1], pads=[(0, 0), (2, 2), (2, 2), (0, 0)]), (1, 5, 5, 2)),
    "padding after beyond what ceil adds": (dict(window=[1, 2, 2, 1], strides=[1, 2, 2, 1],
                                                 pads=[(0, 0), (0, 3), (0, 3), (0, 0)]), (1, 4, 4, 2)),
    "base dilation": (dict(window=[1, 2, 2, 1], base_dilation=[1, 2, 2, 1]), (1, 3, 3, 2)),
    "one dim left alone": (dict(window=[2, 2, 2, 1], strides=[2, 2, 2, 1]), (2, 4, 4, 3)),
    "f16": (dict(window=[1, 2, 2, 1], strides=[1, 2, 2, 1], element="f16"), (1, 4, 4, 3)),
}


@pytest.mark.parametrize("name", list(NOT_POOLS))
def test_other_window_reductions_stay_reduce_windows(name):
    arguments, shape = NOT_POOLS[name]
    model, types = _build(program(shape, **arguments))
    assert "ReduceWindow" in types and not any(t.startswith("MaxPool") for t in types)
    if arguments.get("reducer") or arguments.get("base_dilation") or arguments.get("element"):
        return  # the ReduceWindow's own tests check these; here only that no pool took them
    rank = len(shape)
    x = RNG.standard_normal(shape).astype(np.float32)
    init = float(arguments.get("init", "-inf"))
    expected = window_max(x, arguments["window"], arguments.get("strides") or [1] * rank,
                          arguments.get("pads") or [(0, 0)] * rank, [1] * rank, init)
    np.testing.assert_array_equal(model(x, to_numpy=True), expected.astype(np.float32))
