"""ONNX LSTM, GRU and RNN -> the canonical Recurrent op (PyTorch's gate order and equations).

ONNX stores an LSTM's gates as (input, output, forget, cell) and a GRU's as (update, reset, hidden);
the canonical op takes PyTorch's (input, forget, cell, output) and (reset, update, new), so the
constant weights are reordered once at load. ONNX's output Y is (sequence, directions, batch, hidden);
the canonical op's (sequence, batch, directions * hidden), so a reshape and a transpose follow. The
reverse direction alone is the forward cell on the time-reversed sequence.
A GRU with linear_before_reset=0 (ONNX's default) is the canonical op's ``reset_after=False``.
LSTM peepholes (P) are the canonical op's ``peepholes``; sequence_lens must give every entry the whole
sequence. What the canonical cells cannot express is refused by name: other activations, clipping,
coupled input-forget gates, sequence lengths shorter than the sequence.
"""

from __future__ import annotations

import numpy as np

from ..model_ir import OpNode
from .emit import Emit
from .site import Site

# ONNX gate blocks, in the order PyTorch wants them.
GATE_ORDER = {"LSTM": [0, 2, 3, 1], "GRU": [1, 0, 2], "RNN": [0]}
DEFAULT_ACTIVATIONS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}


def _reordered(matrix: np.ndarray, kind: str, hidden: int) -> np.ndarray:
    blocks = [matrix[i * hidden:(i + 1) * hidden] for i in range(len(GATE_ORDER[kind]))]
    return np.ascontiguousarray(np.concatenate([blocks[i] for i in GATE_ORDER[kind]]))


