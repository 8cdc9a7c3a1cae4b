"""Recurrent layers: nn.RNN, nn.LSTM, nn.GRU (PyTorch's gate order and equations).

Per layer and direction, the input projection of the whole sequence is one matmul
(``x @ W_ih^T + b``, shape (L, N, gates * hidden)); the time loop then does only the
recurrent matmul ``h @ W_hh^T`` and the gate math per step, writing each step's h
into the preallocated layer output.  The two directions of a bidirectional layer are
independent, so they step together: the backward projection is stored time-reversed
beside the forward one, and one batched (directions, N, .) matmul and one set of gate
ops serve both (half the per-step calls).  This Python loop is the reference; on
NumPy-array backends with numba, kuiper/numba_kernels/recurrent.py runs it compiled.

Weights are PyTorch's ``weight_ih_l{k}``, ``weight_hh_l{k}``, ``bias_ih_l{k}``,
``bias_hh_l{k}`` (and ``weight_hr_l{k}`` for an LSTM with proj_size), with suffix
``_reverse`` for the backward direction.  Inputs: x, then optionally h0 (and c0 for
an LSTM), shaped (layers * directions, N, hidden) whatever batch_first says.
Outputs: output, then h_n (and c_n), as many as the file lists.

An LSTM's param ``peepholes`` adds weights ``weight_peephole_l{k}`` (3 * hidden: the input, forget and
output gates' in that order) through which the input and forget gates see c_{t-1} and the output gate c_t
(ONNX's P input). A GRU's param ``reset_after`` (default true, PyTorch's cell) applies the reset gate to the hidden
map's result, ``r * (h @ W_hn^T + b_hn)``; false applies it to the state first, ``(r * h) @ W_hn^T + b_hn``
(ONNX's linear_before_reset=0, its default, and Keras's reset_after=False).
"""

from __future__ import annotations

from typing import ClassVar

from ..errors import ShapeError
from ..ir import composites
from .base import Op
from .elementwise import ElementwiseMath, compile_shared, dtype_name, function_for


def _shape(value) -> tuple:
    return tuple(getattr(value, "shape", ()))


SIGMOID = ElementwiseMath(composites.sigmoid, 1)


class LayerWeights:
    """The transposed weights of one layer, per direction (ih) or stacked over directions (the rest)."""

    def __init__(self, ih_t, input_bias, hh_t, hidden_bias, hr_t, peephole=None):
        self.ih_t = ih_t  # [per direction] (width, gates * hidden)
        self.input_bias = input_bias  # [per direction] added to the whole-sequence projection, or None
        self.hh_t = hh_t  # (directions, out, gates * hidden)
        self.hidden_bias = hidden_bias  # GRU only: (directions, 1, hidden) b_hn, inside r * (h @ W_hn^T + b_hn)
        self.hr_t = hr_t  # LSTM proj_size only: (directions, hidden, proj)
        self.peephole = peephole  # LSTM peepholes only: (directions, 1, 3 * hidden), the i, f, o gates' c weights


