"""The kernel language: parsing, semantic errors with carets, printing back, lowering to the IR, CLI."""

import json

import numpy as np
import pytest

import kuiper.te as te
from kuiper.cli import main
from kuiper.errors import KuiperError, ModelFormatError, TESyntaxError
from kuiper.ir import print_ir


def test_kernel_object_names_shapes_and_prints_back():
    kernel = te.parse(
        "C<4, 16>[i, j] = A<4, 16>[i, k] * B<16, 16>[k, j];\nD<4>[i] += select(i > 1 && i < 3, exp(A[i, 0]), -2.5);"
    )
    assert kernel.inputs == ["A", "B"] and kernel.outputs == ["C", "D"]
    assert kernel.shapes == {"C": (4, 16), "A": (4, 16), "B": (16, 16), "D": (4,)}
    assert kernel.dtypes["A"] == "float32"
    assert str(kernel).splitlines() == [
        "C<4, 16>[i, j] = A<4, 16>[i, k] * B<16, 16>[k, j];",
        "D<4>[i] += select(i > 1 && i < 3, exp(A<4, 16>[i, 0]), (-2.5));",
    ]
    assert te.parse(str(kernel)) == kernel
    assert kernel.ranges[0].free == {"i": (0, 4), "j": (0, 16), "k": (0, 16)}


@pytest.mark.parametrize(
    "text, message, column",
    [
        ("A<4>[i] = B<4>[i] + B<5>[i];", "B is declared with shape <5> here but <4> before", 21),
        ("A<4>[i] = B<4, 3>[i, k] * C<4>[k];", "index k ranges over 4 in C but over 3 in B", 27),
        ("A<4>[i] = B<8>[i // 2 + k];", "index k has no range", 25),
        ("A<4>[i] = B<4>[i + 1];", "subscript 0 of B ranges over [1, 4], outside the dimension's [0, 3]", 11),
        ("A<4>[i + 1] = B<4>[i];", "a left-hand subscript must be a plain index variable", 1),
        ("A<4>[i] = B<4>[i] $ 2;", "unexpected character '$'", 19),
        ("A<4>[i] = B<4>[i] % 2;", "% takes integers", 19),
        ("A<4>[i] = B<4>[i] + frob(B[i]);", "unknown function frob with 1 argument(s)", 21),
        ("A<4>[i] = B<4>[i];\nA<4>[i] = B<4>[i];", "A is written a second time with '='", 1),
        ("A<4>[i] = B[i];", "B has no shape", 11),
        ("A<4>[i] = B<4>[i]", "expected ';' at the end of the statement, found the end of the kernel", 18),
        ("A<4>[i] = B<4>[i];\nC<4>[i] = A<4>[i];", "A is written by this kernel and cannot be read by it", 11),
        ("A<4, 4>[i, i] = B<4>[i];", "index i appears twice on the left-hand side", 9),
        ("A<4>[i] = B<4>[k] where k = i, k = i;", "index k is bound by the where clause", 16),
        ("A<4>[i] = B<4>[i] > 0.0;", "the right-hand side is a condition, not a number", 11),
        ("A<4>[i] = B<4>[i / 2];", "a subscript is integer arithmetic on index variables", 16),
        ("A<4>[i] = B<4>[i] where B[i] > 0.0;", "a where condition is on index variables", 25),
        ("A<4>[i] = -(i < 2);", "neg is not defined for a bool tensor", 11),  # a type error of the IR
        ("select<4>[i] = 1.0;", "select is a keyword, not a tensor name", 1),
        ("A<4>[i] = select;", "select takes (condition, value if true, value if false)", 11),
        ("A<4>[i] = 2i;", "malformed number", 11),
    ],
)
def test_semantic_and_syntax_errors_point_at_the_spot(text, message, column):
    with pytest.raises(TESyntaxError) as caught:
        te.parse(text)
    error = caught.value
    assert isinstance(error, ModelFormatError) and isinstance(error, KuiperError)
    assert message in str(error)
    assert f"column {column}:" in str(error)
    caret_line = str(error).splitlines()[-1]
    assert caret_line.index("^") - 2 == column - 1


def test_error_on_a_later_line_names_the_line():
    with pytest.raises(TESyntaxError, match=r"line 2, column 15: B is declared"):
        te.parse("A<4>[i] = B<4>[i];\nC<4>[i] = 2 * B<5>[i];")


