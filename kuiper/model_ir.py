"""ModelIR: the frontend-neutral description of a model.

A frontend (``kuiper.formats.pnnx``, ``kuiper.hlo``, a third-party plugin)
turns a file into a ModelIR; the graph builder turns a ModelIR into a
runnable Model.  The IR names its inputs and outputs explicitly and holds
only compute ops, so nothing below this line knows any frontend's type
strings for "input" or "output".  Weights are NumPy arrays; in the IR a built model keeps, a weight
its kernels hold in a layout of their own is a ``RemadeWeight`` (``np.asarray`` and ``copy`` turn it into
the array again), and one the build folded into another op's is a ``DroppedWeight`` (shape and dtype only).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .errors import WeightDroppedError

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


class WeightStandIn:
    """What stands in a built model's IR for a weight it does not hold there as an array: its shape and dtype
    (``parameter_count`` and ``kuiper info`` read those); a subclass says what ``np.asarray`` gives."""

    def __init__(self, shape: tuple, dtype):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __repr__(self) -> str:
        return f"{type(self).__name__}(shape={self.shape}, dtype={self.dtype})"


class RemadeWeight(WeightStandIn):
    """A weight a built model no longer holds as given, because a kernel keeps it in a layout of its own:
    ``np.asarray`` remakes its values, exactly (``Op.hand_over_weights``).  Building a model again from this
    IR turns it back into an array (``ModelIR.copy``)."""

    def __init__(self, shape: tuple, dtype, remake):
        super().__init__(shape, dtype)
        self._remake = remake

    def __array__(self, dtype=None, copy=None):
        array = self._remake()
        return array if dtype is None else array.astype(dtype, copy=False)


class DroppedWeight(WeightStandIn):
    """A weight of the file's that a built model does not use, because a build pass folded it into another op's
    weight (a batch norm into a conv, a layer scale into a Linear), so that the IR a Model keeps does not
    hold a second copy of those numbers.  ``np.asarray`` on it raises; ``kuiper.load_ir`` reads the file's
    weights."""

    def __init__(self, shape: tuple, dtype, where: str):
        super().__init__(shape, dtype)
        self.where = where  # the op and weight, for the error

    def __array__(self, dtype=None, copy=None):
        raise WeightDroppedError(f"{self.where}: the built model folded this weight into another op's at build and "
                                 "keeps no copy of it; kuiper.load_ir(path) reads the file's weights")


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

    def copy(self) -> ModelIR:
        """A copy whose nodes, their params and attrs, and the operand table are its own, the arrays shared,
        and remade weights (``RemadeWeight``) arrays again: what a build works on and its Model keeps, so
        that neither the graph passes nor a Model letting go of weights change the IR it was given.  A
        ``DroppedWeight`` raises ``WeightDroppedError`` here."""
        ops = [replace(node, inputs=list(node.inputs), outputs=list(node.outputs), params=dict(node.params),
                       attrs={key: np.asarray(value) if isinstance(value, WeightStandIn) else value
                              for key, value in node.attrs.items()}, input_keys=list(node.input_keys))
               for node in self.ops]
        return replace(self, ops=ops, operands=dict(self.operands), inputs=list(self.inputs),
                       outputs=list(self.outputs))
