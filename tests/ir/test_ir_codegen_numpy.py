"""The array-namespace code generator: results against independent NumPy/math references."""

from __future__ import annotations

import math
import operator
import pathlib
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuiper.errors import InputError, ShapeError
from kuiper.pnnx_expr import FUNCTIONS, evaluate, parse
from kuiper.pnnx_expr.lower import lower
from kuiper.ir import simplify
from kuiper.ir.codegen_numpy import compile_elementwise
from kuiper.ir.erf import erf as erf_fallback

RNG = np.random.default_rng(1234)
SPECIAL = [0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1.0, -1.0, 3.0, -3.0, 20.0, -20.0, np.inf, -np.inf, np.nan]
X32 = np.concatenate([RNG.normal(0.0, 3.0, 300), RNG.uniform(-1, 1, 100), SPECIAL]).astype(np.float32)
X64 = X32.astype(np.float64)
_erf = np.vectorize(math.erf)


def _softplus(x):
    return np.logaddexp(0.0, x)


def _sign(x):
    return np.where(x > 0, 1.0, np.where(x < 0, -1.0, 0.0))  # NaN -> 0, as torch.sign


def _nan_aware(f):
    return lambda x: np.where(np.isnan(x), np.nan, f(x))


UNARY_REFERENCES = {
    "neg": lambda x: -x,
    "abs": np.abs,
    "sign": _sign,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "square": lambda x: x * x,
    "reciprocal": lambda x: 1.0 / x,
    "exp": np.exp,
    "expm1": np.expm1,
    "log": np.log,
    "log10": np.log10,
    "log1p": np.log1p,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "asin": np.arcsin,
    "acos": np.arccos,
    "atan": np.arctan,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "tanh": np.tanh,
    "asinh": np.arcsinh,
    "acosh": np.arccosh,
    "atanh": np.arctanh,
    "erf": _erf,
    "floor": np.floor,
    "ceil": np.ceil,
    "round": np.round,  # half to even
    "trunc": np.trunc,
    "int": lambda x: x,
    "relu": _nan_aware(lambda x: np.where(x > 0, x, 0.0)),
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "silu": lambda x: x / (1.0 + np.exp(-x)),
    "gelu": lambda x: 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0))),
    "gelu_tanh": lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3))),
    "hardsigmoid": lambda x: np.clip(x / 6.0 + 0.5, 0.0, 1.0),
    "hardswish": lambda x: x * np.clip(x + 3.0, 0.0, 6.0) / 6.0,
    "softplus": _softplus,
    "mish": lambda x: x * np.tanh(_softplus(x)),
}
CASTS = {"torch.float", "torch.long", "torch.bool"}


def test_every_function_has_a_numeric_test():
    binary = set(BINARY_FLOAT_REFERENCES) | set(BINARY_INT_REFERENCES) | set(COMPARE_REFERENCES)
    covered = set(UNARY_REFERENCES) | binary | CASTS | {"where", "clamp", "leaky_relu", "elu", "lshift", "rshift"}
    assert covered >= set(FUNCTIONS)


def close(actual, expected, dtype, rtol=None, atol=None):
    assert actual.dtype == np.dtype(dtype), (actual.dtype, dtype)
    if rtol is None:
        rtol, atol = (2e-6, 2e-6) if dtype == "float32" else (1e-12, 1e-300)
    with np.errstate(all="ignore"):
        expected = np.asarray(expected, dtype=np.float64)
        if dtype == "float32":
            expected = expected.astype(np.float32).astype(np.float64)  # overflow to inf as float32 does
        np.testing.assert_allclose(actual.astype(np.float64), expected, rtol=rtol, atol=atol, equal_nan=True)


@pytest.mark.parametrize("name", sorted(UNARY_REFERENCES))
def test_unary_float32(name):
    with np.errstate(all="ignore"):
        expected = UNARY_REFERENCES[name](X64)
    close(evaluate(f"{name}(@0)", [X32]), expected, "float32")


@pytest.mark.parametrize("name", sorted(UNARY_REFERENCES))
def test_unary_float64(name):
    with np.errstate(all="ignore"):
        expected = UNARY_REFERENCES[name](X64)
    close(evaluate(f"{name}(@0)", [X64]), expected, "float64")


