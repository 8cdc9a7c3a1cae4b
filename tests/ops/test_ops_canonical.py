"""The canonical data-movement and bit ops, run alone, against hand-worked values; the Elementwise op's
IR (compiled, fusable) against its exact array-API code on edge values (zero divisors, INT_MIN / -1,
out-of-range shift counts, NaN and infinities converted to integers)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuiper.graph import build
from kuiper.model_ir import ModelIR, OperandInfo, OpNode
from kuiper.ops import elementwise_exact as exact


def run_op(op_type: str, inputs: list, params: dict | None = None, attrs: dict | None = None, fuse: bool = False):
    names = [f"in{i}" for i in range(len(inputs))]
    node = OpNode(op_type, "op", names, ["out"], params or {}, attrs or {})
    operands = {name: OperandInfo(name) for name in [*names, "out"]}
    model = build(ModelIR([node], operands, names, ["out"], "test"), backend="numpy", fuse=fuse)
    return model, np.asarray(model(*inputs, to_numpy=True))


@pytest.mark.parametrize("shape, sizes", [
    ((4, 1, 6), (4, 1, 6)),  # the block spans every dim: no start is read
    ((7, 1, 5), (1, 1, 5)),  # one varying dim (a scan's xs[t]), the others spanned
    ((1, 7, 5), (1, 2, 5)),
    ((2, 4), (1, 4)),  # a block one short of its dim: two windows
    ((6, 5, 3), (2, 3, 3)),  # two varying dims
])
def test_specialized_dynamic_slices_take_the_clamped_window_for_any_starts(shape, sizes):
    """The specialized forwards (``Op.specialized``; a spanned dim's start is never read, a varying one is
    clamped) against the window worked out here: each start clamped into [0, dim - size]."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(np.float32)
    update = rng.standard_normal(sizes).astype(np.float32)
    index = lambda i: np.array(i, np.int32)
    zeros = [index(0)] * len(shape)
    read_model, _ = run_op("DynamicSlice", [x, *zeros], {"sizes": list(sizes)})
    write_model, _ = run_op("DynamicUpdateSlice", [x, update, *zeros])
    read_op, write_op = read_model.plan.steps[0].op, write_model.plan.steps[0].op
    read, write = read_op.specialized([x, *zeros]), write_op.specialized([x, update, *zeros])
    assert read is not None and write is not None
    for _ in range(40):
        starts = [int(s) for s in rng.integers(-4, 10, len(shape))]
        begins = [min(max(start, 0), dim - size) for start, dim, size in zip(starts, shape, sizes)]
        window = tuple(slice(b, b + size) for b, size in zip(begins, sizes))
        np.testing.assert_array_equal(read(x, *map(index, starts)), x[window])
        expected = x.copy()
        expected[window] = update
        np.testing.assert_array_equal(write(x.copy(), update, *map(index, starts)), expected)


def test_broadcast_maps_operand_dims_to_result_dims():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    _, out = run_op("Broadcast", [x], {"shape": [2, 4, 3], "dims": [0, 2]})
    np.testing.assert_array_equal(out, np.broadcast_to(x[:, None, :], (2, 4, 3)))
    _, swapped = run_op("Broadcast", [x], {"shape": [3, 5, 2], "dims": [2, 0]})  # operand dim 0 -> result dim 2
    np.testing.assert_array_equal(swapped[:, 1, :], x.T)


def test_slice_and_pad_with_interior_and_negative_amounts():
    x = np.arange(10, dtype=np.int32)
    _, out = run_op("Slice", [x], {"starts": [1], "limits": [9], "strides": [3]})
    np.testing.assert_array_equal(out, [1, 4, 7])
    # [1,2,3] -> interior 1: [1,0,2,0,3] -> crop one low, add two high, fill 9
    _, padded = run_op("Pad", [np.array([1, 2, 3], np.int32), np.array(9, np.int32)],
                       {"low": [-1], "high": [2], "interior": [1]})
    np.testing.assert_array_equal(padded, [9, 2, 9, 3, 9, 9])


def test_dynamic_slices_clamp_their_start_indices():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    _, out = run_op("DynamicSlice", [x, np.int32(5), np.int32(-2)], {"sizes": [2, 2]})
    np.testing.assert_array_equal(out, [[4, 5], [8, 9]])  # starts clamped to (1, 0)
    _, updated = run_op("DynamicUpdateSlice", [x, np.full((2, 3), -1, np.float32), np.int32(2), np.int32(3)])
    expected = x.copy()
    expected[1:3, 1:4] = -1  # starts clamped to (1, 1)
    np.testing.assert_array_equal(updated, expected)


