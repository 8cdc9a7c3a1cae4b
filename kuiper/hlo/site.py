"""What a translator sees of one HLO instruction, and how it emits canonical ops for it.

A translator (``kuiper/hlo/translate_*.py``) turns one instruction into OpNodes of kuiper's
canonical op set: op types and typed params that any frontend could produce. Nothing of
the HLO frontend (no HloInstruction, HloModule or closure) goes into a node's params, so
the graph holds only data.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import OperatorParamError
from ..model_ir import ModelIR, OpNode
from .module import HloComputation, HloInstruction, HloModule
from .shapes import ArrayShape, Shape


@dataclass
class Site:
    """One instruction being translated: its operand and result leaves, and where it is."""

    instruction: HloInstruction
    module: HloModule
    name: str  # the graph name of the instruction's result (with any inlining prefix)
    inputs: list[str]  # operand leaves, in order
    outputs: list[str]  # result leaves, in order
    operand_leaf_counts: list[int]  # how many leaves each HLO operand spans
    declare: Callable[[str, ArrayShape], None]  # declares an intermediate operand
    # Lowers a called computation into a sub-graph (``vectorized``: written for scalars, fed arrays).
    lower_called: Callable[[HloComputation, bool], ModelIR] | None = None

    @property
    def source(self) -> str:
        return self.module.where(self.instruction)

    def operand_shape(self, index: int) -> Shape:
        computation = self.module.computations[self.instruction.computation]
        return computation.by_name[self.instruction.operands[index]].shape

    def temporary(self, suffix: str, shape: ArrayShape) -> str:
        """A new intermediate operand ``<name>/<suffix>`` of ``shape``."""
        name = f"{self.name}/{suffix}"
        self.declare(name, shape)
        return name

    def op(self, op_type: str, inputs: list[str], outputs: list[str], params: dict[str, Any] | None = None,
           attrs: dict | None = None, suffix: str = "") -> OpNode:
        """An OpNode for this instruction (named ``<name>/<suffix>`` when it is one of several)."""
        name = f"{self.name}/{suffix}" if suffix else self.name
        return OpNode(op_type, name, list(inputs), list(outputs), dict(params or {}), dict(attrs or {}),
                      source=self.source)

    def subgraph(self, computation: HloComputation, vectorized: bool = False) -> ModelIR:
        """``computation`` lowered into a ModelIR, to be held in a param (the builder builds it)."""
        return self.lower_called(computation, vectorized)

    def error(self, message: str) -> OperatorParamError:
        return OperatorParamError(
            f"{self.source}: {self.instruction.opcode} '{self.instruction.name}': {message}")


# A translator returns the OpNodes that compute ``site.outputs`` from ``site.inputs``.
Translator = Callable[[Site], list[OpNode]]