def translate_recurrent(site: Site) -> list[OpNode]:
    kind = site.op_type
    hidden = site.int_("hidden_size")
    direction = site.string("direction", "forward")
    if direction not in ("forward", "reverse", "bidirectional"):
        raise site.error(f"direction={direction!r} is not forward, reverse or bidirectional")
    activations = site.attribute("activations")
    nonlinearity = "tanh"
    if activations is not None:
        names = [name.decode() for name in activations.strings]
        if kind == "RNN" and set(names) in ({"Tanh"}, {"Relu"}):
            nonlinearity = names[0].lower()
        elif names != DEFAULT_ACTIVATIONS[kind] * (len(names) // len(DEFAULT_ACTIVATIONS[kind])):
            raise site.error(f"activations {names} are not supported (only PyTorch's: {DEFAULT_ACTIVATIONS[kind]})")
    if site.attribute("clip") is not None or site.int_("input_forget", 0):
        raise site.error("clip and input_forget are not supported")
    _check_full_lengths(site)
    weights, recurrences = site.constant(1, "W"), site.constant(2, "R")
    directions = 2 if direction == "bidirectional" else 1
    gates = len(GATE_ORDER[kind])
    if weights.shape[:2] != (directions, gates * hidden) or recurrences.shape != (directions, gates * hidden, hidden):
        raise site.error(f"W {list(weights.shape)} and R {list(recurrences.shape)} do not fit {directions} "
                         f"direction(s) of {gates} gate(s) of {hidden}")
    biases = site.constant(3, "B") if site.has_input(3) else np.zeros((directions, 2 * gates * hidden), weights.dtype)
    attrs = {}
    peepholes = kind == "LSTM" and site.has_input(7)
    if peepholes:
        weights_p = site.constant(7, "P")
        if weights_p.shape != (directions, 3 * hidden):
            raise site.error(f"P {list(weights_p.shape)} does not fit {directions} direction(s) of 3 gates of {hidden}")
    for d in range(directions):
        suffix = "_l0" + ("_reverse" if d else "")
        attrs["weight_ih" + suffix] = _reordered(weights[d], kind, hidden)
        attrs["weight_hh" + suffix] = _reordered(recurrences[d], kind, hidden)
        attrs["bias_ih" + suffix] = _reordered(biases[d, :gates * hidden], kind, hidden)
        attrs["bias_hh" + suffix] = _reordered(biases[d, gates * hidden:], kind, hidden)
        if peepholes:  # ONNX's (input, output, forget) -> the canonical (input, forget, output)
            blocks = [weights_p[d, i * hidden:(i + 1) * hidden] for i in range(3)]
            attrs["weight_peephole" + suffix] = np.ascontiguousarray(np.concatenate([blocks[0], blocks[2], blocks[1]]))
    batch_first = bool(site.int_("layout", 0))
    params = {"cell": kind, "input_size": int(weights.shape[2]), "hidden_size": hidden, "num_layers": 1,
              "bidirectional": directions == 2, "batch_first": batch_first, "bias": True}
    if kind == "RNN":
        params["nonlinearity"] = nonlinearity
    if peepholes:
        params["peepholes"] = True
    if kind == "GRU":  # linear_before_reset=1 is PyTorch's cell; 0 (the default) resets the state first
        params["reset_after"] = bool(site.int_("linear_before_reset", 0))

    emit = Emit(site)
    dtype = site.dtype(0)
    shape = site.static_shape(0)
    batch = shape[0] if batch_first else shape[1]
    states = [site.input(i) if site.has_input(i) else None for i in ((5, 6) if kind == "LSTM" else (5,))]
    if any(state is not None for state in states):
        zeros = np.zeros((directions, batch, hidden), dtype=dtype)
        states = [state if state is not None else emit.const(zeros, dtype) for state in states]
        inputs = [site.input(0), *states]
        if batch_first:  # ONNX's layout 1 puts the batch first in the states too; the canonical op never does
            inputs = [inputs[0], *(emit.op("Transpose", [s], {"dims": [1, 0, 2]}, dtype=dtype) for s in inputs[1:])]
    else:
        inputs = [site.input(0)]
    time_axis = 1 if batch_first else 0
    if direction == "reverse":  # the forward cell on the time-reversed sequence; its outputs reversed back
        inputs[0] = emit.op("Reverse", [inputs[0]], {"dims": [time_axis]}, dtype=dtype)
    sequence = emit.site.temporary("sequence", dtype)
    results = [sequence] + [
        (site.outputs[i] if site.has_output(i) and not batch_first else site.temporary(f"state{i}", dtype))
        for i in range(1, 3 if kind == "LSTM" else 2)]
    emit.op_many("Recurrent", inputs, results, params)
    emit.ops[-1].attrs.update(attrs)
    if site.has_output(0):
        steps_axis, batch_axis = (1, 0) if batch_first else (0, 1)
        split = [0, 0, directions, hidden]
        split[steps_axis], split[batch_axis] = -1, batch
        if direction == "reverse":
            sequence = emit.op("Reverse", [sequence], {"dims": [time_axis]}, dtype=dtype)
        apart = emit.op("Reshape", [sequence], {"shape": split}, dtype=dtype)
        order = [0, 2, 1, 3] if not batch_first else [0, 1, 2, 3]  # (L, N, D, H) -> (L, D, N, H); (N, L, D, H) stays
        emit.op("Transpose", [apart], {"dims": order}, dtype=dtype, out=site.outputs[0])
    if batch_first:
        for i, result in enumerate(results[1:], start=1):
            if site.has_output(i):
                emit.op("Transpose", [result], {"dims": [1, 0, 2]}, dtype=dtype, out=site.outputs[i])
    return emit.ops


def _check_full_lengths(site: Site) -> None:
    """sequence_lens, when given, must be known at load and give every batch entry the whole sequence: the
    canonical op has no per-entry lengths (shorter entries would stop updating their state early)."""
    if not site.has_input(4):
        return
    lengths = site.constant(4, "sequence_lens").reshape(-1)
    shape = site.static_shape(0)
    steps = shape[1] if site.int_("layout", 0) else shape[0]
    if np.any(lengths != steps):
        raise site.error(f"sequence_lens {lengths.tolist()} shorter than the sequence ({steps} steps) are not "
                         "supported")


TRANSLATORS = {"LSTM": translate_recurrent, "GRU": translate_recurrent, "RNN": translate_recurrent}
