"""The base of every HLO op: the instruction it runs, its attributes, and called computations as sub-Models."""

from __future__ import annotations

from typing import Any

from ..ops.base import REQUIRED, Op
from .module import HloComputation, HloInstruction, HloModule
from .shapes import ArrayShape


class HloOp(Op):
    """An op made from one HLO instruction (``node.params['instruction']``)."""

    def setup(self) -> None:
        self.instruction: HloInstruction = self.param("instruction")
        self.module: HloModule = self.param("module")
        self.shape = self.instruction.shape
        self.hlo_setup()

    def hlo_setup(self) -> None:
        """Read attributes; raise for anything unsupported.  Runs once, at build time."""

    # -- attributes ----------------------------------------------------------------
    def attribute(self, key: str, default: Any = REQUIRED) -> Any:
        if key in self.instruction.attributes:
            return self.instruction.attributes[key]
        if default is REQUIRED:
            raise self.error(f"missing attribute '{key}'")
        return default

    def ints(self, key: str, default: Any = REQUIRED) -> tuple[int, ...]:
        """An attribute that is a list of integers, ``{1,2}``."""
        value = self.attribute(key, default)
        if isinstance(value, int) and not isinstance(value, bool):
            value = [value]
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, int) for v in value):
            raise self.error(f"attribute '{key}' must be a list of integers, found {value!r}")
        return tuple(value)

    def integer(self, key: str, default: Any = REQUIRED) -> int:
        value = self.attribute(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(f"attribute '{key}' must be an integer, found {value!r}")
        return value

    def flag(self, key: str, default: bool = False) -> bool:
        value = self.attribute(key, default)
        if value in (True, "true"):
            return True
        if value in (False, "false"):
            return False
        raise self.error(f"attribute '{key}' must be true or false, found {value!r}")

    def word(self, key: str, default: Any = REQUIRED) -> str:
        value = self.attribute(key, default)
        if not isinstance(value, str):
            raise self.error(f"attribute '{key}' must be a word, found {value!r}")
        return value

    @property
    def result(self) -> ArrayShape:
        """The result shape, which must be an array (not a tuple)."""
        if self.shape.is_tuple:
            raise self.error(f"expects an array result, found the tuple {self.shape}")
        return self.shape

    def dtype(self, shape: ArrayShape | None = None):
        """The backend's dtype for ``shape`` (default: the result)."""
        return getattr(self.xp, (shape or self.result).dtype)

    def operand_shape(self, index: int):
        name = self.instruction.operands[index]
        return self.module.computations[self.instruction.computation].by_name[name].shape

    # -- called computations -------------------------------------------------------
    def called(self, key: str) -> HloComputation:
        name = self.attribute(key)
        if isinstance(name, list) and len(name) == 1:
            name = name[0]
        if not isinstance(name, str) or name not in self.module.computations:
            raise self.error(f"attribute '{key}' must name a computation, found {name!r}")
        return self.module.computations[name]

    def sub_model(self, computation: HloComputation, vectorized: bool = False) -> SubModel:
        """``computation`` built once as a Model on this op's backend.

        ``vectorized``: the computation is written for scalars (a reducer, a comparator)
        and is called with whole arrays, applying it element by element.
        """
        from ..graph import build
        from .lower import lower_computation

        return SubModel(build(lower_computation(self.module, computation, vectorized), backend=self.backend, fuse=False))


class SubModel:
    """A called computation as a function of flat arrays returning a list of flat arrays."""

    def __init__(self, model):
        self.model = model
        self.input_count = len(model.inputs)

    def __call__(self, *arrays) -> list:
        result = self.model(*arrays)
        return list(result) if len(self.model.outputs) != 1 else [result]


def binary_root_opcode(computation: HloComputation) -> str | None:
    """The opcode when ``computation`` is just ``ROOT op(parameter(0), parameter(1))``, else None.

    Such reducers (add, multiply, maximum, minimum, and, or) map to array reductions.
    """
    root = computation.root
    parameters = computation.parameters()
    if len(parameters) != 2 or len(root.operands) != 2 or root.shape.is_tuple:
        return None
    if {computation.by_name[o].parameter_number for o in root.operands} != {0, 1}:
        return None
    if any(computation.by_name[o].opcode != "parameter" for o in root.operands):
        return None
    return root.opcode