INTS = np.array([-7, -3, -1, 0, 1, 2, 3, 5, 7, 100, -100], dtype=np.int64)


@pytest.mark.parametrize("name", ["exp", "sqrt", "sin", "erf", "log1p", "sigmoid", "gelu", "rsqrt", "reciprocal"])
def test_float_functions_of_integers_give_float32(name):
    with np.errstate(all="ignore"):
        expected = UNARY_REFERENCES[name](INTS.astype(np.float64))
    close(evaluate(f"{name}(@0)", [INTS]), expected, "float32")


@pytest.mark.parametrize("name", ["neg", "abs", "floor", "ceil", "round", "trunc", "square", "int", "relu", "sign"])
def test_integer_preserving_functions(name):
    result = evaluate(f"{name}(@0)", [INTS.astype(np.int32)])
    expected = UNARY_REFERENCES[name](INTS.astype(np.float64))
    assert result.dtype == np.int32
    assert result.tolist() == expected.astype(np.int64).tolist()


def test_casts():
    finite = X32[np.isfinite(X32)]
    assert evaluate("torch.long(@0)", [finite]).tolist() == [math.trunc(v) for v in finite.tolist()]
    assert evaluate("torch.bool(@0)", [X32]).tolist() == [v != 0 for v in X32.tolist()]  # NaN is true
    result = evaluate("torch.float(@0)", [INTS])
    assert result.dtype == np.float32 and result.tolist() == [float(v) for v in INTS.tolist()]


# --- binary functions ------------------------------------------------------------------------

A64 = np.concatenate([RNG.normal(0, 4, 200), [0.0, -0.0, 1.0, -1.0, 2.5, np.inf, -np.inf, np.nan, 3.0]])
B64 = np.concatenate([RNG.normal(0, 4, 200), [1.0, 2.0, 0.0, -0.0, -2.5, 1.0, np.inf, 1.0, np.nan]])


def _elementwise(f):
    def apply(a, b):
        return np.array([f(x, y) for x, y in zip(np.asarray(a).tolist(), np.asarray(b).tolist())])

    return apply


def _nan_max(x, y):
    return math.nan if math.isnan(x) or math.isnan(y) else max(x, y)


def _nan_min(x, y):
    return math.nan if math.isnan(x) or math.isnan(y) else min(x, y)


def _python_floordiv(x, y):
    if y == 0 or not (math.isfinite(x) and math.isfinite(y)):
        return None  # Python raises or differs in corner cases; skipped below
    return x // y


def _python_mod(x, y):
    if y == 0 or not (math.isfinite(x) and math.isfinite(y)):
        return None
    return x % y


BINARY_FLOAT_REFERENCES = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "div": lambda x, y: float(np.float64(x) / np.float64(y)),  # IEEE: x/0 is inf or nan
    "floor_divide": _python_floordiv,
    "remainder": _python_mod,
    "fmod": lambda x, y: math.fmod(x, y) if y != 0 and math.isfinite(x) else math.nan,
    "pow": lambda x, y: float(np.power(x, y)),
    "atan2": math.atan2,
    "max": _nan_max,
    "min": _nan_min,
    "maximum": _nan_max,
    "minimum": _nan_min,
    "logaddexp": lambda x, y: float(np.logaddexp(x, y)),
}


@pytest.mark.parametrize("name", sorted(BINARY_FLOAT_REFERENCES))
def test_binary_float64_matches_python_semantics(name):
    reference = BINARY_FLOAT_REFERENCES[name]
    with np.errstate(all="ignore"):
        expected = [reference(x, y) for x, y in zip(A64.tolist(), B64.tolist())]
    keep = np.array([e is not None for e in expected])
    result = evaluate(f"{name}(@0,@1)", [A64, B64])
    close(result[keep], np.array([e for e in expected if e is not None], dtype=np.float64), "float64")


