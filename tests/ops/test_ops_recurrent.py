"""nn.RNN / nn.LSTM / nn.GRU on hand-made one-op models against a float64 step-by-step
reference written from the PyTorch docs' equations.

The fixture recurrent_stack checks them against PyTorch itself, through pnnx.
"""

from __future__ import annotations

import numpy as np
import pytest

import kuiper
from kuiper.graph import build
from kuiper.model_ir import OpNode

from single_op import graph
from test_ops_activation import one_op

GATES = {"nn.RNN": 1, "nn.LSTM": 4, "nn.GRU": 3}


def sig(x):
    return 1 / (1 + np.exp(-x))


def make_weights(kind, input_size, hidden, layers, bidirectional, bias=True, proj=0, seed=0):
    r = np.random.default_rng(seed)
    out = proj or hidden
    weights = {}
    for layer in range(layers):
        for suffix in ("", "_reverse") if bidirectional else ("",):
            s = f"_l{layer}{suffix}"
            width = input_size if layer == 0 else out * (2 if bidirectional else 1)
            weights["weight_ih" + s] = r.uniform(-0.5, 0.5, (GATES[kind] * hidden, width))
            weights["weight_hh" + s] = r.uniform(-0.5, 0.5, (GATES[kind] * hidden, out))
            if bias:
                weights["bias_ih" + s] = r.uniform(-0.5, 0.5, GATES[kind] * hidden)
                weights["bias_hh" + s] = r.uniform(-0.5, 0.5, GATES[kind] * hidden)
            if proj:
                weights["weight_hr" + s] = r.uniform(-0.5, 0.5, (proj, hidden))
    return {k: v.astype(np.float32) for k, v in weights.items()}


def cell(kind, w, s, x, h, c, nonlinearity):
    """One step of one direction, float64, straight from the documented equations."""
    f64 = lambda key: np.asarray(w[key + s], np.float64) if key + s in w else 0.0
    gi = x @ f64("weight_ih").T + f64("bias_ih")
    gh = h @ f64("weight_hh").T + f64("bias_hh")
    if kind == "nn.RNN":
        pre = gi + gh
        return (np.tanh(pre) if nonlinearity == "tanh" else np.maximum(pre, 0)), None
    if kind == "nn.GRU":
        ir, iz, in_ = np.split(gi, 3, axis=-1)
        hr, hz, hn = np.split(gh, 3, axis=-1)
        r, z = sig(ir + hr), sig(iz + hz)
        n = np.tanh(in_ + r * hn)
        return (1 - z) * n + z * h, None
    i, f, g, o = np.split(gi + gh, 4, axis=-1)
    c = sig(f) * c + sig(i) * np.tanh(g)
    h = sig(o) * np.tanh(c)
    if "weight_hr" + s in w:
        h = h @ f64("weight_hr").T
    return h, c


def reference(kind, w, x, layers, bidirectional, batch_first, h0=None, c0=None, nonlinearity="tanh"):
    x = np.asarray(x, np.float64)
    unbatched = x.ndim == 2
    if unbatched:
        x = x[:, None]
        h0 = None if h0 is None else h0[:, None]
        c0 = None if c0 is None else c0[:, None]
    elif batch_first:
        x = np.swapaxes(x, 0, 1)
    dirs = 2 if bidirectional else 1
    hidden = w["weight_hh_l0"].shape[0] // GATES[kind]
    out_size = w["weight_hh_l0"].shape[1]
    n = x.shape[1]
    h_n, c_n = [], []
    for layer in range(layers):
        outs = []
        for d in range(dirs):
            s = f"_l{layer}" + ("_reverse" if d else "")
            k = layer * dirs + d
            h = np.zeros((n, out_size)) if h0 is None else h0[k]
            c = np.zeros((n, hidden)) if c0 is None else c0[k]
            seq = [None] * len(x)
            for t in (reversed(range(len(x))) if d else range(len(x))):
                h, c2 = cell(kind, w, s, x[t], h, c, nonlinearity)
                c = c2 if c2 is not None else c
                seq[t] = h
            outs.append(np.stack(seq))
            h_n.append(h)
            c_n.append(c)
        x = np.concatenate(outs, axis=-1)
    out, h_n, c_n = x, np.stack(h_n), np.stack(c_n)
    if unbatched:
        return out[:, 0], h_n[:, 0], c_n[:, 0]
    return (np.swapaxes(out, 0, 1) if batch_first else out), h_n, c_n


