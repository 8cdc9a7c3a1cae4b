"""The kernel object: statements over named, shaped tensors, checked once at construction.

A statement ``T<shape>[i, j] (= | +=) value [where v = expr, cond, ...];`` means:
for every value of its *free* index variables (the left-hand ones and the
summed ones), compute the *bound* variables of the ``where`` clause in order;
if each bound variable lies in its range and every condition holds, add
``value`` to ``T[i, j]``.  Outputs start at zero, so ``=`` and ``+=`` differ
only in that ``=`` must be the first write of a tensor.

Ranges: a left-hand variable ranges over its dimension; any other free
variable over the dimension of every subscript where it stands alone (they
must agree).  A bound variable must lie within every such subscript's
dimension; one with no such subscript takes the range of its defining
expression (no implicit guard).  Conditions of the form
``v < 5`` / ``v >= 1`` narrow that range for the bounds check.  Every
subscript must then provably stay inside its tensor.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kuiper.errors import TESyntaxError
from kuiper.ir.buffers import Buffer
from kuiper.ir.identifiers import identifier_problem
from kuiper.ir.nodes import Compare, Const, Indexing, IRExpr, Node, Var
from kuiper.te.intervals import Bounds, bounds, variables
from kuiper.te.printer import format_statement


@dataclass
class SourceMap:
    """Where the parser found things, for error carets; absent for kernels built in code."""

    text: str
    statement: int
    nodes: dict = field(default_factory=dict)  # access node -> offset of its first occurrence
    names: dict = field(default_factory=dict)  # index variable name -> offset of its first occurrence

    def of(self, node_or_name) -> int | None:
        if isinstance(node_or_name, str):
            return self.names.get(node_or_name, self.statement)
        return self.nodes.get(node_or_name, self.statement)


@dataclass(frozen=True)
class Statement:
    target: Indexing
    value: IRExpr
    accumulate: bool = False
    bindings: tuple[tuple[Var, IRExpr], ...] = ()
    conditions: tuple[IRExpr, ...] = ()
    source: SourceMap | None = field(default=None, compare=False, repr=False)

    @property
    def tensor(self) -> Buffer:
        return self.target.tensor

    def accesses(self) -> list[Indexing]:
        """Every tensor read in the value, in order of appearance, repeats included."""
        found: list[Indexing] = []

        def walk(node: Node):
            if isinstance(node, Indexing):
                found.append(node)
            for child in node.children():
                walk(child)

        walk(self.value)
        return found

    def __str__(self) -> str:
        return format_statement(self)


@dataclass(frozen=True)
class Ranges:
    """Per statement: half-open ranges of the free variables, and of the bound ones that are guarded."""

    free: dict[str, tuple[int, int]]
    guarded: dict[str, tuple[int, int]]
    bounds: dict[str, Bounds]  # inclusive bounds of every variable, for interval checks


class Kernel:
    def __init__(self, statements, inputs=None, outputs=None, name: str = "kernel", declared=()):
        """``declared``: Buffers of inputs no statement reads or outputs none writes (they stay zero)."""
        self.statements: tuple[Statement, ...] = tuple(statements)
        self.name = check_kernel_name(name)
        self.buffers: dict[str, Buffer] = {}
        written: list[str] = []
        read: list[str] = []
        for stmt in self.statements:
            self._declare(stmt, stmt.target, stmt.tensor)
            if stmt.tensor.name in written and not stmt.accumulate:
                self._fail(stmt, stmt.target, f"{stmt.tensor.name} is written a second time with '=': use '+='")
            if stmt.tensor.name not in written:
                written.append(stmt.tensor.name)
            for access in stmt.accesses():
                self._declare(stmt, access, access.tensor)
                if access.tensor.name not in read:
                    read.append(access.tensor.name)
        for stmt in self.statements:
            for access in stmt.accesses():
                if access.tensor.name in written:
                    self._fail(stmt, access, f"{access.tensor.name} is written by this kernel and cannot be read by it")
        for extra in declared:
            self.buffers.setdefault(extra.name, extra)
        self.inputs: list[str] = _order(read, inputs, "inputs", "reads", self.buffers)
        self.outputs: list[str] = _order(written, outputs, "outputs", "writes", self.buffers)
        self.ranges: tuple[Ranges, ...] = tuple(check_statement(stmt) for stmt in self.statements)

    # --- what callers read -------------------------------------------------------

    @property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {name: buffer.shape for name, buffer in self.buffers.items()}

    @property
    def dtypes(self) -> dict[str, str]:
        return {name: buffer.dtype for name, buffer in self.buffers.items()}

    def __str__(self) -> str:
        return "\n".join(str(stmt) for stmt in self.statements)

    def __repr__(self) -> str:
        return f"<te.Kernel {self.name}: {', '.join(self.inputs)} -> {', '.join(self.outputs)}>"

    def __eq__(self, other) -> bool:
        return (
            isinstance(other, Kernel)
            and self.statements == other.statements
            and self.inputs == other.inputs
            and self.outputs == other.outputs
        )

    __hash__ = None

    # --- construction checks ------------------------------------------------------

    def _declare(self, stmt: Statement, node: Indexing, buffer: Buffer) -> None:
        problem = identifier_problem(buffer.name)
        if problem is not None:  # a kernel built in code; parsed names are identifiers already
            self._fail(stmt, node, f"tensor name {problem}")
        known = self.buffers.setdefault(buffer.name, buffer)
        if known.shape != buffer.shape:
            self._fail(
                stmt, node, f"{buffer.name} is declared with shape {_shape(buffer)} here but {_shape(known)} before"
            )
        if known.dtype != buffer.dtype:
            self._fail(stmt, node, f"{buffer.name} has dtype {buffer.dtype} here but {known.dtype} before")
        if len(node.indices) != len(buffer.shape):
            self._fail(
                stmt, node, f"{buffer.name} has {len(buffer.shape)} dimensions but {len(node.indices)} subscripts"
            )

    @staticmethod
    def _fail(stmt: Statement, where, message: str):
        fail(stmt, where, message)


def check_kernel_name(name) -> str:
    """``name`` if it is an identifier (kuiper.ir.identifiers), else a TESyntaxError.  Whether it may
    name a function in C++ or Python (not ``int``, not ``return``) is checked when code is emitted."""
    problem = identifier_problem(name)
    if problem is not None:
        raise TESyntaxError(f"kernel name {problem}")
    return name


def fail(stmt: Statement, where, message: str):
    if stmt.source is None:
        raise TESyntaxError(f"{message} (in: {stmt})")
    raise TESyntaxError(message, stmt.source.text, stmt.source.of(where))


def _order(found: list[str], given, what: str, verb: str, buffers) -> list[str]:
    if given is None:
        return list(found)
    given = list(given)
    if not set(found) <= set(given) or len(set(given)) != len(given) or not set(given) <= set(buffers):
        raise TESyntaxError(f"{what} given as {given}, but the kernel {verb} {found}")
    return given


def _shape(buffer: Buffer) -> str:
    return "<" + ", ".join(str(d) for d in buffer.shape) + ">"


# --- ranges and bounds ------------------------------------------------------------------


def check_statement(stmt: Statement) -> Ranges:
    target = stmt.target
    lhs_names: list[str] = []
    for index in target.indices:
        if not isinstance(index, Var):
            fail(stmt, target, "a left-hand subscript must be a plain index variable (use a where clause)")
        if index.name in lhs_names:
            fail(stmt, index.name, f"index {index.name} appears twice on the left-hand side")
        lhs_names.append(index.name)
    bound_names = [var.name for var, _ in stmt.bindings]
    for name in bound_names:
        if name in lhs_names or bound_names.count(name) > 1:
            fail(
                stmt, name, f"index {name} is bound by the where clause and cannot be a left-hand index or bound twice"
            )

    # The dimension of every subscript where a variable stands alone.
    # (A bound variable is guarded to lie in all of them, so for it the smallest counts; so
    # it does for a free one that a condition keeps below the smallest.)
    plain: dict[str, tuple[int, Indexing]] = {}
    for access in stmt.accesses():
        for index, extent in zip(access.indices, access.tensor.shape):
            if isinstance(index, Var) and index.name not in lhs_names:
                seen = plain.setdefault(index.name, (extent, access))
                smallest = min(seen, (extent, access), key=lambda pair: pair[0])
                limit = _upper_limit(index.name, stmt.conditions)
                if index.name in bound_names or (limit is not None and limit <= smallest[0]):
                    plain[index.name] = smallest
                elif seen[0] != extent:
                    fail(
                        stmt,
                        access,
                        f"index {index.name} ranges over {extent} in {access.tensor.name} "
                        f"but over {seen[0]} in {seen[1].tensor.name}",
                    )

    free: dict[str, tuple[int, int]] = {name: (0, extent) for name, extent in zip(lhs_names, stmt.tensor.shape)}
    mentioned = variables(stmt.value)
    for _, expr in stmt.bindings:
        mentioned += variables(expr)
    for cond in stmt.conditions:
        mentioned += variables(cond)
    for name in mentioned:
        if name in free or name in bound_names:
            continue
        if name not in plain:
            fail(stmt, name, f"index {name} has no range: it is not on the left and stands alone in no subscript")
        free[name] = (0, plain[name][0])

    bound_so_far: list[str] = []
    for var, expr in stmt.bindings:  # a binding reads free variables and those bound before it only
        for name in variables(expr):
            if name not in free and name not in bound_so_far:
                fail(stmt, var.name, f"index {name} is used in the where clause before it is bound")
        bound_so_far.append(var.name)

    env: dict[str, Bounds] = {name: (lo, hi - 1) for name, (lo, hi) in free.items()}
    _narrow_by_conditions(env, stmt.conditions)
    guarded: dict[str, tuple[int, int]] = {}
    for var, expr in stmt.bindings:
        span = bounds(expr, env)
        if var.name in plain:
            guarded[var.name] = (0, plain[var.name][0])
            env[var.name] = (0, plain[var.name][0] - 1)
        elif span is None:
            fail(stmt, var.name, f"cannot bound {var.name}: its expression is not integer index arithmetic")
        elif max(abs(span[0]), abs(span[1])) > 2**62:  # C's long long must hold it, with room
            fail(stmt, var.name, f"{var.name} ranges over [{span[0]}, {span[1]}], beyond 2^62")
        else:
            env[var.name] = span
        _narrow_by_conditions(env, stmt.conditions)
    for access in [target, *stmt.accesses()]:
        for axis, (index, extent) in enumerate(zip(access.indices, access.tensor.shape)):
            span = bounds(index, env)
            if span is None:
                fail(stmt, access, f"subscript {axis} of {access.tensor.name} is not integer index arithmetic")
            if span[0] < 0 or span[1] >= extent:
                fail(
                    stmt,
                    access,
                    f"subscript {axis} of {access.tensor.name} ranges over [{span[0]}, {span[1]}], "
                    f"outside the dimension's [0, {extent - 1}]",
                )
    return Ranges(free, guarded, env)


def _upper_limit(name: str, conditions) -> int | None:
    """The smallest n with a condition ``name < n`` (or ``name <= n - 1``), if any."""
    env = {name: (-(2**62), 2**62)}
    _narrow_by_conditions(env, conditions)
    high = env[name][1]
    return None if high >= 2**62 else high + 1


def _narrow_by_conditions(env: dict[str, Bounds], conditions) -> None:
    """Apply conditions ``v OP constant`` (either side) to v's bounds."""
    flip = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq"}
    for cond in conditions:
        if not isinstance(cond, Compare):
            continue
        lhs, rhs, op = cond.lhs, cond.rhs, cond.op
        if isinstance(lhs, Const) and isinstance(rhs, Var):
            lhs, rhs, op = rhs, lhs, flip.get(op, op)
        if not (isinstance(lhs, Var) and isinstance(rhs, Const)) or lhs.name not in env:
            continue
        lo, hi = env[lhs.name]
        c = int(rhs.value)
        if op == "lt":
            hi = min(hi, c - 1)
        elif op == "le":
            hi = min(hi, c)
        elif op == "gt":
            lo = max(lo, c + 1)
        elif op == "ge":
            lo = max(lo, c)
        elif op == "eq":
            lo, hi = max(lo, c), min(hi, c)
        env[lhs.name] = (lo, hi)