@pytest.mark.parametrize("name", sorted(BINARY_FLOAT_REFERENCES))
def test_binary_float32_dtype_and_values(name):
    a, b = A64.astype(np.float32), B64.astype(np.float32)
    reference = BINARY_FLOAT_REFERENCES[name]
    with np.errstate(all="ignore"):
        expected = [reference(x, y) for x, y in zip(a.astype(np.float64).tolist(), b.astype(np.float64).tolist())]
    keep = np.array([e is not None for e in expected])
    if name in ("floor_divide", "remainder"):
        # float32 rounding can move an exact quotient across an integer: check the easy ones
        keep &= np.abs(a.astype(np.float64) / np.where(b == 0, 1, b)) < 1e3
    result = evaluate(f"{name}(@0,@1)", [a, b])
    assert result.dtype == np.float32
    expected32 = np.array([e if e is not None else np.nan for e in expected], dtype=np.float64)
    rtol = 1e-4 if name in ("remainder", "fmod", "floor_divide") else 2e-6
    close(result[keep], expected32[keep], "float32", rtol=rtol, atol=1e-5)


IA = np.array([-7, 7, -7, 7, 0, 13, -13, 5, -1, 100], dtype=np.int64)
IB = np.array([2, 2, -2, -2, 3, 4, 4, -3, 7, -7], dtype=np.int64)


def _c_fmod(x, y):
    result = abs(x) % abs(y)
    return result if x >= 0 else -result


BINARY_INT_REFERENCES = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "floor_divide": operator.floordiv,  # Python: rounds toward -inf
    "remainder": operator.mod,  # Python: sign of the divisor
    "fmod": _c_fmod,  # C: sign of the dividend
    "max": max,
    "min": min,
    "maximum": max,
    "minimum": min,
    "and": operator.and_,
    "or": operator.or_,
    "xor": operator.xor,
}


@pytest.mark.parametrize("name", sorted(BINARY_INT_REFERENCES))
@pytest.mark.parametrize("dtype", ["int64", "int32"])
def test_binary_integers_match_python(name, dtype):
    a, b = IA.astype(dtype), IB.astype(dtype)
    result = evaluate(f"{name}(@0,@1)", [a, b])
    assert result.dtype == np.dtype(dtype)
    assert result.tolist() == [BINARY_INT_REFERENCES[name](x, y) for x, y in zip(a.tolist(), b.tolist())]


def test_negative_integer_division_semantics_spelled_out():
    a = np.array([-7, 7, -7, 7])
    b = np.array([2, 2, -2, -2])
    assert evaluate("floor_divide(@0,@1)", [a, b]).tolist() == [-4, 3, 3, -4]
    assert evaluate("remainder(@0,@1)", [a, b]).tolist() == [1, 1, -1, -1]
    assert evaluate("fmod(@0,@1)", [a, b]).tolist() == [-1, 1, -1, 1]


def test_true_division_of_integers_gives_float32():
    result = evaluate("div(@0,@1)", [IA, IB])
    close(result, [x / y for x, y in zip(IA.tolist(), IB.tolist())], "float32")


def test_integer_pow_and_shifts():
    base = np.array([2, 3, -2, 0, 5, -1], dtype=np.int64)
    exponent = np.array([3, 0, 3, 2, 4, 7], dtype=np.int64)
    result = evaluate("pow(@0,@1)", [base, exponent])
    assert result.dtype == np.int64 and result.tolist() == [x**y for x, y in zip(base.tolist(), exponent.tolist())]
    shifts = np.array([0, 1, 2, 3, 4, 5], dtype=np.int64)
    shifted = [x << y for x, y in zip(base.tolist(), shifts.tolist())]
    assert evaluate("lshift(@0,@1)", [base, shifts]).tolist() == shifted
    assert evaluate("rshift(@0,@1)", [base * 40, shifts]).tolist() == [
        (x * 40) >> y for x, y in zip(base.tolist(), shifts.tolist())
    ]
    assert evaluate("pow(@0,0.5)", [np.array([4, 9])]).dtype == np.float32


COMPARE_REFERENCES = {
    "gt": operator.gt,
    "ge": operator.ge,
    "lt": operator.lt,
    "le": operator.le,
    "eq": operator.eq,
    "ne": operator.ne,
}