CASES = {
    # name: (kind, input, hidden, layers, bidirectional, batch_first, bias, proj, nonlinearity, initial states)
    "rnn_tanh_2layer_bidir_h0": ("nn.RNN", 3, 5, 2, True, True, True, 0, "tanh", True),
    "rnn_relu_nobias": ("nn.RNN", 4, 3, 1, False, False, False, 0, "relu", False),
    "lstm_2layer_bidir": ("nn.LSTM", 3, 4, 2, True, False, True, 0, "tanh", False),
    "lstm_proj_h0_c0": ("nn.LSTM", 3, 5, 2, False, True, True, 2, "tanh", True),
    "lstm_proj_bidir_nobias": ("nn.LSTM", 4, 5, 1, True, True, False, 3, "tanh", False),
    "gru_2layer_bidir_h0": ("nn.GRU", 3, 4, 2, True, False, True, 0, "tanh", True),
    "gru_nobias_batch_first": ("nn.GRU", 2, 3, 1, False, True, False, 0, "tanh", False),
}


def layer_params(case) -> dict:
    """The PNNX params of a CASES entry's layer."""
    kind, size, hidden, layers, bidir, batch_first, bias, proj, nonlin, _ = CASES[case]
    params = {"batch_first": batch_first, "bias": bias, "bidirectional": bidir, "hidden_size": hidden,
              "input_size": size, "num_layers": layers}
    if kind == "nn.LSTM":
        params["proj_size"] = proj
    if kind == "nn.RNN":
        params["nonlinearity"] = nonlin
    return params


def run_case(tmp_path, case, x_shape=None, unbatched=False, n_out=None):
    kind, size, hidden, layers, bidir, batch_first, bias, proj, nonlin, initial = CASES[case]
    w = make_weights(kind, size, hidden, layers, bidir, bias, proj)
    r = np.random.default_rng(1)
    n, length = 2, 5
    dirs = 2 if bidir else 1
    x_shape = (length, size) if unbatched else ((n, length, size) if batch_first else (length, n, size))
    x = r.standard_normal(x_shape).astype(np.float32)
    state_lead = (layers * dirs,) if unbatched else (layers * dirs, n)
    h0 = r.standard_normal(state_lead + (proj or hidden,)).astype(np.float32) if initial else None
    c0 = r.standard_normal(state_lead + (hidden,)).astype(np.float32) if initial and kind == "nn.LSTM" else None
    params = layer_params(case)
    arrays = [a for a in (x, h0, c0) if a is not None]
    n_out = n_out or (3 if kind == "nn.LSTM" else 2)
    got, _ = one_op(tmp_path, kind, arrays, params, weights=w, n_out=n_out)
    want = reference(kind, w, x, layers, bidir, batch_first, h0, c0, nonlin)
    return got, want


@pytest.mark.parametrize("case", list(CASES))
def test_recurrent_layers_match_the_documented_equations(tmp_path, case):
    got, want = run_case(tmp_path, case)
    for g, ww in zip(got, want):
        assert g.dtype == np.float32 and g.shape == ww.shape
        np.testing.assert_allclose(g, ww, atol=2e-5)


@pytest.mark.parametrize("case", ["lstm_proj_h0_c0", "gru_2layer_bidir_h0", "rnn_relu_nobias"])
def test_unbatched_input(tmp_path, case):
    got, want = run_case(tmp_path, case, unbatched=True)
    for g, ww in zip(got, want):
        np.testing.assert_allclose(g, ww, atol=2e-5)


def test_only_the_outputs_the_file_lists(tmp_path):
    (output,), want = run_case(tmp_path, "lstm_2layer_bidir", n_out=1)
    np.testing.assert_allclose(output, want[0], atol=2e-5)


def test_recurrent_errors_name_the_weight_or_shape(tmp_path):
    w = make_weights("nn.GRU", 3, 4, 1, False)
    params = {"hidden_size": 4, "input_size": 3, "num_layers": 1}
    x = np.zeros((5, 2, 3), np.float32)
    with pytest.raises(kuiper.KuiperError, match="weight_hh_l0"):
        one_op(tmp_path, "nn.GRU", [x], params, weights={k: v for k, v in w.items() if k != "weight_hh_l0"})
    with pytest.raises(kuiper.KuiperError, match=r"input must be"):
        one_op(tmp_path, "nn.GRU", [np.zeros((5, 2, 4), np.float32)], params, weights=w)
    with pytest.raises(kuiper.KuiperError, match="h0 must be"):
        one_op(tmp_path, "nn.GRU", [x, np.zeros((2, 2, 4), np.float32)], params, weights=w)
    with pytest.raises(kuiper.KuiperError, match="nonlinearity"):
        one_op(tmp_path, "nn.RNN", [x], {**params, "nonlinearity": "gelu"},
               weights=make_weights("nn.RNN", 3, 4, 1, False))


