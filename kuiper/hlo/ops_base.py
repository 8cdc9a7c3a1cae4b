"""The base of every HLO op: the instruction it runs and its attributes."""

from __future__ import annotations

from typing import Any

from ..ops.base import REQUIRED, Op
from .module import HloInstruction, HloModule
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