@pytest.mark.parametrize("name", sorted(COMPARE_REFERENCES))
def test_comparisons(name):
    result = evaluate(f"{name}(@0,@1)", [A64, B64])
    assert result.dtype == np.bool_
    assert result.tolist() == [COMPARE_REFERENCES[name](x, y) for x, y in zip(A64.tolist(), B64.tolist())]
    mixed = evaluate(f"{name}(@0,1.5)", [INTS])
    assert mixed.tolist() == [COMPARE_REFERENCES[name](x, 1.5) for x in INTS.tolist()]


def test_bool_logic():
    p = np.array([True, True, False, False])
    q = np.array([True, False, True, False])
    assert evaluate("and(@0,@1)", [p, q]).tolist() == [True, False, False, False]
    assert evaluate("or(@0,@1)", [p, q]).tolist() == [True, True, True, False]
    assert evaluate("xor(@0,@1)", [p, q]).tolist() == [False, True, True, False]
    assert evaluate("add(@0,@1)", [p, q]).tolist() == [True, True, True, False]  # torch: logical or
    assert evaluate("mul(@0,@1)", [p, q]).dtype == np.bool_


def test_where_clamp_and_parametrised_activations():
    x = X32
    assert evaluate("where(gt(@0,0),@0,0.0)", [x]).tolist() == pytest.approx(
        np.where(x > 0, x, 0.0).tolist(), nan_ok=True
    )
    close(evaluate("clamp(@0,-1.5,2)", [x]), np.clip(X64, -1.5, 2.0), "float32")
    close(evaluate("leaky_relu(@0,0.1)", [x]), np.where(X64 > 0, X64, X64 * np.float32(0.1)), "float32")
    with np.errstate(all="ignore"):
        close(evaluate("elu(@0,1.5)", [x]), np.where(X64 > 0, X64, 1.5 * np.expm1(X64)), "float32")


# --- PyTorch dtype semantics -----------------------------------------------------------------


def test_python_float_with_int_tensor_is_float32_not_float64():
    result = evaluate("mul(@0,0.5)", [INTS])
    assert result.dtype == np.float32
    assert result.tolist() == [v * 0.5 for v in INTS.tolist()]


def test_python_int_with_float32_tensor_stays_float32():
    assert evaluate("add(@0,1)", [X32]).dtype == np.float32
    assert evaluate("mul(@0,2.5)", [X32.astype(np.float16)]).dtype == np.float16


def test_mixed_tensor_promotion():
    assert evaluate("add(@0,@1)", [np.array([1], np.int8), np.array([200], np.uint8)]).tolist() == [201]
    assert evaluate("add(@0,@1)", [np.array([1], np.int8), np.array([200], np.uint8)]).dtype == np.int16
    assert evaluate("add(@0,@1)", [np.array([True]), np.array([2], np.int32)]).dtype == np.int32
    assert evaluate("mul(@0,2.5)", [np.array([True, False])]).tolist() == [2.5, 0.0]
    assert evaluate("add(@0,@1)", [np.array([3], np.int64), np.array([0.5], np.float16)]).dtype == np.float16


def test_int_truncates_literals_and_keeps_tensors():
    assert evaluate("int(2.7)", []) == 2
    assert evaluate("int(-2.7)", []) == -2
    assert evaluate("mul(@0,int(2.7))", [INTS]).tolist() == [v * 2 for v in INTS.tolist()]
    assert evaluate("int(@0)", [X32]).dtype == np.float32


def test_python_scalar_inputs():
    assert evaluate("mul(@0,@1)", [3, 4]) == 12
    assert evaluate("div(@0,@1)", [7, 2]) == 3.5
    assert evaluate("floor_divide(@0,@1)", [-7, 2]) == -4
    result = evaluate("add(@0,@1)", [X32, 2])
    assert result.dtype == np.float32
    result = evaluate("add(@0,@1)", [INTS, 0.5])
    assert result.dtype == np.float32 and result.tolist() == [v + 0.5 for v in INTS.tolist()]
    assert evaluate("gt(@0,@1)", [2.5, 1]) is True


