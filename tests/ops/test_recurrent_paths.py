"""Both paths of nn.RNN / nn.LSTM / nn.GRU against the float64 step-by-step reference of
test_ops_recurrent.py: the reference op (a Python loop over time steps) and the compiled
one (kuiper/numba_kernels/recurrent.py: each layer's time loop in one Numba call), on
longer sequences and larger batches than the one-op tests, both builds of each kernel.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from kuiper.backends import get_backend
from kuiper.numba_kernels import recurrent as compiled
from kuiper.numba_kernels import recurrent_kernels
from kuiper.ops import recurrent as reference_op

from conftest import pnnx_node
from test_ops_recurrent import CASES, layer_params, make_weights, reference

pytestmark = pytest.mark.usefixtures("kernel_variant")  # serial and parallel builds (conftest.py)

PATHS = {"reference": reference_op.Recurrent, "compiled": compiled.CompiledRecurrent}


def make_op(cls, case, weights=None, dtype=np.float32):
    kind, size, hidden, layers, bidir, _, bias, proj, _, initial = CASES[case]
    weights = weights or make_weights(kind, size, hidden, layers, bidir, bias, proj)
    params = layer_params(case)
    outputs = ["y", "h_n", "c_n"] if kind == "nn.LSTM" else ["y", "h_n"]
    attrs = {key: value.astype(dtype) for key, value in weights.items()}
    inputs = ["x"] + (["h0", "c0"][: 1 + (kind == "nn.LSTM")] if initial else [])
    node = pnnx_node(kind, "rnn", inputs, outputs, params, attrs)
    return cls(node, get_backend("numpy")), weights


def feeds(case, batch, length, scale=1.0, unbatched=False, seed=3):
    kind, size, hidden, layers, bidir, batch_first, _, proj, _, initial = CASES[case]
    r = np.random.default_rng(seed)
    lead = (layers * (2 if bidir else 1),) + (() if unbatched else (batch,))
    x_shape = (length, size) if unbatched else ((batch, length, size) if batch_first else (length, batch, size))
    x = (scale * r.standard_normal(x_shape)).astype(np.float32)
    h0 = r.standard_normal(lead + (proj or hidden,)).astype(np.float32) if initial else None
    c0 = r.standard_normal(lead + (hidden,)).astype(np.float32) if initial and kind == "nn.LSTM" else None
    return [a for a in (x, h0, c0) if a is not None]


def check(path, case, batch=3, length=17, scale=1.0, unbatched=False, atol=2e-5):
    op, weights = make_op(PATHS[path], case)
    arrays = feeds(case, batch, length, scale, unbatched)
    kind, _, _, layers, bidir, batch_first, _, _, nonlin, _ = CASES[case]
    got = op.forward(*arrays)
    want = reference(kind, weights, *arrays[:1], layers, bidir, batch_first, *arrays[1:], nonlinearity=nonlin)
    for g, w in zip(got, want):
        assert g.dtype == np.float32 and g.shape == w.shape
        np.testing.assert_allclose(g, w, atol=atol)


@pytest.fixture
def compiled_only(monkeypatch):
    """Make the reference time loop fail, so a test proves the compiled path ran."""

    def refused(*args):
        raise AssertionError("the compiled op fell back to the reference time loop")

    monkeypatch.setattr(reference_op.Recurrent, "_run", refused)


@pytest.mark.parametrize("case", list(CASES))
def test_the_reference_time_loop_matches_float64(case):
    check("reference", case)


@pytest.mark.parametrize("case", list(CASES))
def test_the_compiled_time_loop_matches_float64(case, compiled_only):
    check("compiled", case)


@pytest.mark.parametrize("case", ["lstm_proj_h0_c0", "gru_2layer_bidir_h0", "rnn_tanh_2layer_bidir_h0"])
def test_the_compiled_loop_takes_unbatched_input_and_one_step(case, compiled_only):
    check("compiled", case, unbatched=True)
    check("compiled", case, batch=1, length=1)


@pytest.mark.parametrize("case", ["lstm_2layer_bidir", "gru_2layer_bidir_h0", "rnn_tanh_2layer_bidir_h0",
                                  "rnn_relu_nobias"])
def test_saturated_gates_match_float64(case, compiled_only):
    """Inputs of size ~30 drive every sigmoid to 0 or 1 and every tanh to +-1 (the exp's clamps)."""
    check("compiled", case, scale=30.0)


def test_a_nan_input_propagates_as_in_the_reference():
    arrays = feeds("lstm_2layer_bidir", batch=2, length=6)
    arrays[0][2, 1, 0] = np.nan
    results = [make_op(cls, "lstm_2layer_bidir")[0].forward(*arrays) for cls in PATHS.values()]
    for got, want in zip(*results):
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got, want, atol=2e-5)  # NaN in the same places (assert_allclose: equal NaNs)


