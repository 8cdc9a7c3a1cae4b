"""The expression AST: small frozen dataclasses, hashable and comparable, and their canonical text.

Equality is structural, so ``parse(to_string(e)) == e`` is the round-trip
property the tests check.  ``Literal`` compares by (type, repr) so that
``1``, ``1.0`` and ``True`` stay different and ``nan`` equals itself.

The hash is computed once, at construction: substitution shares subtrees
(``add(@0,mul(@0,2))`` with ``@0`` replaced), and a recursive hash of such
a DAG would take time exponential in its depth.

``to_string`` prints an AST in canonical prefix form, which the parser reads
back; it lives beside the nodes because ``str(node)`` is that text.  The
output is also valid PNNX: ``add(mul(@0,0.5),log1p(@0))``, lists as
``[size(@0,0),-1]``.  Floats print with ``repr`` (shortest text that reads
back to the same double): ``2.0``, ``1e-05``, ``inf``, ``nan``.
"""

from __future__ import annotations

from dataclasses import dataclass

from kuiper.ir.recursion import deep_recursion
from kuiper.ir.structural import Structural
from kuiper.pnnx_expr.functions import FUNCTIONS

LiteralValue = int | float | bool | complex | None


class Expr(Structural):
    """Base class of every AST node: structural equality, hash cached at construction."""

    def children(self) -> tuple[Expr, ...]:
        return ()

    def __str__(self) -> str:
        return to_string(self)


@dataclass(frozen=True, eq=False)
class Input(Expr):
    """``@N``: the op's N-th input."""

    index: int

    def __post_init__(self):
        if not isinstance(self.index, int) or isinstance(self.index, bool) or self.index < 0:
            raise ValueError(f"input index must be a non-negative int, got {self.index!r}")
        super().__post_init__()


@dataclass(frozen=True, eq=False)
class Literal(Expr):
    """A constant: int, float (incl. inf/nan), bool, complex or None."""

    value: LiteralValue

    def __post_init__(self):
        if self.value is not None and type(self.value) not in (int, float, bool, complex):
            raise ValueError(f"literal must be int, float, bool, complex or None, got {self.value!r}")
        super().__post_init__()

    def _key(self) -> tuple[str, str]:
        return (type(self.value).__name__, repr(self.value))


@dataclass(frozen=True, eq=False)
class Call(Expr):
    """``name(args...)``: a function from the table in functions.py."""

    name: str
    args: tuple[Expr, ...]

    def __post_init__(self):
        info = FUNCTIONS.get(self.name)
        if info is None:
            raise ValueError(f"unknown function {self.name!r}")
        if not isinstance(self.args, tuple) or len(self.args) != info.arity:
            raise ValueError(f"{self.name} takes {info.arity} argument(s), got {self.args!r}")
        super().__post_init__()

    def children(self) -> tuple[Expr, ...]:
        return self.args


@dataclass(frozen=True, eq=False)
class Size(Expr):
    """``size(@N,d)``: a Python int; ``size(@N)`` (dim None): the whole shape."""

    input: Input
    dim: int | None

    def children(self) -> tuple[Expr, ...]:
        return (self.input,)


@dataclass(frozen=True, eq=False)
class ListExpr(Expr):
    """``[a,b,...]``: a list, only ever at the top level (shape arguments)."""

    items: tuple[Expr, ...]

    def children(self) -> tuple[Expr, ...]:
        return self.items


def call(name: str, *args: Expr | LiteralValue) -> Call:
    """Build a Call, wrapping plain Python values as literals: ``call("add", Input(0), 1)``."""
    return Call(name, tuple(a if isinstance(a, Expr) else Literal(a) for a in args))


def to_string(expr: Expr) -> str:
    with deep_recursion():
        return _print(expr)


def _print(expr: Expr) -> str:
    if isinstance(expr, Input):
        return f"@{expr.index}"
    if isinstance(expr, Literal):
        return format_literal(expr.value)
    if isinstance(expr, Call):
        return f"{expr.name}({','.join(_print(arg) for arg in expr.args)})"
    if isinstance(expr, Size):
        if expr.dim is None:
            return f"size({_print(expr.input)})"
        return f"size({_print(expr.input)},{expr.dim})"
    if isinstance(expr, ListExpr):
        return f"[{','.join(_print(item) for item in expr.items)}]"
    raise TypeError(f"not an expression node: {expr!r}")


def format_literal(value: object) -> str:
    if value is None or isinstance(value, (bool, int)):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, complex):
        return f"{value.real!r}+{value.imag!r}j"
    raise TypeError(f"not a literal value: {value!r}")
