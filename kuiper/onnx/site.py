"""What a translator sees of one ONNX node, and how it emits canonical ops for it.

A translator (``translate_*.py``) turns one node into OpNodes of kuiper's canonical op set. It reads
the node's attributes through typed readers (``site.ints("pads")``), the dtypes and shapes of its
inputs, and the values of inputs that decide shapes (``site.constant(1, "shape")``), which must be
known when the model is loaded: an initializer, a ``Constant`` node, or something computed from those.
Every error names the node, its op type and where it is in the file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import OperatorParamError
from ..model_ir import ModelIR, OpNode, OperandInfo
from .values import Values

REQUIRED = object()
# AttributeProto.AttributeType
_FLOAT, _INT, _STRING, _TENSOR, _GRAPH, _FLOATS, _INTS, _STRINGS = 1, 2, 3, 4, 5, 6, 7, 8


@dataclass
class Site:
    """One node being translated."""

    node: Any  # onnx.NodeProto
    name: str  # the node's name (made up from its position when the file gives none)
    index: int  # its position in the graph
    opset: int  # the version of the node's domain the model imports
    values: Values
    source: str  # the model, for messages
    lower_subgraph: Callable[[Any], ModelIR] | None = None  # a graph attribute -> its ModelIR
    # A graph attribute without inputs -> its nodes translated into the enclosing graph (names prefixed).
    inline_subgraph: Callable[[Any, str], list[OpNode]] | None = None

    def subgraph(self, key: str) -> ModelIR:
        """The graph attribute ``key`` as a ModelIR: its own inputs, then the outer values it reads."""
        return self.lower_subgraph(self.graph(key))

    def inline(self, key: str) -> list[OpNode]:
        """The graph attribute ``key``'s nodes as this graph's own (its values stay known where they are)."""
        return self.inline_subgraph(self.graph(key), f"{self.name}/")

    # -- inputs and outputs ------------------------------------------------------
    @property
    def op_type(self) -> str:
        return self.node.op_type

    @property
    def inputs(self) -> list[str]:
        return list(self.node.input)

    @property
    def outputs(self) -> list[str]:
        return list(self.node.output)

    def has_input(self, index: int) -> bool:
        return index < len(self.node.input) and self.node.input[index] != ""

    def has_output(self, index: int) -> bool:
        return index < len(self.node.output) and self.node.output[index] != ""

    def input(self, index: int) -> str:
        if not self.has_input(index):
            raise self.error(f"expects input {index}, which the node does not give")
        return self.node.input[index]

    def dtype(self, index: int) -> str:
        """The dtype name of input ``index``."""
        return self.values.dtype(self.input(index), self)

    def out_dtype(self, index: int = 0) -> str:
        return self.values.dtype(self.node.output[index], self)

    def shape(self, index: int) -> tuple | None:
        """Input ``index``'s shape (None dims unknown), or None when not even its rank is known."""
        return self.values.shape(self.input(index))

    def rank(self, index: int) -> int:
        shape = self.shape(index)
        if shape is None:
            raise self.error(f"needs the rank of input {index} ('{self.input(index)}'), which the model "
                             "does not say and shape inference could not find")
        return len(shape)

    def static_shape(self, index: int) -> tuple[int, ...]:
        shape = self.shape(index)
        if shape is None or any(d is None for d in shape):
            raise self.error(f"needs the full shape of input {index} ('{self.input(index)}'), "
                             f"which is not known when the model is loaded ({shape})")
        return shape

    def spatial_shape(self, index: int) -> tuple[int, ...]:
        """Input ``index``'s dims after the batch and channel dims, which must be known (those two may be free)."""
        shape = self.shape(index)
        if shape is None or len(shape) < 2 or any(d is None for d in shape[2:]):
            raise self.error(f"needs the spatial dims of input {index} ('{self.input(index)}'), which are not "
                             f"known when the model is loaded ({shape})")
        return tuple(shape[2:])

    def is_known(self, index: int) -> bool:
        return self.has_input(index) and self.values.is_known(self.input(index))

    def constant(self, index: int, what: str) -> np.ndarray:
        """The value of input ``index`` (``what`` it is, for messages), which must be known at load time."""
        return self.values.value(self.input(index), self, what)

    def constant_ints(self, index: int, what: str) -> list[int]:
        value = self.constant(index, what)
        if value.dtype.kind not in "iu" or value.ndim > 1:
            raise self.error(f"input {index} ({what}) must be a 0-D or 1-D integer tensor, found {value.dtype} "
                             f"of shape {list(value.shape)}")
        return [int(v) for v in value.reshape(-1)]

    # -- attributes ----------------------------------------------------------------
    def attribute(self, key: str):
        for attribute in self.node.attribute:
            if attribute.name == key:
                return attribute
        return None

    def _read(self, key: str, kinds: tuple[int, ...], default, what: str):
        attribute = self.attribute(key)
        if attribute is None:
            if default is REQUIRED:
                raise self.error(f"missing attribute '{key}'")
            return default
        if attribute.ref_attr_name:
            raise self.error(f"attribute '{key}' refers to a function's attribute, which only a function body may")
        if attribute.type not in kinds:
            raise self.error(f"attribute '{key}' must be {what}")
        return attribute

    def int_(self, key: str, default: Any = REQUIRED) -> int:
        attribute = self._read(key, (_INT,), default, "an integer")
        return attribute if attribute is default else int(attribute.i)

    def float_(self, key: str, default: Any = REQUIRED) -> float:
        attribute = self._read(key, (_FLOAT,), default, "a float")
        return attribute if attribute is default else float(attribute.f)

    def string(self, key: str, default: Any = REQUIRED) -> str:
        attribute = self._read(key, (_STRING,), default, "a string")
        if attribute is default:
            return default
        try:
            return attribute.s.decode("utf-8")
        except UnicodeDecodeError:
            raise self.error(f"attribute '{key}' is not UTF-8 text") from None

    def ints(self, key: str, default: Any = REQUIRED) -> list[int]:
        attribute = self._read(key, (_INTS,), default, "a list of integers")
        return attribute if attribute is default else [int(v) for v in attribute.ints]

    def floats(self, key: str, default: Any = REQUIRED) -> list[float]:
        attribute = self._read(key, (_FLOATS,), default, "a list of floats")
        return attribute if attribute is default else [float(v) for v in attribute.floats]

    def tensor(self, key: str, default: Any = REQUIRED) -> np.ndarray:
        attribute = self._read(key, (_TENSOR,), default, "a tensor")
        return attribute if attribute is default else self.values.tensor_value(attribute.t, self.where(f"attribute '{key}'"))

    def graph(self, key: str):
        attribute = self._read(key, (_GRAPH,), REQUIRED, "a graph")
        return attribute.g

    # -- emitting ---------------------------------------------------------------------
    def temporary(self, suffix: str, dtype: str, shape: tuple | None = None) -> str:
        """A new intermediate value ``<node name>/<suffix>``."""
        name = f"{self.name}/{suffix}"
        self.values.declare(OperandInfo(name, shape, dtype))
        return name

    def op(self, op_type: str, inputs: list[str], outputs: list[str], params: dict | None = None,
           attrs: dict | None = None, suffix: str = "") -> OpNode:
        name = f"{self.name}/{suffix}" if suffix else self.name
        return OpNode(op_type, name, list(inputs), list(outputs), dict(params or {}), dict(attrs or {}),
                      source=self.where())

    def constant_op(self, value: np.ndarray, suffix: str) -> tuple[str, OpNode]:
        """A Constant op holding ``value`` (made at load time), and the value's name."""
        value = np.array(value, order="C")  # a copy that keeps a 0-d value 0-d
        name = self.temporary(suffix, str(value.dtype), tuple(value.shape))
        self.values.know(name, value)
        return name, OpNode("Constant", name, [], [name], {}, {"data": value}, source=self.where())

    # -- messages -------------------------------------------------------------------------
    def where(self, detail: str = "") -> str:
        place = f"{self.source}: node {self.index} '{self.name}' ({self.op_type})"
        return f"{place}, {detail}" if detail else place

    def error(self, message: str) -> OperatorParamError:
        return OperatorParamError(f"{self.where()}: {message}")
