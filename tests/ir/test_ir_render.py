"""The one IR renderer: every row of the function table has a spelling in every target, the
NumPy target computes what the array evaluator computes, and kuiper/ir has no import cycle."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import numpy as np
import pytest

from kuiper.ir import Mutator, make
from kuiper.ir.buffers import buffer
from kuiper.ir.codegen_numpy import compile_elementwise
from kuiper.ir.functions import BOOL_RESULT, INTEGRAL, INTRINSICS, NUMERIC, OPERATORS
from kuiper.ir.nodes import Assign, Block, Function, Var
from kuiper.ir.render_c import CRenderer
from kuiper.ir.render_numpy import NumpyRenderer

IR_DIR = Path(__file__).parents[2] / "kuiper" / "ir"
ROWS = [*OPERATORS.values(), *INTRINSICS.values()]


C_OPERATORS = {"+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>", ">", ">=", "<", "<=", "==", "!=", "!", "&&", "||"}


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.name)
def test_every_row_has_a_c_spelling_for_the_operands_it_takes(row):
    takes = ["float32", "float64"] if row.rule != INTEGRAL else []
    takes += ["int64", "int8", "bool"] if row.rule in (NUMERIC, INTEGRAL, BOOL_RESULT) else []
    for dtype in takes:
        spelling = CRenderer(device=True).spell(row, Var("v", dtype))
        assert spelling.isidentifier() or spelling in C_OPERATORS, f"{row.name} on {dtype}: {spelling!r}"
        if row.name in ("floordiv", "mod"):  # C's / and % round toward zero, Python's toward -inf
            assert spelling.startswith("kuiper_"), f"{row.name} on {dtype}: {spelling!r}"


def test_c_spells_by_operand_category():
    f32, f64, i64 = (Var(n, d) for n, d in (("a", "float32"), ("b", "float64"), ("n", "int64")))
    c = CRenderer(device=True)
    assert c.render(make.call("exp", f32)) == "expf(a)"
    assert c.render(make.call("exp", f64)) == "exp(b)"
    assert c.render(make.floordiv(i64, 2)) == "kuiper_floordiv_int(n, 2LL)"
    assert c.render(make.floordiv(f32, f32)) == "kuiper_floordiv_float(a, a)"
    assert c.render(make.bitwise("and", make.gt(f32, 0), make.lt(f32, 1))) == "((a > 0.0f) && (a < 1.0f))"
    assert c.render(make.bitwise("and", i64, 3)) == "(n & 3LL)"
    assert CRenderer(device=False).render(make.add(f32, float("inf"))) == "(a + INFINITY)"


def test_numpy_source_computes_like_the_array_evaluator(tmp_path, monkeypatch):
    x, n = Var("x", "float32"), Var("n", "int64")
    cases = {
        "negative_base": make.pow(-2, make.call("abs", n)),  # (-2) ** |n|, not -(2 ** |n|)
        "logical": make.select(make.logical_not(make.gt(x, 0.5)), x, make.maximum(x, 0.25)),
        "rounding": make.add(make.cast(make.floordiv(n, -3), "float32"), make.mod(x, -0.75)),
        "functions": make.mul(make.call("exp", x), make.call("atan2", x, -1.5)),
        "bits": make.bitwise("xor", make.bitwise("shl", n, 2), make.bitwise("or", n, 5)),
    }
    renderer = NumpyRenderer()
    lines = ["import numpy as np", ""]
    lines += [f"def {name}(x, n):\n    return {renderer.render(value)}\n" for name, value in cases.items()]
    (tmp_path / "rendered_numpy.py").write_text("\n".join(lines))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("rendered_numpy")
    xs = np.array([-1.5, -0.25, 0.0, 0.5, 0.75, 2.0], dtype=np.float32)
    ns = np.array([0, 1, 2, 3, -4, 7], dtype=np.int64)
    for name, value in cases.items():
        out = Var("out", value.dtype)
        fn = Function(name, (x, n), Block((Assign(out, value),)), (out,))
        expected = compile_elementwise(fn)(xs, ns)
        got = getattr(module, name)(xs, ns)
        assert np.asarray(got).dtype == expected.dtype, name
        np.testing.assert_array_equal(got, expected, err_msg=name)


def test_a_buffer_prints_as_its_name_and_passes_a_mutator_untouched():
    class Rename(Mutator):
        def visit_Var(self, node):
            return Var(node.name.upper(), node.dtype)

    A = buffer("A", (4,), "float32")
    access = A[Var("i", "int64")]
    assert str(A) == "A" and str(access) == "A[i]"
    assert str(Rename()(access)) == "A[I]"  # the tensor is a Buffer: visit_Var is for plain Vars


def _ir_imports(path: Path):
    """(imported kuiper.ir module, inside a function?) for each import of an ir module."""
    found = []

    def walk(node, in_function):
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.ImportFrom) and (child.module or "").startswith("kuiper"):
                names = [child.module] + [f"{child.module}.{alias.name}" for alias in child.names]
                found.extend((name, in_function) for name in names if name.startswith("kuiper.ir."))
            elif isinstance(child, ast.Import):
                found.extend((a.name, in_function) for a in child.names if a.name.startswith("kuiper"))
            walk(child, inside)

    walk(ast.parse(path.read_text()), False)
    return found


def test_kuiper_ir_has_no_import_cycle_and_no_import_inside_a_function():
    modules = {f"kuiper.ir.{p.stem}": p for p in IR_DIR.glob("*.py") if p.stem != "__init__"}
    graph = {}
    for name, path in modules.items():
        imports = _ir_imports(path)
        assert not [i for i, inside in imports if inside], f"{path.name} imports inside a function"
        graph[name] = {i for i, _ in imports if i in modules and i != name}
    done, active = set(), []

    def visit(name):
        assert name not in active, "import cycle: " + " -> ".join([*active[active.index(name):], name])
        if name in done:
            return
        active.append(name)
        for imported in graph[name]:
            visit(imported)
        active.pop()
        done.add(name)

    for name in graph:
        visit(name)
