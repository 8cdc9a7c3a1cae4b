"""Build IR statements with Python ``with`` blocks as scopes.

    b = IRBuilder()
    with b.function("row_sum", A="float32", idx="int64", b="float32") as (A, idx, acc):
        with b.for_("i", 0, 200) as i:
            b.assign(acc, acc + A[idx, i])
    func = b.build()

Each ``with`` opens a statement list; leaving it wraps the list into the
For/If/Function node and appends that to the enclosing scope.
"""

from __future__ import annotations

from contextlib import contextmanager

from kuiper.ir import make
from kuiper.ir.nodes import Assign, Block, For, Function, If, IRExpr, Stmt, Var


class IRBuilder:
    def __init__(self):
        self._scopes: list[list[Stmt | Function]] = [[]]

    # --- plain statements ------------------------------------------------------

    def emit(self, stmt: Stmt) -> None:
        self._scopes[-1].append(stmt)

    def assign(self, target: Var | IRExpr, value) -> None:
        self.emit(Assign(target, make.as_expr(value)))

    def var(self, name: str, dtype: str) -> Var:
        return make.var(name, dtype)

    # --- scopes -------------------------------------------------------------------

    @contextmanager
    def for_(self, name: str, start, stop, step=1):
        loop_var = make.var(name, "int64")
        body = self._open()
        yield loop_var
        self._close(body)
        self.emit(For(loop_var, make.as_expr(start), make.as_expr(stop), make.as_expr(step), Block(tuple(body))))

    @contextmanager
    def if_(self, cond: IRExpr):
        body = self._open()
        yield
        self._close(body)
        self.emit(If(make.as_expr(cond), Block(tuple(body))))

    @contextmanager
    def else_(self):
        scope = self._scopes[-1]
        if not scope or not isinstance(scope[-1], If) or scope[-1].else_body is not None:
            raise ValueError("else_() must directly follow an if_() block without an else")
        body = self._open()
        yield
        self._close(body)
        previous = scope.pop()
        scope.append(If(previous.cond, previous.then_body, Block(tuple(body))))

    @contextmanager
    def function(self, name: str, results: tuple[Var, ...] = (), **params: str):
        """Parameters as keyword arguments ``name=dtype``; yields their Vars in order."""
        param_vars = tuple(make.var(param, dtype) for param, dtype in params.items())
        body = self._open()
        yield param_vars
        self._close(body)
        self._scopes[-1].append(Function(name, param_vars, Block(tuple(body)), tuple(results)))

    # --- result -------------------------------------------------------------------------

    def build(self) -> Function | Block:
        """The single top-level Function, or else the top-level statements as a Block."""
        if len(self._scopes) != 1:
            raise ValueError("build() called inside an open scope")
        top = self._scopes[0]
        if len(top) == 1 and isinstance(top[0], Function):
            return top[0]
        return Block(tuple(top))

    def _open(self) -> list:
        body: list = []
        self._scopes.append(body)
        return body

    def _close(self, body: list) -> None:
        if self._scopes.pop() is not body:
            raise RuntimeError("IRBuilder scopes closed out of order")