def test_lowering_builds_buffers_loops_guards_and_reductions():
    kernel = te.parse("Y<4>[i] = X<9>[2 * i + 1] * W<4, 3>[i, r] where 2 * i + r < 7;")
    fn = te.lower(kernel, name="strided")
    assert [(p.name, p.shape) for p in fn.params] == [("X", (9,)), ("W", (4, 3)), ("Y", (4,))]
    assert print_ir(fn).splitlines() == [
        "func strided(X: float32, W: float32, Y: float32) -> () {",
        "  for z0 in (0, 4, 1) {",
        "    Y[z0] = 0.0",
        "  }",
        "  for i in (0, 4, 1) {",
        "    for r in (0, 3, 1) {",
        "      if (((2 * i) + r) < 7) {",
        "        Y[i] = (Y[i] + (X[((2 * i) + 1)] * W[i, r]))",
        "      }",
        "    }",
        "  }",
        "}",
    ]


def test_where_bindings_become_loop_bounds_or_guards():
    kernel = te.parse("Y<6>[p] += X<4>[i] where i = p - 1;")
    y = te.compile(kernel)(X=np.arange(4, dtype=np.float32))["Y"]
    np.testing.assert_array_equal(y, [0, 0, 1, 2, 3, 0])  # p - 1 must lie in X's range [0, 4)
    assert "for (long long v_p = 1; v_p < 5; ++v_p)" in te.emit(kernel, "c++")


def test_a_tensor_may_share_its_name_with_an_index_variable():
    # Substituting the index variable i must leave the tensor i alone.
    kernel = te.parse("A<4>[j] = i<4>[i] where i = j;", dtype="float64")
    x = np.array([1.0, 2.0, 4.0, 8.0])
    np.testing.assert_array_equal(te.compile(kernel)(i=x)["A"], x)
    assert "u_A[v_j] = (u_A[v_j] + u_i[v_j]);" in te.emit(kernel, "c++")


def test_grad_of_unknown_tensor_is_an_error():
    kernel = te.parse("A<4>[i] = B<4>[i];")
    with pytest.raises(TESyntaxError, match=r"cannot differentiate with respect to 'Q'"):
        te.grad(kernel, ["Q"])


def test_cli_grad_writes_the_course_signature(tmp_path, capsys):
    case = {
        "name": "grad_case7",
        "ins": ["A"],
        "outs": ["B"],
        "data_type": "float",
        "kernel": "B<16, 32>[i, j] = A<32, 16>[j, i];",
        "grad_to": ["A"],
    }
    path = tmp_path / "case7.json"
    path.write_text(json.dumps(case))
    assert main(["te", "grad", str(path), "-o", str(tmp_path / "g.cc")]) == 0
    source = (tmp_path / "g.cc").read_text()
    assert "void grad_case7(float (&u_dB)[16][32], float (&u_dA)[32][16])" in source
    assert "u_dA[v_j][v_i] = (u_dA[v_j][v_i] + u_dB[v_i][v_j]);" in source
    assert main(["te", "grad", str(path), "-l", "te"]) == 0
    assert capsys.readouterr().out == "dA<32, 16>[j, i] += dB<16, 32>[i, j];\n"


def test_cli_reports_bad_cases(tmp_path, capsys):
    path = tmp_path / "bad.json"
    path.write_text(
        json.dumps(
            {
                "name": "g",
                "ins": ["A"],
                "outs": ["B"],
                "data_type": "float",
                "kernel": "B<4>[i] = A<4>[i + 1];",
                "grad_to": ["A"],
            }
        )
    )
    assert main(["te", "grad", str(path)]) == 1
    assert "subscript 0 of A ranges over [1, 4]" in capsys.readouterr().err
    path.write_text(json.dumps({"name": "g"}))
    assert main(["te", "grad", str(path)]) == 1
    assert "key 'ins' must be a list" in capsys.readouterr().err


def test_cli_run_evaluates_on_npy_inputs(tmp_path, capsys):
    (tmp_path / "k.te").write_text("S<3>[i] = A<3, 4>[i, j] * A<3, 4>[i, j];\n")
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.save(tmp_path / "a.npy", a)
    out = tmp_path / "out.npz"
    assert main(["te", "run", str(tmp_path / "k.te"), "-i", f"A={tmp_path / 'a.npy'}", "-o", str(out)]) == 0
    with np.load(out) as saved:
        np.testing.assert_array_equal(saved["S"], (a * a).sum(1))
    assert "S: shape (3,) float32" in capsys.readouterr().out