def test_zero_dimensional_arrays_and_broadcasting():
    row = np.arange(4, dtype=np.float32)
    column = np.arange(3, dtype=np.float32).reshape(3, 1)
    assert evaluate("add(mul(@0,10),@1)", [column, row]).tolist() == (column * 10 + row).tolist()
    scalar = np.array(1.5, dtype=np.float32)
    result = evaluate("add(@0,@1)", [scalar, row])
    assert result.shape == (4,) and result.tolist() == (row + 1.5).tolist()
    zero_d = evaluate("exp(@0)", [scalar])
    assert zero_d.shape == () and zero_d.dtype == np.float32
    cube = np.ones((2, 3, 4), np.float32)
    assert evaluate("sub(@0,@1)", [cube, row]).shape == (2, 3, 4)


def test_broadcast_mismatch_names_the_inputs():
    with pytest.raises(ShapeError, match="inputs 0 and 1 cannot be broadcast"):
        evaluate("add(exp(@0),@1)", [np.ones(3, np.float32), np.ones(4, np.float32)])


# --- sizes and lists -------------------------------------------------------------------------


def test_sizes_are_python_ints():
    x = np.zeros((2, 3, 5), np.float32)
    assert evaluate("size(@0,1)", [x]) == 3 and type(evaluate("size(@0,1)", [x])) is int
    assert evaluate("size(@0,-1)", [x]) == 5
    assert evaluate("div(size(@0,1),2)", [x]) == 1.5
    assert evaluate("size(@0)", [x]) == [2, 3, 5]
    result = evaluate("mul(@0,size(@0,1))", [np.ones((2, 5), np.float32)])
    assert result.dtype == np.float32 and result.tolist() == [[5.0] * 5] * 2


def test_list_expressions_return_python_lists():
    x = np.zeros((2, 3, 5), np.float32)
    assert evaluate("[size(@0,0),-1]", [x]) == [2, -1]
    assert evaluate("[1,size(@0,1),mul(size(@0,2),2)]", [x]) == [1, 3, 10]
    assert all(type(v) is int for v in evaluate("[1,size(@0,1),mul(size(@0,2),2)]", [x]))


def test_size_beyond_the_rank_is_a_shape_error():
    with pytest.raises(ShapeError, match="size\\(@0,3\\)"):
        evaluate("size(@0,3)", [np.zeros((2, 3))])


# --- the PNNX quirk, numerically --------------------------------------------------------------


def test_pnnx_log1p_quirk_means_what_the_model_computed():
    y = np.maximum(X32, 0)
    with np.errstate(all="ignore"):
        expected = y.astype(np.float64) * 0.5 + np.log1p(np.abs(y.astype(np.float64))) + y
    close(evaluate("add(add(mul(@0,0.5),log1p),abs(@0)),@0", [y]), expected, "float32")
    x = RNG.normal(0, 1, 50).astype(np.float32)
    x64 = x.astype(np.float64)
    close(evaluate("sub(mul(expm1,@0),2),expm1,mul(@0,3)", [x]), np.expm1(x64) * 2 - np.expm1(x64 * 3), "float32")
    close(
        evaluate("add(mul(log1p,abs(@0)),expm1),@0,1", [x]),
        np.log1p(np.abs(x64)) * np.expm1(x64) + 1,
        "float32",
    )


# --- buffers ----------------------------------------------------------------------------------


class CountingNumpy:
    """NumPy, counting every array a call allocates (empty(), or a result made without out=)."""

    def __init__(self):
        self.allocations = 0

    def __getattr__(self, name):
        attr = getattr(np, name)
        if not callable(attr) or isinstance(attr, type):
            return attr
        counter = self

        class Counted:
            def __call__(self, *args, **kwargs):
                result = attr(*args, **kwargs)
                if kwargs.get("out") is None and isinstance(result, np.ndarray):
                    counter.allocations += 1
                return result

        wrapped = Counted()
        if isinstance(attr, np.ufunc):
            wrapped.nin, wrapped.nout = attr.nin, attr.nout
        return wrapped


def compiled(text, *dtypes, xp=None):
    return compile_elementwise(simplify(lower(parse(text), list(dtypes))), xp)


def test_five_node_chain_allocates_only_the_output():
    xp = CountingNumpy()
    fn = compiled("exp(neg(sqrt(abs(mul(@0,2.0)))))", "float32", xp=xp)
    x = RNG.normal(size=(64, 64)).astype(np.float32)
    for _ in range(3):
        xp.allocations = 0
        result = fn(x)
        assert xp.allocations == 1
    np.testing.assert_allclose(result, np.exp(-np.sqrt(np.abs(x * 2.0))), rtol=1e-6)


