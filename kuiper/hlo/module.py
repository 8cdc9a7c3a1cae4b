"""What the parser builds: a module of computations of instructions, plus attribute values."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .shapes import Shape

# Attributes that name one called computation, or a list of them.
CALLED_ATTRIBUTES = (
    "to_apply", "calls", "condition", "body", "true_computation", "false_computation",
    "branch_computations", "called_computations", "select", "scatter", "comparator",
)


_CALLED = frozenset(CALLED_ATTRIBUTES)


class Quoted(str):
    """A ``"quoted"`` attribute value (as opposed to a bare word such as ``LT``)."""


@dataclass(frozen=True)
class Slice:
    """``[start:limit:stride]`` in a ``slice={...}`` attribute."""

    start: int
    limit: int
    stride: int = 1


class Elided:
    """A constant printed as ``{...}``: the printer left its values out."""

    def __repr__(self) -> str:
        return "{...}"


ELIDED = Elided()


@dataclass(frozen=True)
class NanPayload:
    """``nan(0x7f)`` / ``-nan(0x7f)`` in a literal: a NaN whose mantissa bits are ``payload``."""

    negative: bool
    payload: int


@dataclass
class HloInstruction:
    name: str
    opcode: str
    shape: Shape
    operands: list[str]
    attributes: dict[str, Any] = field(default_factory=dict)
    # constant: the nested literal (lists of numbers/words) or ELIDED; parameter: its number.
    literal: Any = None
    parameter_number: int | None = None
    is_root: bool = False
    position: int = 0  # character offset in the text, for error messages
    computation: str = ""

    def called_computations(self) -> list[str]:
        """Names of the computations this instruction calls, in attribute order."""
        names: list[str] = []
        for key, value in self.attributes.items():
            if key not in _CALLED:
                continue
            if isinstance(value, str):
                names.append(value)
            elif isinstance(value, list):
                names.extend(v for v in value if isinstance(v, str))
        return names


@dataclass
class HloComputation:
    name: str
    instructions: list[HloInstruction]
    is_entry: bool = False
    # From a typed header ``%c (p: f32[2]) -> f32[2]``; None for the bare ``c {`` form.
    parameter_shapes: list[tuple[str, Shape]] | None = None
    result_shape: Shape | None = None
    position: int = 0

    def __post_init__(self):
        self.by_name = {instruction.name: instruction for instruction in self.instructions}

    @property
    def root(self) -> HloInstruction:
        for instruction in self.instructions:
            if instruction.is_root:
                return instruction
        return self.instructions[-1]

    def parameters(self) -> list[HloInstruction]:
        found = [i for i in self.instructions if i.opcode == "parameter"]
        return sorted(found, key=lambda i: i.parameter_number)


@dataclass
class HloModule:
    name: str
    computations: dict[str, HloComputation]
    attributes: dict[str, Any] = field(default_factory=dict)
    source: str = ""
    # The parsed text, to turn an instruction's position into a line number in messages.
    text: Any = field(default=None, repr=False)

    def where(self, instruction: HloInstruction) -> str:
        """``file:line`` of an instruction, for error messages."""
        line = self.text.line_column(instruction.position)[0] if self.text is not None else 0
        return f"{self.source or self.name}:{line}" if line else (self.source or self.name)

    @property
    def entry(self) -> HloComputation:
        for computation in self.computations.values():
            if computation.is_entry:
                return computation
        return list(self.computations.values())[-1]

    def instruction_count(self) -> int:
        return sum(len(c.instructions) for c in self.computations.values())
