"""ModelIR: the frontend-neutral description of a model.

A frontend (``kuiper.formats.pnnx``, ``kuiper.hlo``, a third-party plugin)
turns a file into a ModelIR; the graph builder turns a ModelIR into a
runnable Model.  The IR names its inputs and outputs explicitly and holds
only compute ops, so nothing below this line knows any frontend's type
strings for "input" or "output".  Weights are NumPy arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

# An unknown dimension (``?`` in a PNNX shape) is None.
Shape = tuple  # tuple[int | None, ...]


@dataclass
class OperandInfo:
    """What the file says about one operand: its shape (None dims unknown) and dtype name."""

    name: str
    shape: Shape | None = None
    dtype: str | None = None  # numpy dtype name, e.g. "float32"
    # For an input whose dim 0 a frontend freed (shape[0] None): the batch the file declared, which the
    # other operands' declared shapes were traced with (the size budget scales them by fed / this).
    traced_batch: int | None = None


@dataclass
class OpNode:
    """One operator as the file declares it."""

    type: str
    name: str
    inputs: list[str]
    outputs: list[str]
    params: dict[str, Any] = field(default_factory=dict)
    attrs: dict[str, np.ndarray] = field(default_factory=dict)
    # input_keys[i] is the keyword (PNNX ``$key=operand``) bound to inputs[i], or None.
    input_keys: list[str | None] = field(default_factory=list)
    # Where the op came from, for error messages: "model.pnnx.param:12".
    source: str = ""

    def __post_init__(self):
        if not self.input_keys:
            self.input_keys = [None] * len(self.inputs)

    def describe(self) -> str:
        where = f" ({self.source})" if self.source else ""
        return f"op '{self.name}' of type {self.type}{where}"


@dataclass
class ModelIR:
    """Compute ops (in any order: the builder sorts them), the model's inputs and outputs, operand facts.

    ``inputs`` are the operands the caller feeds, in calling order; ``outputs``
    the operands the model returns, in order (an operand may appear twice).
    """

    ops: list[OpNode]
    operands: dict[str, OperandInfo]
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    source: str = ""

    def parameter_count(self) -> int:
        """The numbers held in the ops' weights, each array counted once (a frontend may hand one array to
        two ops: an ONNX initializer is a Constant and, folded, a Conv's weight)."""
        arrays = {id(array): array for node in self.ops for array in node.attrs.values()}
        return sum(int(array.size) for array in arrays.values())