def test_large_grids_run_in_slabs(monkeypatch):
    from kuiper.te import execute

    kernel = te.parse("Y<6, 5>[i, j] = X<8, 7>[i + r, j + s] * W<3, 3>[r, s] where i + r < 7;", dtype="float64")
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((8, 7)), rng.standard_normal((3, 3))
    whole = te.compile(kernel)(X=x, W=w)["Y"]
    monkeypatch.setattr(execute, "GRID_POINTS", 40)  # 6*5*3*3 = 270 points: slabs of one row
    np.testing.assert_allclose(te.compile(kernel)(X=x, W=w)["Y"], whole, rtol=1e-15)
    expected = np.zeros((6, 5))
    for r in range(3):
        for s in range(3):
            rows = np.arange(6)[:, None] + r < 7
            expected += np.where(rows, x[r : r + 6, s : s + 5] * w[r, s], 0.0)
    np.testing.assert_allclose(whole, expected, rtol=1e-12)


@pytest.mark.parametrize(
    "text",
    [
        "A<4>[i] = B<4>[i] * i + 2;",  # an index variable as a value
        "A<4, 3>[i, j] = select(i > j || i == 0, pow(B<4>[i] * B[i] + 1.0, 1.5), abs(B[i]) - max(B[i], 0.25));",
        "A<3>[i] = B<7>[6 - 2 * i] / (1.0 + B[i] * B[i]);",  # a negative stride
        "A<4>[i] = B<2, 2>[i // 2, i % 2] + B<2, 2>[i % 2, i // 2];",  # a split, and its transpose
        "A<2>[i] = -B<2>[i];\nA[i] += exp(B<2>[1 - i]);",  # two statements into one output
    ],
)
def test_more_gradients_match_finite_differences(text):
    kernel = te.parse(text, dtype="float64")
    gradient = te.grad(kernel, kernel.inputs)
    rng = np.random.default_rng(0)
    x = {name: rng.uniform(0.1, 1, kernel.shapes[name]) for name in kernel.inputs}
    dy = {out: rng.uniform(-1, 1, kernel.shapes[out]) for out in kernel.outputs}
    run = te.compile(kernel)

    def loss(values):
        outputs = run(**values)
        return sum(float((outputs[out] * dy[out]).sum()) for out in kernel.outputs)

    grads = te.compile(gradient)(**{n: x[n] if n in x else dy[n[1:]] for n in gradient.inputs})
    for name in kernel.inputs:
        direction, step = rng.standard_normal(x[name].shape), 1e-6
        numeric = (loss({**x, name: x[name] + step * direction}) - loss({**x, name: x[name] - step * direction})) / (
            2 * step
        )
        assert abs(numeric - float((grads["d" + name] * direction).sum())) < 1e-7


def _differentiable_functions():
    from kuiper.ir.derivatives import DERIVATIVES
    from kuiper.ir.functions import INTRINSICS

    names = [name for name in INTRINSICS if name in DERIVATIVES]
    return names + ["max", "min", "pow"]


@pytest.mark.parametrize("function", _differentiable_functions())
def test_every_function_of_the_table_differentiates(function):
    """The function's derivative rule, through te.grad, against central differences (float64)."""
    from kuiper.ir.functions import INTRINSICS

    arity = INTRINSICS[function].arity if function in INTRINSICS else 2
    shift = " + 1.5" if function == "acosh" else ""  # inside every function's domain
    args = ", ".join(f"X{n}<6>[i]{shift}" for n in range(arity))
    kernel = te.parse(f"Y<6>[i] = {function}({args});", dtype="float64")
    gradient = te.grad(kernel, kernel.inputs)
    rng = np.random.default_rng(5)
    x = {name: rng.uniform(0.2, 0.7, 6) for name in kernel.inputs}
    if function in ("floor", "ceil", "round", "trunc"):
        x = {name: value + 0.1 for name, value in x.items()}  # away from the jumps
    dy = rng.uniform(-1, 1, 6)
    run = te.compile(kernel)
    grads = te.compile(gradient)(dY=dy, **{n: x[n] for n in gradient.inputs if n != "dY"})
    for name in kernel.inputs:
        step = 1e-6
        plus = run(**{**x, name: x[name] + step})["Y"]
        minus = run(**{**x, name: x[name] - step})["Y"]
        np.testing.assert_allclose(grads["d" + name], dy * (plus - minus) / (2 * step), rtol=1e-6, atol=1e-8)
