"""The tensor-expression frontend under hostile input: no injection, no blow-up, no raw exception.

Names reach emitted C++, CUDA and NumPy source; they must come out in a namespace of
their own (tensors ``u_<name>``, index variables ``v_<name>``) or be refused at parse
time.  Deep input is a TESyntaxError (or runs), sizes are checked before allocating.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuiper import te
from kuiper.cli import main
from kuiper.errors import SizeLimitError, TESyntaxError
from kuiper.ir.codegen_cpp import cuda_source
from kuiper.ir.identifiers import function_name_problem

INJECTIONS = [
    'k(float (&A)[1]) {} int main() { system("id"); return 0; } void k2',
    '#include "/etc/passwd"',
    "k\nimport os\nos.system('id')\ndef k2",
    "k'; x = \"",
    "k(): pass\nos",
    "",
    "1abc",
    "k-1",
    "ke\u0301",  # not ASCII
]
RESERVED = ["int", "return", "main", "np", "class", "def", "lambda", "NAN", "INFINITY", "kuiper_max", "__x", "for"]
GXX = shutil.which("g++")


def _compile_cpp(source: str, tmp_path) -> None:
    path = tmp_path / "kernel.cc"
    path.write_text(source)
    build = subprocess.run([GXX, "-std=c++17", "-fsyntax-only", "-Wall", "-Werror", str(path)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]


# --- injection ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", INJECTIONS)
def test_a_kernel_name_that_is_not_an_identifier_is_refused_at_parse(name):
    with pytest.raises(TESyntaxError, match="kernel name"):
        te.parse("A<2>[i] = B<2>[i];", name=name)


@pytest.mark.parametrize("name", INJECTIONS)
@pytest.mark.parametrize("language", ["c++", "cuda", "numpy"])
def test_emit_refuses_an_injected_function_name(name, language):
    kernel = te.parse("A<2>[i] = B<2>[i];")
    with pytest.raises(TESyntaxError, match="kernel name"):
        te.emit(kernel, language, name=name)


@pytest.mark.parametrize("name", RESERVED)
@pytest.mark.parametrize("language", ["c++", "cuda", "numpy"])
def test_reserved_function_names_are_refused_where_code_is_emitted(name, language):
    kernel = te.parse("A<2>[i] = B<2>[i];", name=name)  # a name is fine for running and printing
    assert str(kernel) == "A<2>[i] = B<2>[i];"
    with pytest.raises(TESyntaxError, match="kernel name .* cannot name the emitted function"):
        te.emit(kernel, language)


def test_cli_grad_refuses_an_injected_case_name(tmp_path, capsys):
    case = {"name": 'g(float (&A)[2]) {} int main() { system("id"); } void h', "ins": ["B"], "outs": ["A"],
            "data_type": "float", "kernel": "A<2>[i] = B<2>[i];", "grad_to": ["B"]}
    (tmp_path / "case.json").write_text(json.dumps(case))
    assert main(["te", "grad", str(tmp_path / "case.json"), "-o", str(tmp_path / "g.cc")]) == 1
    error = capsys.readouterr().err
    assert "case.json" in error and "kernel name" in error and len(error.strip().splitlines()) == 1
    assert not (tmp_path / "g.cc").exists()


# Names that are legal in te but collided with the generated code before.
COLLIDING = "z0<3>[i] = int<3>[i] * 2.0 + np<3>[i] + return<3>[i] * i<3>[j] + value<3>[i] where j = i;"


def _colliding_feeds():
    rng = np.random.default_rng(0)
    return {name: rng.standard_normal(3) for name in ("int", "np", "return", "i", "value")}


def _colliding_expected(feeds):  # by hand, in float64
    return feeds["int"] * 2.0 + feeds["np"] + feeds["return"] * feeds["i"] + feeds["value"]


def test_names_that_collided_compile_and_compute():
    kernel = te.parse(COLLIDING, dtype="float64", name="collide")
    feeds = _colliding_feeds()
    np.testing.assert_allclose(te.compile(kernel)(**feeds)["z0"], _colliding_expected(feeds), rtol=1e-12)


def test_names_that_collided_give_numpy_source_that_computes_the_same():
    kernel = te.parse(COLLIDING, dtype="float64", name="collide")
    namespace: dict = {}
    exec(compile(te.emit(kernel, "numpy"), "<emitted>", "exec"), namespace)  # noqa: S102 - our own output
    feeds = _colliding_feeds()
    got = namespace["collide"](*(feeds[name] for name in kernel.inputs))["z0"]
    np.testing.assert_allclose(got, _colliding_expected(feeds), rtol=1e-12)


@pytest.mark.skipif(GXX is None, reason="g++ is not installed")
def test_names_that_collided_give_cpp_and_cuda_that_compile(tmp_path):
    kernel = te.parse(COLLIDING, dtype="float64", name="collide")
    _compile_cpp(te.emit(kernel, "c++"), tmp_path)
    host_cuda = "#define __global__\n#define __device__\nstruct D { unsigned x; } blockIdx, blockDim, threadIdx;\n"
    _compile_cpp("#include <math.h>\nusing namespace std;\n" + host_cuda + te.emit(kernel, "cuda"), tmp_path)


def test_names_that_collided_give_cuda_that_nvrtc_compiles():
    from kuiper.ir.nvrtc import CompilerUnavailable, check_compiles, unavailable_reason

    kernel = te.parse(COLLIDING, dtype="float64", name="double")  # the CuPy path names the function itself
    source = cuda_source(te.lower(kernel, name="te_kernel"))[0]
    try:
        result = check_compiles(source)
    except CompilerUnavailable:
        pytest.skip(f"no CUDA compiler: {unavailable_reason()}")
    assert result.ok, result.log[:3000]


def test_a_tensor_and_an_index_of_one_name_stay_apart_in_cpp():
    source = te.emit(te.parse("A<4>[j] = i<4>[i] where i = j;"), "c++")
    assert "u_A[v_j] = (u_A[v_j] + u_i[v_j]);" in source


# --- the property: any accepted name gives code that compiles, no name injects --------------------

IDENTIFIERS = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)
ANY_NAME = st.one_of(IDENTIFIERS, st.sampled_from(INJECTIONS + RESERVED), st.text(max_size=20))


def _kernel_with(tensor: str, index: str, function: str):
    """A kernel whose input tensor, an index and the kernel are named as given; None if refused."""
    text = f"out<3>[{index}] = {tensor}<3, 3>[{index}, k] * 2.0;"
    try:
        return te.parse(text, name=function)
    except TESyntaxError:
        return None


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(tensor=ANY_NAME, index=ANY_NAME, function=ANY_NAME)
def test_any_accepted_name_gives_python_that_compiles_and_no_name_injects(tensor, index, function):
    kernel = _kernel_with(tensor, index, function)
    if kernel is None:
        return
    if function_name_problem(function) is not None or tensor == "out":
        with pytest.raises(TESyntaxError):
            te.emit(kernel, "numpy")
        return
    source = te.emit(kernel, "numpy")
    compile(source, "<emitted>", "exec")
    # a user's name appears only as u_<name>/v_<name>, the function's name, or quoted as a dict key
    assert f"def {function}(u_{tensor}):" in source
    for forbidden in ("system", "#include", "import os"):
        assert forbidden not in source.replace(f"u_{tensor}", "").replace(f"v_{index}", "").replace(function, "")


@pytest.mark.skipif(GXX is None, reason="g++ is not installed")
def test_any_accepted_names_give_cpp_that_compiles(tmp_path):
    """One g++ run over many kernels drawn from the same names (one compiler call per example is slow)."""
    names = st.tuples(IDENTIFIERS, IDENTIFIERS, IDENTIFIERS)
    functions, sources = set(), []

    @settings(max_examples=40, deadline=None, derandomize=True, database=None)
    @given(names)
    def collect(drawn):
        tensor, index, function = drawn
        kernel = _kernel_with(tensor, index, function)
        assert kernel is not None  # an identifier is always accepted by the parser
        if function_name_problem(function) is None and function not in functions and tensor != "out":
            functions.add(function)
            sources.append(te.emit(kernel, "c++"))

    collect()
    assert len(sources) > 10
    _compile_cpp("\n".join(sources), tmp_path)


# --- depth -------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "A<2>[i] = " + "(" * 10_000 + "B<2>[i]" + ")" * 10_000 + ";",
    "A<2>[i] = " + "-" * 10_000 + "B<2>[i];",
    "A<2>[i] = " + "!" * 10_000 + "(B<2>[i] > 0.0);",
    "A<2>[i] = " + " + ".join(["B<2>[i]"] * 20_000) + ";",
    "A<2>[i] = B<2>[" + "(" * 10_000 + "i" + ")" * 10_000 + "];",
    "A<2>[i] = " + "exp(" * 10_000 + "B<2>[i]" + ")" * 10_000 + ";",
])
def test_deep_input_is_a_syntax_error_not_a_recursion_error(text):
    with pytest.raises(TESyntaxError, match="nest"):
        te.parse(text)


def test_ten_thousand_signs_on_a_constant_fold_and_run():
    kernel = te.parse("A<2>[i] = " + "-" * 10_001 + "1.5;", dtype="float64")
    np.testing.assert_array_equal(te.compile(kernel)()["A"], [-1.5, -1.5])


def test_the_deepest_accepted_sum_runs_differentiates_and_emits():
    terms = 200
    kernel = te.parse("A<2>[i] = " + " + ".join(["B<2>[i] * C<2>[i]"] * terms) + ";", dtype="float64")
    b, c = np.array([1.0, 2.0]), np.array([3.0, -1.0])
    np.testing.assert_allclose(te.compile(kernel)(B=b, C=c)["A"], terms * b * c)
    gradient = te.grad(kernel, ["B"])
    np.testing.assert_allclose(te.compile(gradient)(C=c, dA=np.ones(2))["dB"], terms * c)
    for language in ("c++", "cuda", "numpy"):
        assert "u_dB" in te.emit(gradient, language)


@pytest.mark.parametrize("text", ["A<4>[i] = B<4>[j] where j = i // 0;", "A<4>[i] = B<4>[j] where j = i % 0;",
                                  "A<4>[i] = B<4>[j] where j = i // -0;"])
def test_division_by_a_constant_zero_is_refused(text):
    with pytest.raises(TESyntaxError, match="by zero"):
        te.parse(text)


# --- memory before checks ---------------------------------------------------------------------


def test_a_huge_output_is_refused_before_it_is_allocated(monkeypatch):
    monkeypatch.setenv("KUIPER_MEMORY_BUDGET", "1GiB")
    with pytest.raises(SizeLimitError, match=r"kernel kernel: tensor A: .*373 GiB"):
        te.compile(te.parse("A<100000000000>[i] = 1.0;"))


def test_a_thirty_digit_extent_is_a_syntax_error():
    with pytest.raises(TESyntaxError, match="over 2\\^62"):
        te.parse("A<" + "9" * 30 + ">[i] = 1.0;")


def test_a_grid_far_larger_than_its_inputs_is_refused_before_it_is_allocated(monkeypatch):
    # 1.2 MB of inputs, a 150,000 x 150,000 grid of int64 subscripts and values: 168 GiB
    monkeypatch.setenv("KUIPER_MEMORY_BUDGET", "1GiB")
    kernel = te.parse("A<2>[i] = exp(B<150000>[j] + B<150000>[k]);")
    with pytest.raises(SizeLimitError, match="working space of 'A<2>"):
        te.compile(kernel)


def test_a_constant_kernel_runs():
    np.testing.assert_array_equal(te.compile(te.parse("A<3>[i] = 1.0;"))()["A"], [1.0, 1.0, 1.0])


@pytest.mark.parametrize("text", ["O<3>[i] = A<3, 3>[i, k] where k = k;",  # found by the te fuzz test (KeyError)
                                  "O<3>[i] = A<3, 3>[i, k] where k = j, j = i;"])
def test_a_where_binding_that_reads_an_index_bound_later_is_refused(text):
    with pytest.raises(TESyntaxError, match="used in the where clause before it is bound"):
        te.parse(text)


@pytest.mark.parametrize("text, dtype, message", [  # found by the te fuzz test (ValueError, OverflowError)
    ("O<3>[i] = 1e308 + i;", "float64", "a number overflows float32"),  # an int index and a float: float32
    ("O<3>[i] = 1e39 * A<3>[i];", "float32", "1e39 is out of range for float32"),
    ("O<3>[i] = 1e309;", "float64", "1e309 is out of range for float64"),
    ("Y<4>[i] = X<9>[2 * i + 1] where 1.5 * i < 7;", "float64", "condition compares integer index arithmetic"),
    ("Y<6>[p] += X<4>[i] where i = 99999999999999999999999999999 - 1;", "float32", "is over 2\\^62"),
    ("Y<6>[p] += X<4>[i] where j = 4611686018427387904 * 4 - p, i = j - j;", "float32", "beyond 2\\^62"),
])
def test_numbers_that_overflow_and_float_conditions_are_syntax_errors(text, dtype, message):
    with pytest.raises(TESyntaxError, match=message):
        te.parse(text, dtype=dtype)


def test_a_float_division_by_a_constant_zero_computes_what_ieee_says():
    # Found by a 100,000-example fuzz run: the einsum planner divided its coefficient by 0.
    a = np.array([[1.0, -2.0, 0.0], [3.0, 4.0, 5.0], [-1.0, -1.0, -1.0]])
    kernel = te.parse("O<3>[i] = A<3, 3>[i, j] / 0;", dtype="float64")
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = (a / 0.0).sum(axis=1)  # [nan (inf - inf + nan), inf, -inf]
    np.testing.assert_array_equal(te.compile(kernel)(A=a)["O"], expected)
