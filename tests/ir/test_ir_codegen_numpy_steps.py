"""The NumPy evaluation's step table (issue 27) against a plain tree walk of the same IR.

The reference below evaluates the un-linearized Function node by node through the same
array operations (``xp_ops.resolve``), with no registers, buffers or ``out=``: the step
table must give bit-identical results (values, NaNs, dtype) on small and large inputs,
same-shape and broadcast ones, with and without ``out=``.
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

from kuiper.errors import InputError
from kuiper.ir import dtypes, simplify
from kuiper.ir.codegen_numpy import compile_elementwise, floating_point_warnings_off
from kuiper.ir.linearize import linearize
from kuiper.ir.nodes import Const, Var
from kuiper.ir.xp_ops import resolve
from kuiper.pnnx_expr import parse
from kuiper.pnnx_expr.lower import lower

RNG = np.random.default_rng(27)
SPECIAL = [0.0, -0.0, 0.5, -2.5, 3.0, -3.0, 20.0, np.inf, -np.inf, np.nan]

FLOAT_TEXTS = [
    "relu(@0)",
    "add(mul(@0,@0),fmod(@0,0.75))",
    "gelu(@0)",
    "erf(@0)",
    "hardswish(@0)",
    "sigmoid(sub(@0,@1))",
    "div(@0,@1)",
    "floor_divide(@0,@1)",
    "remainder(@0,@1)",
    "where(gt(@0,@1),@0,mul(@1,0.5))",
    "clamp(add(@0,@1),-1.0,1.0)",
    "torch.long(mul(@0,4))",
]
INT_TEXTS = ["floor_divide(@0,@1)", "remainder(@0,@1)", "add(mul(@0,3),@1)", "max(@0,@1)", "div(@0,@1)", "neg(@0)"]


def lowered(text: str, dtype: str):
    arity = 2 if "@1" in text else 1
    return simplify(lower(parse(text), [dtype] * arity)), arity


def tree_evaluate(fn, inputs):
    """Each node computed from its children's values, as a fresh array cast to the node's dtype."""
    values = dict(zip(fn.params, inputs))

    def value_of(node):
        if isinstance(node, Var):
            return values[node]
        if isinstance(node, Const):
            return node.value
        result = resolve(np, node).fn(*(value_of(child) for child in node.children()))
        return np.asarray(result).astype(dtypes.storage_dtype(node.dtype), copy=False)

    with np.errstate(all="ignore"):
        for stmt in fn.body.stmts:
            values[stmt.target] = value_of(stmt.value)
    return np.asarray(values[fn.results[0]])


def random_inputs(dtype: str, shapes):
    arrays = []
    for shape in shapes:
        size = int(np.prod(shape))
        if dtype.startswith("int"):
            values = RNG.integers(-50, 50, size)
        else:
            values = np.concatenate([RNG.normal(0, 4, size), SPECIAL])[RNG.permutation(size + len(SPECIAL))[:size]]
        arrays.append(values.astype(dtype).reshape(shape))
    return arrays


def assert_identical(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want, strict=True)  # NaN == NaN here; -0.0 vs 0.0 compared below
    if got.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


SHAPES = {
    "tiny": [(1, 8), (1, 8)],
    "large": [(64, 96), (64, 96)],
    "broadcast": [(4, 1, 8), (3, 1)],
}


@pytest.mark.parametrize("shapes", SHAPES.values(), ids=SHAPES.keys())
@pytest.mark.parametrize(
    "text,dtype",
    [(text, dtype) for text in FLOAT_TEXTS for dtype in ("float32", "float64", "float16")]
    + [(text, dtype) for text in INT_TEXTS for dtype in ("int32", "int64")],
)
def test_step_table_matches_a_tree_walk_bit_for_bit(text, dtype, shapes):
    fn, arity = lowered(text, dtype)
    compiled = compile_elementwise(fn)
    inputs = random_inputs(dtype, shapes[:arity])
    want = tree_evaluate(fn, inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the evaluation suppresses NumPy's inf/nan/x/0 warnings
        got = compiled(*inputs)
        assert_identical(got, want)
        out = np.full(want.shape, 7, want.dtype)
        assert compiled(*inputs, out=out) is out
        assert_identical(out, want)
    # A second call with other values reuses nothing stale from the first.
    others = random_inputs(dtype, shapes[:arity])
    assert_identical(compiled(*others), tree_evaluate(fn, others))


def test_linearized_program_is_what_the_tree_walk_evaluates():
    fn, _ = lowered("gelu(@0)", "float32")
    x = random_inputs("float32", [(2, 5)])[0]
    assert_identical(tree_evaluate(linearize(fn), [x]), tree_evaluate(fn, [x]))


def test_exact_dtype_arrays_skip_the_input_conversion(monkeypatch):
    compiled = compile_elementwise(lowered("relu(@0)", "float32")[0])

    def refuse(index, value):
        raise AssertionError("a float32 ndarray went through _accept")

    monkeypatch.setattr(compiled, "_accept", refuse)
    x = np.array([[-1.0, 2.0]], np.float32)
    np.testing.assert_array_equal(compiled(x), [[0.0, 2.0]])


def test_other_inputs_are_still_converted_or_refused():
    compiled = compile_elementwise(lowered("add(@0,@1)", "float32")[0])
    np.testing.assert_array_equal(compiled(np.float32([1.0, 2.0]), 1.5), np.float32([2.5, 3.5]))
    with pytest.raises(InputError, match="has dtype float64"):
        compiled(np.zeros(2), np.zeros(2, np.float32))
    with pytest.raises(InputError, match="out= has dtype float64"):
        compiled(np.zeros(2, np.float32), np.zeros(2, np.float32), out=np.zeros(2))


def test_one_step_over_same_shaped_arrays_skips_the_step_table(monkeypatch):
    """A residual add or a ReLU runs its one ufunc directly; broadcasting inputs, other dtypes and
    an ``out=`` of another shape still take the step table."""
    compiled = compile_elementwise(lowered("add(@0,@1)", "float32")[0])
    step_table = compiled._evaluate
    taken = []
    monkeypatch.setattr(compiled, "_evaluate", lambda *args: taken.append(True) or step_table(*args))
    x, y = random_inputs("float32", [(3, 4), (3, 4)])
    out = np.empty((3, 4), np.float32)
    assert compiled(x, y, out=out) is out
    assert_identical(out, x + y)
    assert_identical(compiled(x, y), x + y)
    assert not taken
    assert_identical(compiled(x, y[:1]), x + y[:1])  # broadcast
    assert_identical(compiled(x, 2.0), x + np.float32(2.0))  # a Python scalar is converted first
    assert len(taken) == 2
    relu = compile_elementwise(lowered("relu(@0)", "float32")[0])
    assert relu._one_step is not None and compile_elementwise(lowered("gelu(@0)", "float32")[0])._one_step is None


def test_inside_floating_point_warnings_off_the_compiled_function_still_gives_no_warning_and_numpy_is_restored():
    # A model call enters the context once and its compiled functions skip their own errstate:
    # what they compute, and that nothing warns, must not change; NumPy's setting must come back.
    fn, _ = lowered("div(exp(@0),@1)", "float32")
    compiled = compile_elementwise(fn)
    x = np.array([0.0, 100.0, np.nan, 1.0], np.float32)  # exp overflows, 0/0, NaN, an ordinary value
    y = np.array([0.0, 1.0, 1.0, 0.0], np.float32)
    want = tree_evaluate(fn, [x, y])
    before = np.geterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with floating_point_warnings_off():
            assert all(setting == "ignore" for setting in np.geterr().values())
            assert_identical(compiled(x, y), want)
        assert np.geterr() == before
        assert_identical(compiled(x, y), want)  # outside: the function turns them off itself


@pytest.mark.parametrize("text", ["mul(@0,0.5)", "sub(0.5,@0)", "div(@0,3.0)", "div(3.0,@0)", "sub(@0,1.5)"])
def test_the_direct_form_of_one_input_and_a_constant_is_the_ufunc_called_on_them(text):
    """A specialized step's function for ``x * 0.5`` (a while loop's body): one parameter, the constant on
    the side the IR puts it, the bits of the compiled call."""
    compiled = compile_elementwise(lowered(text, "float32")[0])
    (x,) = random_inputs("float32", [(4, 64)])
    direct, limit = compiled.direct([x])
    assert limit is None and list(inspect.signature(direct).parameters) == ["x"]
    assert_identical(direct(x), compiled(x))
    assert_identical(direct(x), tree_evaluate(lowered(text, "float32")[0], [x]))