def test_gru_that_resets_the_state_before_its_hidden_map(tmp_path):
    """The canonical op's reset_after=False (ONNX's linear_before_reset=0): n = tanh(W_in x + b_in + W_hn (r * h) + b_hn)."""
    w = make_weights("nn.GRU", 3, 4, 1, True)
    r = np.random.default_rng(2)
    x = r.standard_normal((5, 2, 3)).astype(np.float32)
    h0 = r.standard_normal((2, 2, 4)).astype(np.float32)
    params = {"cell": "GRU", "input_size": 3, "hidden_size": 4, "num_layers": 1, "bidirectional": True,
              "reset_after": False}
    node = OpNode("Recurrent", "gru", ["x", "h0"], ["y", "h_n"], params, dict(w))
    y, h_n = build(graph([node], ["x", "h0"], ["y", "h_n"]), backend="numpy")(x, h0, to_numpy=True)

    def step(d, x_t, h):
        s = "_l0" + ("_reverse" if d else "")
        f64 = lambda key: np.asarray(w[key + s], np.float64)
        ir, iz, in_ = np.split(x_t @ f64("weight_ih").T + f64("bias_ih"), 3, axis=-1)
        w_r, w_z, w_n = np.split(f64("weight_hh"), 3)
        b_r, b_z, b_n = np.split(f64("bias_hh"), 3)
        reset, update = sig(ir + h @ w_r.T + b_r), sig(iz + h @ w_z.T + b_z)
        n = np.tanh(in_ + (reset * h) @ w_n.T + b_n)
        return (1 - update) * n + update * h

    want = np.zeros((5, 2, 8))
    for d in (0, 1):
        h = h0[d].astype(np.float64)
        for t in (reversed(range(5)) if d else range(5)):
            h = step(d, x[t].astype(np.float64), h)
            want[t, :, 4 * d:4 * d + 4] = h
        np.testing.assert_allclose(h_n[d], h, atol=2e-5)
    np.testing.assert_allclose(y, want, atol=2e-5)


def test_lstm_with_peepholes():
    """The canonical op's peepholes (ONNX's P): i, f see c_{t-1} and o sees c_t through per-unit weights."""
    w = make_weights("nn.LSTM", 3, 4, 1, False)
    peephole = np.random.default_rng(3).uniform(-0.5, 0.5, 12).astype(np.float32)  # (i, f, o) x hidden 4
    r = np.random.default_rng(4)
    x = r.standard_normal((5, 2, 3)).astype(np.float32)
    params = {"cell": "LSTM", "input_size": 3, "hidden_size": 4, "num_layers": 1, "peepholes": True}
    node = OpNode("Recurrent", "lstm", ["x"], ["y", "h_n", "c_n"], params, {**w, "weight_peephole_l0": peephole})
    y, h_n, c_n = build(graph([node], ["x"], ["y", "h_n", "c_n"]), backend="numpy")(x, to_numpy=True)

    f64 = {key: np.asarray(value, np.float64) for key, value in w.items()}
    p_i, p_f, p_o = np.split(peephole.astype(np.float64), 3)
    h, c = np.zeros((2, 4)), np.zeros((2, 4))
    for t in range(5):
        gi, gf, gg, go = np.split(x[t] @ f64["weight_ih_l0"].T + f64["bias_ih_l0"] + h @ f64["weight_hh_l0"].T
                                  + f64["bias_hh_l0"], 4, axis=-1)
        i, f = sig(gi + p_i * c), sig(gf + p_f * c)
        c = f * c + i * np.tanh(gg)
        h = sig(go + p_o * c) * np.tanh(c)
        np.testing.assert_allclose(y[t], h, atol=2e-5)
    np.testing.assert_allclose(h_n[0], h, atol=2e-5)
    np.testing.assert_allclose(c_n[0], c, atol=2e-5)