def test_temporaries_are_bounded_by_what_is_live():
    xp = CountingNumpy()
    fn = compiled("exp(add(mul(@0,@1),sub(@0,@1)))", "float32", "float32", xp=xp)
    a, b = RNG.normal(size=(2, 50)).astype(np.float32)
    result = fn(a, b)
    assert xp.allocations == 2  # mul and sub are live together; add and exp reuse
    np.testing.assert_allclose(result, np.exp(a * b + (a - b)), rtol=1e-6)
    assert fn.buffers_per_call(a.shape, b.shape) == 2


def test_broadcasting_plan_keeps_shapes_apart():
    xp = CountingNumpy()
    fn = compiled("exp(add(mul(@0,2.0),@1))", "float32", "float32", xp=xp)
    column, row = np.ones((3, 1), np.float32), np.arange(4, dtype=np.float32)
    result = fn(column, row)
    assert result.shape == (3, 4) and xp.allocations == 2
    np.testing.assert_allclose(result, np.exp(column * 2 + row), rtol=1e-6)


def test_out_argument_receives_the_result():
    xp = CountingNumpy()
    fn = compiled("tanh(mul(@0,@0))", "float32", xp=xp)
    x = RNG.normal(size=100).astype(np.float32)
    out = np.empty_like(x)
    assert fn(x, out=out) is out
    assert xp.allocations == 1  # one temporary for the square; tanh writes straight into out
    np.testing.assert_allclose(out, np.tanh(x * x), rtol=1e-6)
    with pytest.raises(InputError, match="dtype"):
        fn(x, out=np.empty(100, np.float64))


def test_result_never_aliases_an_input():
    x = np.arange(3, dtype=np.float32)
    result = evaluate("add(@0,0)", [x])
    assert result.tolist() == x.tolist() and result is not x and not np.shares_memory(result, x)


def test_inputs_are_checked():
    fn = compiled("exp(@0)", "float32")
    with pytest.raises(InputError, match="compiled for float32"):
        fn(np.ones(3, np.float64))
    with pytest.raises(InputError, match="takes 1 inputs"):
        fn()
    assert fn(2.0).dtype == np.float32  # a Python number for a tensor input becomes a 0-d array


class PlainNamespace:
    """An array namespace whose functions take no out= (like a strict array-API library)."""

    def __getattr__(self, name):
        if name.startswith("__") or name in ("erf", "copyto", "fmod"):
            raise AttributeError(name)
        attr = getattr(np, name)
        if not callable(attr) or isinstance(attr, type):
            return attr

        def plain(*args, **kwargs):
            return attr(*args, **kwargs)

        return plain


@pytest.mark.parametrize(
    "text, reference",
    [
        ("add(mul(@0,@0),fmod(@0,0.75))", lambda x: x * x + np.fmod(x, 0.75)),
        ("erf(@0)", _erf),
        ("gelu(@0)", UNARY_REFERENCES["gelu"]),
        ("torch.long(mul(@0,4))", lambda x: np.trunc(x * 4)),
    ],
)
def test_namespace_without_out_falls_back_to_plain_calls(text, reference):
    x = RNG.normal(0, 2, 200).astype(np.float32)
    fn = compiled(text, "float32", xp=PlainNamespace())
    assert fn.uniform_buffers == 0
    expected = reference(x.astype(np.float64))
    np.testing.assert_allclose(fn(x).astype(np.float64), expected, rtol=2e-6, atol=2e-6)


def test_array_api_compat_namespace():
    array_api_compat = pytest.importorskip("array_api_compat")
    xp = array_api_compat.array_namespace(X32)
    result = evaluate("add(gelu(@0),floor_divide(@0,2))", [X32], xp=xp)
    with np.errstate(all="ignore"):
        expected = UNARY_REFERENCES["gelu"](X64) + np.floor_divide(X64, 2)
    close(result, expected, "float32", rtol=1e-5, atol=1e-5)


