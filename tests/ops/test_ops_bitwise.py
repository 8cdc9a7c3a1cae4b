"""Bitwise ops beyond their PyTorch fixtures: float operands refused, shifts past the bit width.

The fixtures (tools/fixture_models/ops_rest.py, checked by tests/end_to_end/test_models.py) compare each
op with PyTorch; these tests pin the cases a fixture cannot reach (bad dtypes,
shift counts outside the width) against hand-written values.
"""

import numpy as np
import pytest
from conftest import op_model

from kuiper.errors import InputError


def test_bitwise_ops_reject_float_operands(tmp_path):
    model = op_model(tmp_path, "torch.bitwise_and a 2 1 x z y $input=x $other=z", inputs=("x", "z"))
    x = np.ones((2, 3), np.float32)
    with pytest.raises(InputError, match="bool or integer"):
        model(x, x)


@pytest.mark.parametrize(
    "dtype, x, shift",
    [("int8", [5, -7, 1], [8, 11, -1]), ("int32", [5, -7, 1], [32, 40, -3]), ("int64", [5, -7, 1], [64, 99, -1]),
     ("uint8", [5, 250, 1], [8, 200, 9])],
)
def test_shifts_outside_the_bit_width_give_zero_or_the_sign_fill(tmp_path, dtype, x, shift):
    # PyTorch's CPU kernels: a shift < 0 or >= the bit width gives 0 (left) or x >> (bits - 1) (right).
    x, shift = np.array([x], dtype), np.array([shift], dtype)
    left = op_model(tmp_path, "torch.bitwise_left_shift a 2 1 x s y $input=x $other=s", inputs=("x", "s"))
    right = op_model(tmp_path, "torch.bitwise_right_shift a 2 1 x s y $input=x $other=s", inputs=("x", "s"))
    np.testing.assert_array_equal(left(x, shift), np.zeros_like(x))
    np.testing.assert_array_equal(right(x, shift), np.where(x.astype(np.int64) < 0, -1, 0).astype(dtype))
