"""Integer convolution is exact: XLA's integer arithmetic wraps, and no path may round through floats.

Reference: int64 NumPy sums wrapped to int32. (Variadic reduce: tests/hlo/test_hlo_structured.py.)
"""

from __future__ import annotations

import numpy as np

import kuiper


def run(text: str, *inputs):
    result = kuiper.load_hlo(text, backend="numpy")(*inputs, to_numpy=True)
    return [np.asarray(r) for r in result] if isinstance(result, tuple) else np.asarray(result)


def literal(array: np.ndarray) -> str:
    if array.ndim == 0:
        return str(int(array))
    return "{" + ",".join(literal(row) for row in array) + "}"


def test_integer_convolution_with_a_constant_3x3_weight_is_exact_and_wraps():
    """16 channels and a 3x3 constant weight: the shape of the Winograd fast path, which would round."""
    rng = np.random.default_rng(0)
    channels = 16
    weight = rng.integers(-50, 50, (channels, channels, 3, 3)).astype(np.int32)
    x = rng.integers(-(2**24), 2**24, (1, channels, 32, 32)).astype(np.int32)
    text = f"""HloModule conv
ENTRY main {{
  x = s32[1,{channels},32,32] parameter(0)
  w = s32[{channels},{channels},3,3] constant({literal(weight)})
  ROOT c = s32[1,{channels},30,30] convolution(x, w), window={{size=3x3}}, dim_labels=bf01_oi01->bf01
}}"""
    expected = np.zeros((1, channels, 30, 30), np.int64)
    for i in range(3):
        for j in range(3):
            expected += np.einsum("bchw,oc->bohw", x[:, :, i:i + 30, j:j + 30].astype(np.int64),
                                  weight[:, :, i, j].astype(np.int64))
    wrapped = ((expected + 2**31) % 2**32 - 2**31).astype(np.int32)
    assert np.abs(expected).max() > 2**31  # the test reaches the wrap
    np.testing.assert_array_equal(run(text, x), wrapped)