def test_erf_fallback_is_accurate():
    x = np.concatenate([np.linspace(-7, 7, 20001), [0.0, 1e-30, 2.0, -2.0, 30.0, np.inf, -np.inf, np.nan]])
    with np.errstate(all="ignore"):
        result = erf_fallback(np, x)
    np.testing.assert_allclose(result, _erf(x), rtol=1e-14, atol=1e-300, equal_nan=True)
    assert erf_fallback(np, x.astype(np.float32)).dtype == np.float32


# --- differential: random expressions against a naive evaluator ---------------------------------

NAIVE = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "max": lambda a, b: np.where(np.isnan(a) | np.isnan(b), np.nan, np.maximum(a, b)),
    "min": lambda a, b: np.where(np.isnan(a) | np.isnan(b), np.nan, np.minimum(a, b)),
    "neg": np.negative,
    "abs": np.abs,
    "tanh": np.tanh,
    "sin": np.sin,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "square": np.square,
    "relu": lambda x: np.where(x > 0, x, 0.0),
}
ARITY = {name: FUNCTIONS[name].arity for name in NAIVE}


def _trees(inputs):
    def extend(children):
        return st.sampled_from(sorted(NAIVE)).flatmap(
            lambda name: st.tuples(*[children] * ARITY[name]).map(lambda args: (name, *args))
        )

    leaves = st.one_of(st.sampled_from(inputs), st.sampled_from([0, 1, 2, 0.5, -1.25]))
    return st.recursive(leaves, extend, max_leaves=12)


def _text(tree):
    if isinstance(tree, tuple):
        return f"{tree[0]}({','.join(_text(t) for t in tree[1:])})"
    return tree if isinstance(tree, str) else repr(tree)


def _naive(tree, values):
    if isinstance(tree, tuple):
        return NAIVE[tree[0]](*(_naive(t, values) for t in tree[1:]))
    if isinstance(tree, str):
        return values[int(tree[1:])]
    return float(tree)


SHAPES = [(3, 4), (4,), (3, 1)]


@settings(max_examples=150, deadline=None)
@given(_trees(["@0", "@1", "@2"]), st.booleans())
def test_random_expressions_match_a_naive_evaluation(tree, same_shape):
    shapes = [(3, 4)] * 3 if same_shape else SHAPES
    values = [np.random.default_rng(i).normal(size=s) for i, s in enumerate(shapes)]
    text = _text(tree)
    result = evaluate(text, values)
    with np.errstate(all="ignore"):
        expected = np.broadcast_to(_naive(tree, values), np.shape(result)) if np.ndim(result) else _naive(tree, values)
    np.testing.assert_allclose(np.asarray(result, dtype=np.float64), expected, rtol=1e-12, atol=1e-12)


def test_no_eval_or_exec_in_the_compiler():
    root = pathlib.Path(__file__).resolve().parents[2] / "kuiper"
    sources = [*root.joinpath("expr").glob("*.py"), *root.joinpath("ir").glob("*.py")]
    assert sources
    for path in sources:
        assert not re.search(r"(?<![\w.])(eval|exec)\(", path.read_text()), path


def test_where_with_scalar_branches_is_a_tensor():
    cond = np.array([True, False, True])
    result = evaluate("where(@0,1,0)", [cond])
    assert result.dtype == np.int64 and result.tolist() == [1, 0, 1]
    assert evaluate("where(@0,1.5,0)", [cond]).dtype == np.float32


def test_list_items_may_be_tensors():
    x = np.arange(3, dtype=np.int64)
    first, second = evaluate("[@0,add(@0,1)]", [x])
    assert first.tolist() == [0, 1, 2] and second.tolist() == [1, 2, 3]
    assert not np.shares_memory(first, x)


def test_deeply_fused_dag_compiles_in_linear_time():
    from kuiper.pnnx_expr import substitute

    expr = parse("@0")
    for _ in range(100):
        expr = substitute(parse("add(gelu(@0),mul(@0,0.5))"), {0: expr})
    x = np.linspace(-3, 3, 101).astype(np.float32)
    expected = x.astype(np.float64)
    for _ in range(100):
        expected = UNARY_REFERENCES["gelu"](expected) + expected * 0.5
    close(evaluate(expr, [x]), expected, "float32", rtol=1e-4, atol=1e-5)