def test_iota_counts_along_one_dim():
    _, out = run_op("Iota", [], {"shape": [2, 3], "dim": 1, "dtype": "int32"})
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, [[0, 1, 2], [0, 1, 2]])


def test_bitcast_convert_reinterprets_bits_and_reshapes_for_other_widths():
    _, bits = run_op("BitcastConvert", [np.float32([1.0, -2.0])], {"dtype": "int32"})
    np.testing.assert_array_equal(bits, [0x3F800000, -0x40000000])
    _, narrow = run_op("BitcastConvert", [np.int32([0x04030201])], {"dtype": "uint8"})
    np.testing.assert_array_equal(narrow, [[1, 2, 3, 4]])  # little-endian bytes, a new minor dim
    _, wide = run_op("BitcastConvert", [np.uint8([[1, 2, 3, 4]])], {"dtype": "int32"})
    np.testing.assert_array_equal(wide, [0x04030201])


def test_reduce_precision_rounds_to_nearest_even_and_saturates_the_exponent():
    x = np.float32([1 + 2**-8, 1 + 3 * 2**-8, 70000.0, 1e-8, np.nan])
    _, half = run_op("ReducePrecision", [x], {"exponent_bits": 5, "mantissa_bits": 10})  # float16's
    np.testing.assert_array_equal(half[:2], [1 + 2**-8, 1 + 3 * 2**-8])  # exact in 10 mantissa bits
    assert np.isinf(half[2]) and half[3] == 0 and np.isnan(half[4])
    _, bfloat = run_op("ReducePrecision", [x[:2]], {"exponent_bits": 8, "mantissa_bits": 7})
    np.testing.assert_array_equal(bfloat, [1.0, 1 + 2**-6])  # ties go to the even mantissa


def _elementwise(function: str, operands: list, dtype: str):
    model, out = run_op("Elementwise", operands, {"function": function, "dtype": dtype,
                                                  "operand_dtypes": [str(o.dtype) for o in operands]})
    return model.steps[0].op, out


INTEGER_EDGES = {
    "int32": [0, 1, -1, 7, -7, 31, 32, 33, -32, 2**31 - 1, -(2**31)],
    "int8": [0, 1, -1, 7, -7, 8, 9, 127, -128],
    "uint8": [0, 1, 7, 8, 9, 200, 255],
}


@pytest.mark.parametrize("function", ["divide", "remainder", "shift_left", "shift_right_arithmetic",
                                      "shift_right_logical"])
@pytest.mark.parametrize("dtype", list(INTEGER_EDGES))
def test_integer_ir_agrees_with_the_exact_code_on_every_edge_pair(function, dtype):
    values = np.array(INTEGER_EDGES[dtype], dtype)
    a, b = (np.ascontiguousarray(v.ravel()) for v in np.meshgrid(values, values))
    op, got = _elementwise(function, [a, b], dtype)
    if not (function == "shift_right_arithmetic" and dtype == "uint8"):
        assert op.math is not None, "expected the IR path"
    np.testing.assert_array_equal(got, exact.BINARY[function](np, a, b))


@pytest.mark.parametrize("target", ["int32", "int8", "uint8", "int64"])
def test_float_to_integer_conversion_saturates_in_the_ir(target):
    x = np.float32([np.nan, np.inf, -np.inf, 3e9, -3e9, 2.9, -2.9, 127.5, -128.7, 255.9, 0.0])
    op, got = _elementwise("convert", [x], target)
    assert op.math is not None
    np.testing.assert_array_equal(got, exact.convert(np, x, getattr(np, target)))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True), min_size=1, max_size=20))
def test_rounding_sign_and_finiteness_in_the_ir_match_the_exact_code(values):
    x = np.array(values, np.float32)
    for function, dtype in (("round_half_away", "float32"), ("sign", "float32"), ("is_finite", "bool")):
        op, got = _elementwise(function, [x], dtype)
        assert op.math is not None
        np.testing.assert_array_equal(got, exact.UNARY[function](np, x), err_msg=function)


def test_a_total_order_compare_runs_exact_code():
    a, b = np.float32([-0.0, np.nan, -np.inf]), np.float32([0.0, np.inf, -np.nan])
    model, out = run_op("Elementwise", [a, b], {"function": "compare", "operand_dtypes": ["float32", "float32"],
                                                "dtype": "bool", "direction": "lt", "order": "total"})
    assert model.steps[0].op.math is None
    np.testing.assert_array_equal(out, [True, False, False])  # -0 < +0; NaN > inf; -inf > -NaN
