"""What the lowering knows of each ONNX value: dtype and shape, and the value itself where it is
known when the model is loaded (initializers, ``Constant`` nodes, and what kuiper computes from them).

ONNX passes many shape-deciding arguments as inputs (Reshape's shape, Slice's starts, the axes of a
reduction since opset 13); kuiper's ops take most of them as params, so a translator asks for their
values. A value computed from known values only (``Shape`` of a tensor of static shape, then
``Gather``, ``Concat`` ...) is computed here by building those canonical ops as a small model on the
NumPy backend: the same ops, no second implementation.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import OperatorParamError
from ..graph import build
from ..model_ir import ModelIR, OpNode, OperandInfo
from .tensors import to_array

# The most entries of a value computed at load only because it may be a shape (sub-graph captures,
# partial_shapes.py); a shape has one entry per dim.
SHAPE_LIKE_SIZE = 64
# Ops without inputs whose value is not fixed at load time.
_NOT_CONSTANT = ("RandomBits", "RandomNumbers")


class KnownInputError(OperatorParamError):
    """A graph input decides a shape, so its value must be known at load time (``known_inputs=``)."""

    def __init__(self, message: str, input_name: str):
        super().__init__(message)
        self.input_name = input_name


class _Source:
    """Where an evaluation is asked for, for its messages, when no node asks."""

    def __init__(self, source: str):
        self.source = source


class Values:
    def __init__(self, folder: Path | None, graph_inputs: set[str]):
        self.folder = folder
        self.graph_inputs = graph_inputs
        self.infos: dict[str, OperandInfo] = {}
        self.known: dict[str, np.ndarray] = {}
        # The op computing each value that depends on known values only.
        self.static_ops: dict[str, OpNode] = {}
        # The inputs of the op computing every other value (to find the graph inputs a value comes from).
        self.sources: dict[str, list[str]] = {}
        # Shape vectors computed at run time whose entries are partly known at load (partial_shapes.py).
        self.partial: dict[str, list] = {}
        # (value, dim) -> the FreeDim of another value that a Reshape copied it from (the same size at run time).
        self.same_free_dim: dict[tuple[str, int], object] = {}
        # A loop or scan body's own inputs (its iteration count, its loop values): they change on every step,
        # so no value computed from them is fixed at load, and no known_inputs= can fix them.
        self.step_inputs: set[str] = set()

    # -- facts --------------------------------------------------------------------
    def declare(self, info: OperandInfo) -> None:
        self.infos[info.name] = info

    def know(self, name: str, value: np.ndarray) -> None:
        self.known[name] = value
        self.infos[name] = OperandInfo(name, tuple(value.shape), str(value.dtype))

    def is_known(self, name: str) -> bool:
        return name in self.known or name in self.static_ops

    def dtype(self, name: str, site) -> str:
        info = self.infos.get(name)
        if info is None or info.dtype is None:
            raise site.error(f"the element type of '{name}' is not known (the model does not declare it and "
                             "shape inference could not find it)")
        return info.dtype

    def shape(self, name: str) -> tuple | None:
        if name in self.known:
            return tuple(self.known[name].shape)
        info = self.infos.get(name)
        return None if info is None else info.shape

    def tensor_value(self, tensor, where: str) -> np.ndarray:
        return to_array(tensor, self.folder, where)

    # -- values known at load time ------------------------------------------------------
    def record(self, ops: list[OpNode]) -> None:
        """Note which outputs of freshly translated ops depend on known values only."""
        for node in ops:
            for output in node.outputs:
                self.sources[output] = list(node.inputs)
            if node.type in _NOT_CONSTANT:
                continue
            if node.type == "Constant" or all(name in self.static_ops for name in node.inputs):
                for output in node.outputs:
                    self.static_ops[output] = node

    def value(self, name: str, site, what: str) -> np.ndarray:
        if name in self.known:
            return self.known[name]
        if name in self.static_ops:
            self.known[name] = self._evaluate(name, site)
            return self.known[name]
        if name in self.graph_inputs:
            raise KnownInputError(
                f"{site.where()}: its {what} comes from the graph input '{name}'; kuiper needs it when the model "
                f"is loaded (make it an initializer, or pass known_inputs={{'{name}': value}})", name)
        origin = self._unknown_origin(name)
        if origin is not None:
            raise KnownInputError(
                f"{site.where()}: its {what} ('{name}') is computed from the graph input '{origin}'; kuiper needs it "
                f"when the model is loaded (pass known_inputs={{'{origin}': value}})", origin)
        raise site.error(f"its {what} ('{name}') is computed from the graph's inputs; kuiper needs it when the "
                         "model is loaded")

    def shape_like_value(self, name: str, source: str) -> np.ndarray | None:
        """The value of ``name`` if it is known at load time and small and shape-like (0-D or 1-D of at most
        SHAPE_LIKE_SIZE entries, as shapes, starts and axes are), computing it if need be; else None."""
        shape = self.shape(name)
        if name not in self.known and (name not in self.static_ops or shape is None or len(shape) > 1
                                       or None in shape or (shape and shape[0] > SHAPE_LIKE_SIZE)):
            return None
        if name not in self.known:
            self.known[name] = self._evaluate(name, _Source(source))
        return self.known[name]

    def _unknown_origin(self, name: str) -> str | None:
        """A graph input of integer type (shape-like) that ``name`` is computed from, if there is one."""
        stack, seen = [name], set()
        while stack:
            value = stack.pop()
            if value in seen or value in self.static_ops or value in self.known:
                continue
            seen.add(value)
            if value in self.graph_inputs:
                dtype = self.infos.get(value) and self.infos[value].dtype
                if dtype is not None and dtype.startswith(("int", "uint")):
                    return value
                continue
            stack.extend(self.sources.get(value, []))
        return None

    def _evaluate(self, name: str, site) -> np.ndarray:
        """Run the known ops that compute ``name`` (kuiper's own ops, on the NumPy backend)."""
        needed: dict[int, OpNode] = {}
        stack = [name]
        while stack:
            node = self.static_ops[stack.pop()]
            if id(node) not in needed:
                needed[id(node)] = node
                stack.extend(node.inputs)
        operands = {value: self.infos.get(value, OperandInfo(value))
                    for node in needed.values() for value in (*node.inputs, *node.outputs)}
        ir = ModelIR(list(needed.values()), operands, [], [name], source=site.source)
        value = build(ir, backend="numpy", fuse=False)(to_numpy=True)
        return np.asarray(value)
