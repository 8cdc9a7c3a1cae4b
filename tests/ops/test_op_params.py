"""The typed param kinds (kuiper.ops.params): an op declares ``params`` and gets them read, checked
and set before setup(), or one error naming the op, the param, what the file holds and what was expected."""

import ml_dtypes
import numpy as np
import pytest

from kuiper.backends import get_backend
from kuiper.errors import OperatorParamError, UnsupportedOperatorError
from kuiper.model_ir import OpNode
from kuiper.ops.base import Op
from kuiper.ops.params import Bool, Choice, DType, Float, Int, Ints, Str


class Declared(Op):
    """One param of each kind, with and without defaults."""

    types = ("Declared",)
    arity = 1
    params = (
        Ints("shape", low=0),
        Int("dim", low=0, high=3),
        Ints("strides", default=1, length="shape", low=1),
        Float("eps", default=1e-5, low=0),
        Bool("keepdim", default=False),
        Str("name", default="unnamed"),
        Choice("mode", ("nearest", "linear"), default="nearest"),
        Int("offset", default=None, attr="start"),
    )

    def setup(self):
        self.setup_saw = {param.attr: getattr(self, param.attr) for param in self.params}


def make(params, op_class=Declared, inputs=("x",), input_keys=None):
    node = OpNode("Declared", "d", list(inputs), ["y"], params, input_keys=list(input_keys or []),
                  source="model.pnnx.param:7")
    return op_class(node, get_backend("numpy"))


def test_values_are_converted_and_set_before_setup():
    op = make({"shape": [2, 3], "dim": [1], "eps": 0, "keepdim": 1, "name": "n", "mode": "linear", "offset": -4})
    assert op.setup_saw == {"shape": (2, 3), "dim": 1, "strides": (1, 1), "eps": 0.0, "keepdim": True,
                            "name": "n", "mode": "linear", "start": -4}
    assert isinstance(op.eps, float) and op.keepdim is True


def test_defaults_are_converted_like_file_values():
    op = make({"shape": [4, 5, 6], "dim": 0})
    assert (op.strides, op.eps, op.keepdim, op.name, op.mode, op.start) == ((1, 1, 1), 1e-5, False, "unnamed",
                                                                            "nearest", None)


def test_an_optional_param_written_as_none_is_none():
    assert make({"shape": [1], "dim": 0, "offset": None}).start is None


@pytest.mark.parametrize(
    "params, message",
    [
        ({"dim": 0}, r"missing required param 'shape'"),
        ({"shape": [2, "3"], "dim": 0}, r"param 'shape' must be a list of integers, found \[2, '3'\]"),
        ({"shape": [2, True], "dim": 0}, r"param 'shape' must be a list of integers"),
        ({"shape": [2, -1], "dim": 0}, r"param 'shape' must be non-negative, found \[2, -1\]"),
        ({"shape": [2], "dim": 1.0}, r"param 'dim' must be an integer, found 1.0"),
        ({"shape": [2], "dim": True}, r"param 'dim' must be an integer, found True"),
        ({"shape": [2], "dim": 4}, r"param 'dim' must be between 0 and 3, found 4"),
        ({"shape": [2], "dim": -1}, r"param 'dim' must be between 0 and 3, found -1"),
        ({"shape": [2, 3], "dim": 0, "strides": [1, 1, 1]},
         r"param 'strides' must have 2 value\(s\), found \[1, 1, 1\]"),
        ({"shape": [2, 3], "dim": 0, "strides": [1, 0]}, r"param 'strides' must be positive, found \[1, 0\]"),
        ({"shape": [2], "dim": 0, "eps": "small"}, r"param 'eps' must be a number, found 'small'"),
        ({"shape": [2], "dim": 0, "eps": -1e-3}, r"param 'eps' must be non-negative, found -0.001"),
        ({"shape": [2], "dim": 0, "keepdim": 2}, r"param 'keepdim' must be True or False, found 2"),
        ({"shape": [2], "dim": 0, "name": 3}, r"param 'name' must be a name, found 3"),
        ({"shape": [2], "dim": 0, "offset": [1, 2]}, r"param 'offset' must be an integer, found \[1, 2\]"),
    ],
)
def test_a_bad_value_names_the_op_the_param_what_was_found_and_expected(params, message):
    with pytest.raises(OperatorParamError, match=message) as info:
        make(params)
    assert "op 'd' of type Declared (model.pnnx.param:7)" in str(info.value)


def test_an_unknown_choice_is_unsupported_and_lists_the_choices():
    with pytest.raises(UnsupportedOperatorError,
                       match=r"op 'd'.*mode='cubic' is not supported \(supported: 'nearest', 'linear'\)"):
        make({"shape": [2], "dim": 0, "mode": "cubic"})


def test_a_single_int_is_repeated_to_the_length():
    assert make({"shape": [2, 3, 4], "dim": 0, "strides": 2}).strides == (2, 2, 2)
    assert make({"shape": [2, 3], "dim": 0, "strides": [3]}).strides == (3, 3)


def test_the_typed_accessors_read_through_the_same_kinds():
    op = make({"shape": [2], "dim": 0, "size": [5], "flag": 0, "bad": -2})
    assert (op.int_param("size"), op.bool_param("flag"), op.ints_param("size", 3)) == (5, False, (5, 5, 5))
    with pytest.raises(OperatorParamError, match=r"op 'd'.*param 'bad' must be positive, found -2"):
        op.positive_int_param("bad")
    assert op.optional_int_param("absent") is None


class Pair(Op):
    types = ("Pair",)
    input_names = ("input", "other")

    def forward(self, *inputs):
        return self.ordered(inputs)


@pytest.mark.parametrize(
    "keys, order",
    [([None, None], (0, 1)), (["input", None], (0, 1)), (["other", "input"], (1, 0)), (["other", None], (1, 0)),
     ([None, "input"], (1, 0))],
)
def test_named_inputs_are_ordered_by_name_and_the_rest_by_position(keys, order):
    op = make({}, Pair, inputs=("a", "b"), input_keys=keys)
    assert op.input_order == order
    assert op.forward("A", "B") == tuple("AB"[i] for i in order)


def test_named_inputs_require_that_many_inputs():
    with pytest.raises(OperatorParamError, match=r"op 'd'.*expects 2 input\(s\), the file gives 3"):
        make({}, Pair, inputs=("a", "b", "c"))


def test_a_param_may_not_hide_a_method():
    with pytest.raises(TypeError, match=r"would hide the method 'forward'"):
        type("Hiding", (Op,), {"params": (Int("forward"),)})


class Typed(Op):
    types = ("Typed",)
    arity = 1
    params = (DType("dtype", "int32"),)


@pytest.mark.parametrize("name, expected", [("int32", np.int32), ("float16", np.float16),
                                            ("bfloat16", ml_dtypes.bfloat16), ("float8_e4m3fn", ml_dtypes.float8_e4m3fn)])
def test_a_dtype_name_becomes_the_backends_dtype(name, expected):
    assert np.dtype(make({"dtype": name}, Typed).dtype) == np.dtype(expected)


def test_a_missing_dtype_takes_its_default():
    assert np.dtype(make({}, Typed).dtype) == np.dtype(np.int32)


@pytest.mark.parametrize("name", ["float31", "add", "linalg", "_private", 32])
def test_a_name_that_is_no_dtype_is_unsupported(name):
    # "add" and "linalg" are attributes of the array namespace, but no dtypes.
    with pytest.raises(UnsupportedOperatorError, match=r"op 'd' .*model\.pnnx\.param:7.*dtype="):
        make({"dtype": name}, Typed)
