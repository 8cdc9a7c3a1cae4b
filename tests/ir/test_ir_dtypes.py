"""PyTorch's dtype promotion, as the issue states it, and the typed constructors."""

from __future__ import annotations

import pytest

from kuiper.errors import IRError
from kuiper.ir import Var, dtypes, make


@pytest.mark.parametrize(
    "operands, expected",
    [
        (("int64", "pyfloat"), "float32"),  # a Python float with an int tensor: float32, not float64
        (("float32", "pyint"), "float32"),
        (("float16", "pyfloat"), "float16"),
        (("int32", "pyint"), "int32"),
        (("bool", "pyint"), "int64"),
        (("bool", "pyfloat"), "float32"),
        (("bool", "pybool"), "bool"),
        (("bool", "int32"), "int32"),
        (("bool", "float16"), "float16"),
        (("int8", "uint8"), "int16"),
        (("uint8", "int32"), "int32"),
        (("int32", "int64"), "int64"),
        (("int64", "float16"), "float16"),  # category beats width between tensors
        (("float32", "float64"), "float64"),
        (("pyint", "pyfloat"), "pyfloat"),
        (("pyint", "pyint"), "pyint"),
        (("pybool", "pybool"), "pybool"),
    ],
)
def test_promotion(operands, expected):
    assert dtypes.promote(*operands) == expected


def test_float_results():
    assert dtypes.to_float("int64") == "float32"
    assert dtypes.to_float("pyint") == "pyfloat"
    assert dtypes.to_float("float16") == "float16"


def test_constructors_insert_casts_and_fold_constant_casts():
    i = Var("i", "int64")
    node = make.mul(i, 0.5)
    assert node.dtype == "float32"
    assert str(node) == "(float32(i) * 0.5)"
    assert make.div(i, i).dtype == "float32"
    assert make.div(Var("n", "pyint"), 2).dtype == "pyfloat"
    assert make.gt(i, 1.5).dtype == "bool"
    assert make.gt(Var("n", "pyint"), 1).dtype == "pybool"
    assert make.add(make.const(True), True).dtype == "pyint"  # True + True == 2 in Python


def test_constants_take_their_dtype():
    assert make.const(0.1, "float32").value == pytest.approx(0.1, rel=1e-7)
    assert make.const(0.1, "float32").value != 0.1  # rounded to float32
    assert make.const(300, "uint8").value == 44  # wraps like a tensor cast
    assert make.const(2**31, "int32").value == -(2**31)
    assert make.const(-2.7, "pyint").value == -2  # truncates
    assert make.const(3, "bool").value is True


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda b: make.sub(b, b), "sub is not defined for two bool tensors"),
        (lambda b: make.floordiv(b, b), "floor_divide is not defined"),
        (lambda b: make.neg(b), "neg is not defined for a bool tensor"),
        (lambda b: make.call("floor", b), "floor is not defined for a bool tensor"),
        (lambda b: make.bitwise("shl", b, b), "lshift is not defined for bool"),
        (lambda b: make.bitwise("and", make.cast(b, "float32"), b), "needs bool or integer"),
        (lambda b: make.const(1, "complex32"), "unknown dtype"),
        (lambda b: make.gt(make.cast(b, "complex64"), 0), "gt is not defined for complex"),
        (lambda b: make.call("floor", make.cast(b, "complex64")), "floor is not defined for complex"),
    ],
)
def test_type_errors_are_expression_errors(build, message):
    with pytest.raises(IRError, match=message):
        build(Var("b", "bool"))


def test_complex_promotion_follows_pytorch():
    assert dtypes.promote("complex64", "float64") == "complex128"
    assert dtypes.promote("float32", "pycomplex") == "complex64"
    assert dtypes.promote("complex64", "pyfloat") == "complex64"
    assert dtypes.promote("int64", "complex128") == "complex128"
    assert make.call("abs", Var("z", "complex64")).dtype == "float32"
    assert make.div(Var("z", "complex128"), 2).dtype == "complex128"


def test_bool_tensors_allow_what_pytorch_allows():
    b = Var("b", "bool")
    for node in (make.add(b, b), make.mul(b, b), make.maximum(b, b), make.bitwise("xor", b, b)):
        assert node.dtype == "bool"
    assert make.div(b, b).dtype == "float32"
