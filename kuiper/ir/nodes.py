"""Tensor IR nodes, in the style of oneDNN Graph Compiler's Tensor IR.

Expressions carry a dtype (see dtypes.py); statements build loops and
functions.  All nodes are frozen dataclasses compared structurally; the hash
is computed once at construction, because lowering shares subtrees (``silu``
uses ``x`` twice) and a recursive hash would be exponential on such DAGs.

Build expressions with the typed constructors in make.py (or the operators
``+ - * / // % **`` and ``A[i, j]``, which make.py attaches), which apply the
promotion rules and insert casts; the raw constructors here trust their
arguments.  ``str(node)`` is the readable printer's text (printer.py attaches it).

In an elementwise Function a tensor parameter used in an expression stands
for its element at the current index; ``DimSize`` reads its shape.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from kuiper.ir.structural import Structural


class Node(Structural):
    """Base of every IR node: structural equality, cached hash, generic children."""

    def children(self) -> tuple[Node, ...]:
        found: list[Node] = []
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Node):
                found.append(value)
            elif isinstance(value, tuple):
                found.extend(v for v in value if isinstance(v, Node))
        return tuple(found)


class IRExpr(Node):
    """An expression with a ``dtype``.

    Its arithmetic operators (``+ - * / // % **``, unary ``-``) and ``Var``'s
    ``A[i, j]`` build typed nodes with make.py's constructors, which attach
    them (make.py imports this module, so this module cannot import it).
    """

    dtype: str


# --- expressions ------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Const(IRExpr):
    """A constant; ``value`` is a Python scalar already converted to ``dtype``."""

    value: bool | int | float
    dtype: str

    def _key(self) -> tuple:
        return (self.dtype, type(self.value).__name__, repr(self.value))


@dataclass(frozen=True, eq=False)
class Var(IRExpr):
    """A named value: a function parameter, a temporary, a loop variable."""

    name: str
    dtype: str


@dataclass(frozen=True, eq=False)
class Unary(IRExpr):
    """``neg`` (arithmetic negation) or ``not`` (logical not of a bool)."""

    op: str
    operand: IRExpr
    dtype: str


@dataclass(frozen=True, eq=False)
class Binary(IRExpr):
    """Arithmetic and bitwise operators; both operands already have ``dtype``.

    ops: add sub mul div floordiv mod fmod pow max min and or xor shl shr
    """

    op: str
    lhs: IRExpr
    rhs: IRExpr
    dtype: str


@dataclass(frozen=True, eq=False)
class Compare(IRExpr):
    """gt ge lt le eq ne; operands share a dtype, the result is bool (pybool for scalars)."""

    op: str
    lhs: IRExpr
    rhs: IRExpr
    dtype: str


@dataclass(frozen=True, eq=False)
class Call(IRExpr):
    """An intrinsic math function: exp, log1p, erf, atan2, logaddexp, floor ..."""

    func: str
    args: tuple[IRExpr, ...]
    dtype: str


@dataclass(frozen=True, eq=False)
class Cast(IRExpr):
    operand: IRExpr
    dtype: str


@dataclass(frozen=True, eq=False)
class Select(IRExpr):
    """``cond ? true_value : false_value``, elementwise."""

    cond: IRExpr
    true_value: IRExpr
    false_value: IRExpr
    dtype: str


@dataclass(frozen=True, eq=False)
class Indexing(IRExpr):
    """``A[i, j]``: one element of a tensor."""

    tensor: Var
    indices: tuple[IRExpr, ...]
    dtype: str


@dataclass(frozen=True, eq=False)
class DimSize(IRExpr):
    """``size(x, axis)``: a pyint; with axis None the whole shape (dtype pyshape)."""

    tensor: Var
    axis: int | None
    dtype: str


# --- statements ---------------------------------------------------------------


class Stmt(Node):
    pass


@dataclass(frozen=True, eq=False)
class Assign(Stmt):
    target: Var | Indexing
    value: IRExpr


@dataclass(frozen=True, eq=False)
class Block(Stmt):
    stmts: tuple[Stmt, ...]


@dataclass(frozen=True, eq=False)
class For(Stmt):
    var: Var
    start: IRExpr
    stop: IRExpr
    step: IRExpr
    body: Block


@dataclass(frozen=True, eq=False)
class If(Stmt):
    cond: IRExpr
    then_body: Block
    else_body: Block | None = None


@dataclass(frozen=True, eq=False)
class Function(Node):
    """A function with typed parameters.

    For an elementwise function (what ``lower`` makes) the body assigns each
    variable in ``results``; ``returns_list`` marks a top-level ``[...]``
    expression, whose results are returned as a Python list.
    """

    name: str
    params: tuple[Var, ...]
    body: Block
    results: tuple[Var, ...] = ()
    returns_list: bool = False
