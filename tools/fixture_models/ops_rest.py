"""The rest of pnnx's op set (issue 18): bitwise/logical ops, scans and selection,
in-place edits, windows (fold/unfold, lp pooling, grid sampling), pooling indices,
complex numbers and spectra.

Each fixture returns every op's result as its own output, so a wrong op shows up as
one wrong output.  Integer and bool outputs are stored with their dtype
(``exact_dtypes``) and compared exactly.  Complex results leave the model through
torch.view_as_real (the reference files hold real arrays only).
"""

import torch
import torch.nn.functional as F
from torch import nn

from fixturelib import Fn, ModelSpec


def _spec(build, *shapes, **kw) -> ModelSpec:
    return ModelSpec(build=build, input_shapes=tuple(shapes), exact_dtypes=True, **kw)


# ---------------------------------------------------------------- bitwise and logical


def bitwise(a, b):
    # a: int64 in [-40, 70), b: int64 shift amounts in [-3, 70) (negative and >= 64 shifts).
    # pnnx cannot take bool inputs, so the bool operand is computed.
    mask = b > 30
    return (
        torch.bitwise_and(a, b), torch.bitwise_or(a, 3), torch.bitwise_xor(a, b), torch.bitwise_not(a),
        torch.bitwise_left_shift(a, b), torch.bitwise_right_shift(a, b), torch.bitwise_right_shift(a, 2),
        torch.bitwise_left_shift(a, 62), torch.bitwise_and(mask, a > 0), torch.bitwise_not(mask),
        torch.bitwise_xor(mask, a < 0), torch.bitwise_or(mask, 6),
        torch.logical_and(a, b), torch.logical_or(a, mask), torch.logical_xor(a, b), torch.logical_not(a),
    )


def logical_float(x):
    # NaN-free floats: zero entries come from the relu
    r = torch.relu(x)
    return torch.logical_not(r), torch.logical_and(r, x), torch.logical_xor(r, x < -0.5)


MODELS = {
    "bitwise_logical_int": _spec(lambda: Fn(bitwise), (1, 4, 5), (1, 4, 5),
                                 input_dtypes=(("int64", -40, 70), ("int64", -3, 70)),
                                 description="torch.bitwise_* and logical_* on int64 and bool, number operands, "
                                             "negative and >= 64 shift amounts, shift overflow"),
    "logical_float": _spec(lambda: Fn(logical_float), (1, 3, 6),
                           description="torch.logical_not/and/xor of float tensors (zero is False)"),
}
