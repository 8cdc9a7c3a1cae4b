"""The IR builder's with-scopes, the printer's text, and the Visitor/Mutator bases."""

from __future__ import annotations

import pytest

from kuiper.ir import IRBuilder, Mutator, Var, Visitor, make, print_ir
from kuiper.ir.nodes import Binary, Block, Const, For, Function, If


def build_row_sum() -> Function:
    b = IRBuilder()
    with b.function("row_sum", A="float32", idx="int64", b="float32") as (A, idx, acc):
        with b.for_("i", 0, 200) as i:
            b.assign(acc, acc + A[idx, i])
    return b.build()


def test_for_loop_prints_compactly():
    loop = build_row_sum().body.stmts[0]
    assert isinstance(loop, For)
    assert print_ir(loop, compact=True) == "for i in (0, 200, 1) { b = (b + A[idx, i]) }"


def test_function_prints_with_indentation():
    assert print_ir(build_row_sum()) == (
        "func row_sum(A: float32, idx: int64, b: float32) -> () {\n"
        "  for i in (0, 200, 1) {\n"
        "    b = (b + A[idx, i])\n"
        "  }\n"
        "}"
    )


def test_if_else_scopes():
    b = IRBuilder()
    x, y = b.var("x", "float32"), b.var("y", "float32")
    with b.if_(make.gt(x, 0)):
        b.assign(y, x * 2)
    with b.else_():
        b.assign(y, make.call("exp", x))
    block = b.build()
    assert isinstance(block, Block) and isinstance(block.stmts[0], If)
    assert print_ir(block) == "if (x > 0.0) {\n  y = (x * 2.0)\n} else {\n  y = exp(x)\n}"


def test_nested_scopes_and_steps():
    b = IRBuilder()
    acc = b.var("acc", "int64")
    with b.for_("i", 0, 4) as i:
        with b.for_("j", i, 10, 2) as j:
            with b.if_(make.eq(make.mod(j, 3), 0)):
                b.assign(acc, acc + j)
    assert print_ir(b.build(), compact=True) == (
        "for i in (0, 4, 1) { for j in (i, 10, 2) { if ((j % 3) == 0) { acc = (acc + j) } } }"
    )


def test_else_needs_an_if():
    b = IRBuilder()
    with pytest.raises(ValueError, match="else_"):
        with b.else_():
            pass


def test_expression_printing():
    x, n = Var("x0", "float32"), Var("n", "pyint")
    assert print_ir(make.select(make.lt(x, 1), x, make.neg(x))) == "select((x0 < 1.0), x0, (-x0))"
    assert print_ir(make.add(x, n)) == "(x0 + float32(n))"
    assert print_ir(make.maximum(x, 0)) == "max(x0, 0.0)"
    assert print_ir(make.call("atan2", x, 1)) == "atan2(x0, 1.0)"
    assert print_ir(make.floordiv(n, 2)) == "(n // 2)"
    assert str(make.pow(x, 3)) == "(x0 ** 3.0)"


def test_nodes_compare_structurally_and_hash():
    a = make.add(Var("x", "float32"), 1.5)
    b = make.add(Var("x", "float32"), 1.5)
    assert a == b and hash(a) == hash(b) and a is not b
    assert a != make.add(Var("x", "float32"), 2.5)
    assert Const(float("nan"), "float32") == Const(float("nan"), "float32")
    assert Const(1, "int64") != Const(1, "int32")


def _diamonds(depth: int, last: float):
    """v <- v * v + v, ``depth`` times from x, then + last: each value read twice by the next."""
    value = Var("x", "float32")
    for _ in range(depth):
        value = make.add(make.mul(value, value), value)
    return make.add(value, last)


def test_equal_copies_of_a_shared_dag_compare_in_one_visit_per_node():
    # Compared path by path, 60 levels would be 3^60 visits: this test would not end.
    a, b = _diamonds(60, 1.0), _diamonds(60, 1.0)
    assert a == b and a is not b
    assert a != _diamonds(60, 2.0)


class CountBinaries(Visitor):
    def __init__(self):
        self.count = 0

    def visit_Binary(self, node):
        self.count += 1
        self.generic_visit(node)


class RenameVars(Mutator):
    def visit_Var(self, node):
        return Var(node.name.upper(), node.dtype)


def test_visitor_walks_everything():
    counter = CountBinaries()
    counter(build_row_sum())
    assert counter.count == 1
    counter = CountBinaries()
    x = Var("x", "float32")
    counter((x + 1) * (x - 1))
    assert counter.count == 3


def test_mutator_rebuilds_only_what_changed():
    fn = build_row_sum()
    renamed = RenameVars()(fn)
    assert print_ir(renamed.body, compact=True) == "for I in (0, 200, 1) { B = (B + A[IDX, I]) }"
    untouched = Mutator()(fn)
    assert untouched is fn


def test_mutator_rewrites_shared_subtrees_once():
    calls = []

    class Spy(Mutator):
        def visit_Binary(self, node):
            calls.append(node)
            return self.generic_visit(node)

    x = Var("x", "float32")
    shared = x * x
    node = shared
    for _ in range(60):  # a DAG with 2**60 paths: must be linear work
        node = Binary("add", node, node, "float32")
    Spy()(node)
    assert len(calls) == 61