def test_other_dtypes_and_wide_steps_take_the_reference_path(monkeypatch):
    case = "gru_2layer_bidir_h0"
    arrays = feeds(case, batch=2, length=5)
    want = make_op(reference_op.Recurrent, case)[0].forward(*arrays)
    op = make_op(compiled.CompiledRecurrent, case)[0]
    monkeypatch.setattr(compiled, "PER_STEP_WORK", 0)  # every step counts as too wide
    for got, w in zip(op.forward(*arrays), want):
        np.testing.assert_array_equal(got, w)
    monkeypatch.undo()
    float64_op, weights = make_op(compiled.CompiledRecurrent, case, dtype=np.float64)
    assert float64_op.kernel_note == "reference path: weights are not float32"
    float64_arrays = [a.astype(np.float64) for a in arrays]
    kind, _, _, layers, bidir, batch_first, _, _, nonlin, _ = CASES[case]
    expected = reference(kind, weights, float64_arrays[0], layers, bidir, batch_first, *float64_arrays[1:])
    for got, w in zip(float64_op.forward(*float64_arrays), expected):
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, w, atol=1e-12)


def test_serial_and_parallel_builds_agree_bit_for_bit():
    r = np.random.default_rng(5)
    directions, length, batch, hidden = 2, 9, 4, 6
    projected = r.standard_normal((directions, length, batch, 4 * hidden)).astype(np.float32)
    hh_t = (0.3 * r.standard_normal((directions, hidden, 4 * hidden))).astype(np.float32)
    no_projection = np.zeros((directions, 0, 0), np.float32)
    h0 = r.standard_normal((directions, batch, hidden)).astype(np.float32)
    c0 = r.standard_normal((directions, batch, hidden)).astype(np.float32)
    results = []
    for build in (recurrent_kernels.lstm_sequence.serial, recurrent_kernels.lstm_sequence.parallel):
        out = np.empty((length, batch, directions * hidden), np.float32)
        h_n, c_n = np.empty_like(h0), np.empty_like(c0)
        build(projected, hh_t, no_projection, h0, c0, out, h_n, c_n)
        results.append((out, h_n, c_n))
    for serial, parallel in zip(*results):
        np.testing.assert_array_equal(serial, parallel)


@pytest.mark.parametrize("case", list(CASES))
def test_the_input_projection_on_onednn_matches_float64(case, compiled_only, monkeypatch):
    from kuiper import onednn

    if not onednn.available():
        pytest.skip(onednn.describe())
    calls = []
    product = onednn.MatMul.__call__
    monkeypatch.setattr(onednn.MatMul, "__call__", lambda self, *a, **k: calls.append(k.get("out")) or product(self, *a, **k))
    monkeypatch.setattr(compiled, "PROJECTION_WORK", 0)  # every projection counts as large enough
    check("compiled", case, batch=5, length=11)
    layers, bidir = CASES[case][3], CASES[case][4]
    assert len(calls) == layers * (2 if bidir else 1) and all(out is not None for out in calls)
