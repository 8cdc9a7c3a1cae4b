"""Run one canonical op (an OpNode, no frontend) on NumPy arrays; build sub-graphs by hand."""

from __future__ import annotations

import numpy as np

from kuiper.graph import build
from kuiper.model_ir import ModelIR, OpNode, OperandInfo


def graph(nodes: list[OpNode], inputs: list[str], outputs: list[str], dtypes: dict | None = None) -> ModelIR:
    """A ModelIR of ``nodes``; ``dtypes`` declares some operands' dtypes (others are free)."""
    names = set(inputs) | set(outputs) | {o for node in nodes for o in node.inputs + node.outputs}
    operands = {name: OperandInfo(name, None, (dtypes or {}).get(name)) for name in names}
    return ModelIR(nodes, operands, list(inputs), list(outputs), "test")


def expression(text: str, arity: int) -> ModelIR:
    """A sub-graph of one pnnx.Expression over inputs ``a0, a1, ...`` (``@0, @1, ...`` in ``text``)."""
    inputs = [f"a{i}" for i in range(arity)]
    return graph([OpNode("pnnx.Expression", "e", inputs, ["r"], {"expr": text})], inputs, ["r"])


def run_op(op_type: str, arrays: list, params: dict, outputs: int = 1):
    """Build ``op_type`` alone with ``params`` and run it on ``arrays``; one result or a list."""
    inputs = [f"in{i}" for i in range(len(arrays))]
    names = [f"out{i}" for i in range(outputs)]
    model = build(graph([OpNode(op_type, "op", inputs, names, params)], inputs, names), backend="numpy")
    result = model(*arrays, to_numpy=True)
    return [np.asarray(r) for r in result] if outputs > 1 else np.asarray(result)