class Recurrent(Op):
    """What the three share: params, weights, layout, the layer/direction loop."""

    types = ("Recurrent",)
    fresh_output = True
    GATES: ClassVar[dict[str, int]] = {"RNN": 1, "LSTM": 4, "GRU": 3}  # per ``cell``

    def setup(self):
        self.kind = self.choice_param("cell", tuple(self.GATES))
        self.gates = self.GATES[self.kind]
        self.input_size = self.int_param("input_size")
        self.hidden_size = self.int_param("hidden_size")
        self.num_layers = self.int_param("num_layers", default=1)
        self.bidirectional = self.bool_param("bidirectional", default=False)
        self.batch_first = self.bool_param("batch_first", default=False)
        self.has_bias = self.bool_param("bias", default=True)
        self.proj_size = self.int_param("proj_size", default=0) if self.kind == "LSTM" else 0
        self.nonlinearity = self.choice_param("nonlinearity", ("tanh", "relu"), default="tanh") \
            if self.kind == "RNN" else "tanh"
        self.reset_after = self.bool_param("reset_after", default=True)
        self.peepholes = self.bool_param("peepholes", default=False)
        if self.peepholes and (self.kind != "LSTM" or self.proj_size):
            raise self.error("param 'peepholes' applies to an LSTM without proj_size only")
        if not self.reset_after and self.kind != "GRU":
            raise self.error("param 'reset_after' applies to a GRU only")
        for key in ("input_size", "hidden_size", "num_layers"):
            if getattr(self, key) < 1:
                raise self.error(f"param '{key}' must be positive, found {getattr(self, key)}")
        if not 0 <= self.proj_size < self.hidden_size or (self.proj_size and self.kind != "LSTM"):
            raise self.error(f"param 'proj_size' must be in [0, hidden_size={self.hidden_size}), found {self.proj_size}")
        self.out_size = self.proj_size or self.hidden_size
        self.directions = 2 if self.bidirectional else 1
        states = 2 if self.kind == "LSTM" else 1
        self.require_inputs(1, 1 + states)
        if len(self.node.outputs) not in range(1, 2 + states):
            raise self.error(f"has {len(self.node.outputs)} outputs; expected output, h_n" +
                             (", c_n" if states == 2 else ""))
        self.layers = [self._layer(layer) for layer in range(self.num_layers)]
        self._sigmoids = {}  # dtype -> the IR sigmoid compiled for it (looked up once, not per step)

    def _layer(self, layer: int) -> LayerWeights:
        parts = [self._direction(layer, d) for d in range(self.directions)]
        xp = self.xp

        def stacked(index):
            values = [part[index] for part in parts]
            return None if values[0] is None else xp.stack(values)

        hidden_bias = stacked(3)
        if hidden_bias is not None:
            hidden_bias = hidden_bias[:, None, :]
        peephole = stacked(5)
        if peephole is not None:
            peephole = peephole[:, None, :]
        return LayerWeights([p[0] for p in parts], [p[1] for p in parts], stacked(2), hidden_bias, stacked(4),
                            peephole)

    def _direction(self, layer: int, direction: int) -> tuple:
        """(ih_t, input bias, hh_t, GRU hidden bias, hr_t, LSTM peephole) of one direction, checked."""
        suffix = f"_l{layer}" + ("_reverse" if direction else "")
        width = self.input_size if layer == 0 else self.out_size * self.directions
        rows = self.gates * self.hidden_size
        xp = self.xp

        def matrix(name, shape):
            array = self.node.attrs.get(name)
            if array is None or tuple(array.shape) != shape:
                found = None if array is None else tuple(array.shape)
                raise self.error(f"needs weight '@{name}' of shape {shape}, found {found}")
            return xp.permute_dims(self.weight(name, aligned=True), (1, 0))

        ih_t = matrix("weight_ih" + suffix, (rows, width))
        hh_t = matrix("weight_hh" + suffix, (rows, self.out_size))
        hr_t = matrix("weight_hr" + suffix, (self.proj_size, self.hidden_size)) if self.proj_size else None
        input_bias = hidden_bias = None
        if self.has_bias:
            b_ih, b_hh = (self.weight(name + suffix) for name in ("bias_ih", "bias_hh"))
            for name, b in (("bias_ih", b_ih), ("bias_hh", b_hh)):
                if tuple(b.shape) != (rows,):
                    raise self.error(f"weight '@{name}{suffix}' must have shape ({rows},), found {tuple(b.shape)}")
            if self.kind == "GRU":
                # r and z take both biases up front; the candidate's hidden bias sits inside r * (...).
                h = self.hidden_size
                input_bias = b_ih + xp.concat([b_hh[: 2 * h], xp.zeros((h,), dtype=b_hh.dtype)])
                hidden_bias = b_hh[2 * h:]
            else:
                input_bias = b_ih + b_hh
        peephole = None
        if self.peepholes:
            peephole = self.weight("weight_peephole" + suffix)
            if tuple(peephole.shape) != (3 * self.hidden_size,):
                raise self.error(f"weight '@weight_peephole{suffix}' must have shape ({3 * self.hidden_size},), "
                                 f"found {tuple(peephole.shape)}")
        return ih_t, input_bias, hh_t, hidden_bias, hr_t, peephole

    # -- running --------------------------------------------------------------------------
    def forward(self, x, *states):
        xp = self.xp
        if getattr(x, "ndim", 0) not in (2, 3) or x.shape[-1] != self.input_size:
            raise ShapeError(f"{self.node.describe()}: input must be ([N,] L, {self.input_size}) or "
                             f"(L, [N,] {self.input_size}), found {_shape(x)}")
        unbatched = x.ndim == 2
        if unbatched:
            x = x[:, None]
            states = tuple(None if s is None else s[:, None] for s in states)
        elif self.batch_first:
            x = xp.permute_dims(x, (1, 0, 2))  # time-major inside
        batch = x.shape[1]
        h0, c0 = self._initial_states(states, batch, x.dtype)
        h_n, c_n = [], []
        d = self.directions
        for layer in range(self.num_layers):
            states = slice(layer * d, (layer + 1) * d)
            x, h, c = self._run(x, layer, h0[states, ...], None if c0 is None else c0[states, ...])
            h_n.append(h)
            c_n.append(c)
        output = x
        if unbatched:
            output = output[:, 0]
        elif self.batch_first:
            output = xp.permute_dims(output, (1, 0, 2))
        results = [output, xp.concat(h_n, axis=0)]
        if self.kind == "LSTM":
            results.append(xp.concat(c_n, axis=0))
        if unbatched:
            results[1:] = [r[:, 0] for r in results[1:]]
        results = results[: len(self.node.outputs)]
        return results[0] if len(results) == 1 else tuple(results)

    def _initial_states(self, states, batch: int, dtype):
        xp = self.xp
        count = self.num_layers * self.directions
        h0 = states[0] if states else None
        c0 = states[1] if len(states) > 1 else None
        for name, value, width in (("h0", h0, self.out_size), ("c0", c0, self.hidden_size)):
            if value is not None and _shape(value) != (count, batch, width):
                raise ShapeError(f"{self.node.describe()}: {name} must be ({count}, {batch}, {width}) for this "
                                 f"input, found {_shape(value)}")
        if h0 is None:
            h0 = xp.zeros((count, batch, self.out_size), dtype=dtype)
        if c0 is None and self.kind == "LSTM":
            c0 = xp.zeros((count, batch, self.hidden_size), dtype=dtype)
        return h0, c0

    def _run(self, x, layer: int, h, c):
        """One layer, both directions at once: (layer output (L, N, directions * out), h_n, c_n)."""
        xp = self.xp
        w = self.layers[layer]
        length, batch = x.shape[:2]
        projected = []
        for d, (ih_t, bias) in enumerate(zip(w.ih_t, w.input_bias)):
            p = xp.matmul(x, ih_t)  # (L, N, gates * hidden): the whole sequence at once
            if bias is not None:
                p += bias
            projected.append(xp.flip(p, axis=0) if d else p)  # backward: step t reads time L-1-t
        # (L, directions, N, gates * hidden)
        projected = xp.stack(projected, axis=1) if len(projected) > 1 else xp.expand_dims(projected[0], axis=1)
        size = self.out_size
        out = xp.empty((length, batch, size * self.directions), dtype=x.dtype)
        step = getattr(self, f"_{self.kind.lower()}_step")
        for t in range(length):
            h, c = step(projected[t, ...], h, c, w)
            out[t, :, :size] = h[0, ...]
            if self.directions == 2:
                out[length - 1 - t, :, size:] = h[1, ...]
        return out, h, c

    def _sigmoid(self, x):
        compiled = self._sigmoids.get(x.dtype)
        if compiled is None:
            compiled = compile_shared(self.backend, function_for(SIGMOID, (dtype_name(x),)))
            self._sigmoids[x.dtype] = compiled
        return compiled(x)

    def _rnn_step(self, gates_x, h, c, w):
        pre = gates_x + self.xp.matmul(h, w.hh_t)
        return (self.xp.tanh(pre) if self.nonlinearity == "tanh" else self.xp.maximum(pre, 0.0)), None

    def _lstm_step(self, gates_x, h, c, w):
        xp = self.xp
        n = self.hidden_size
        gates = gates_x + xp.matmul(h, w.hh_t)
        if w.peephole is not None:
            return self._lstm_peephole_step(gates, c, w.peephole)
        squashed = self._sigmoid(gates)  # i, f, o in one call (g's sigmoid is unused)
        i, f, o = squashed[..., :n], squashed[..., n:2 * n], squashed[..., 3 * n:]
        g = xp.tanh(gates[..., 2 * n:3 * n])
        c = f * c + i * g
        h = o * xp.tanh(c)
        if w.hr_t is not None:
            h = xp.matmul(h, w.hr_t)
        return h, c

    def _lstm_peephole_step(self, gates, c, peephole):
        """The input and forget gates also see c_{t-1}, the output gate c_t, each through its own weights."""
        xp = self.xp
        n = self.hidden_size
        i = self._sigmoid(gates[..., :n] + peephole[..., :n] * c)
        f = self._sigmoid(gates[..., n:2 * n] + peephole[..., n:2 * n] * c)
        c = f * c + i * xp.tanh(gates[..., 2 * n:3 * n])
        o = self._sigmoid(gates[..., 3 * n:] + peephole[..., 2 * n:] * c)
        return o * xp.tanh(c), c

    def _gru_step(self, gates_x, h, c, w):
        xp = self.xp
        n = self.hidden_size
        if not self.reset_after:
            return self._gru_reset_before_step(gates_x, h, w), None
        hidden = xp.matmul(h, w.hh_t)
        hidden_candidate = hidden[..., 2 * n:]
        if w.hidden_bias is not None:
            hidden_candidate = hidden_candidate + w.hidden_bias
        reset_update = self._sigmoid(gates_x[..., :2 * n] + hidden[..., :2 * n])
        r, z = reset_update[..., :n], reset_update[..., n:]
        candidate = xp.tanh(gates_x[..., 2 * n:] + r * hidden_candidate)
        return candidate + z * (h - candidate), None

    def _gru_reset_before_step(self, gates_x, h, w):
        """The candidate's hidden map applied to the reset state: tanh(x_n + (r * h) @ W_hn^T + b_hn)."""
        xp = self.xp
        n = self.hidden_size
        reset_update = self._sigmoid(gates_x[..., :2 * n] + xp.matmul(h, w.hh_t[..., :2 * n]))
        r, z = reset_update[..., :n], reset_update[..., n:]
        hidden_candidate = xp.matmul(r * h, w.hh_t[..., 2 * n:])
        if w.hidden_bias is not None:
            hidden_candidate = hidden_candidate + w.hidden_bias
        candidate = xp.tanh(gates_x[..., 2 * n:] + hidden_candidate)
        return candidate + z * (h - candidate)


OPS = [Recurrent]
