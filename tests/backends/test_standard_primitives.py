"""The primitives written in the array API standard (kuiper/backends/standard.py, kuiper/ir/bitcast.py),
run on array-api-strict and compared with NumPy's own functions of the same meaning."""

from __future__ import annotations

import numpy as np
import pytest

xp = pytest.importorskip("array_api_strict", reason="array-api-strict is in the test extra")

from kuiper.backends import standard  # noqa: E402
from kuiper.errors import UnsupportedOperatorError  # noqa: E402
from kuiper.ir.bitcast import bitcast  # noqa: E402

RNG = np.random.default_rng(7)
X = RNG.standard_normal((2, 3, 5, 4)).astype(np.float32)


@pytest.mark.parametrize("mode, numpy_mode", [("reflect", "reflect"), ("replicate", "edge"), ("circular", "wrap")])
def test_pad_modes_match_numpy(mode, numpy_mode):
    pads = ((0, 0), (1, 0), (3, 4), (1, 1))  # 3 and 4 on an axis of 5: reflect's largest
    got = standard.pad(xp, xp.asarray(X), pads, mode)
    np.testing.assert_array_equal(np.asarray(got), np.pad(X, pads, mode=numpy_mode))


def test_constant_padding_matches_numpy():
    pads = ((0, 1), (2, 0), (0, 0), (1, 3))
    got = standard.pad(xp, xp.asarray(X), pads, "constant", -2.5)
    np.testing.assert_array_equal(np.asarray(got), np.pad(X, pads, constant_values=-2.5))


@pytest.mark.parametrize("window, axes", [((2, 3), (2, 3)), ((2,), (-1,)), ((3, 2), (3, 1))])
def test_sliding_windows_match_numpys_view(window, axes):
    got = standard.sliding_window(xp, xp.asarray(X), window, axes)
    np.testing.assert_array_equal(np.asarray(got), np.lib.stride_tricks.sliding_window_view(X, window, axis=axes))


A, B, V = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((2, 4, 5)), RNG.standard_normal(5)


@pytest.mark.parametrize("equation, operands", [
    ("bij,bjk->bik", (A, B)), ("bij,bjk,k->bi", (A, B, V)), ("bij->jb", (A,)), ("ii->i", (A[0, :3, :3],)),
    ("ii", (A[0, :3, :3],)), ("...ij,...jk->...ik", (A, B)), ("...j,jk->...k", (A, B[0])),
    ("bij,bjk", (A, B)), ("ij,kl->ijkl", (A[0], B[0])), ("bij,bik->bjk", (A, A)), ("k,k->", (V, V)),
])
def test_einsum_matches_numpy(equation, operands):
    got = standard.einsum(xp, equation, *[xp.asarray(o) for o in operands])
    want = np.einsum(equation, *operands)
    assert tuple(got.shape) == want.shape
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-12)


def test_scatter_add_accumulates_and_put_keeps_the_last_write():
    indices, values = np.array([1, 3, 1, 6, 0, 3, 3]), np.arange(7.0) + 1
    target = xp.asarray(np.full(8, 0.5))
    assert standard.scatter_add(xp, target, xp.asarray(indices), xp.asarray(values)) is target
    want = np.full(8, 0.5)
    np.add.at(want, indices, values)
    np.testing.assert_array_equal(np.asarray(target), want)
    target = xp.asarray(np.full(8, 0.5))
    standard.put(xp, target, xp.asarray(indices), xp.asarray(values))
    np.testing.assert_array_equal(np.asarray(target), [5, 3, 0.5, 7, 0.5, 0.5, 4, 0.5])  # by hand: last write wins


def _float_specials(dtype):
    info = np.finfo(dtype)
    values = [0.0, -0.0, 1.0, -1.0, 0.1, 3.0, info.max, -info.max, info.tiny, info.smallest_subnormal,
              -info.smallest_subnormal, info.tiny * 0.75, np.inf, -np.inf, 2.0 ** 20 - 1, 1 - info.eps / 2]
    spread = RNG.standard_normal(200) * 10.0 ** RNG.integers(-30, 30, 200)
    return np.concatenate([np.array(values, dtype), spread.astype(dtype)])


@pytest.mark.parametrize("float_type, int_type", [(np.float32, np.int32), (np.float32, np.uint32),
                                                  (np.float64, np.int64), (np.float64, np.uint64)])
def test_bitcast_reads_float_bits_as_numpys_view_does(float_type, int_type):
    values = _float_specials(float_type)
    bits = bitcast(xp, xp.asarray(values), getattr(xp, np.dtype(int_type).name))
    np.testing.assert_array_equal(np.asarray(bits), values.view(int_type))
    back = bitcast(xp, bits, getattr(xp, np.dtype(float_type).name))
    np.testing.assert_array_equal(np.asarray(back).view(int_type), values.view(int_type))  # -0.0 too


def test_bitcast_gives_the_quiet_nan_of_its_sign_and_refuses_other_widths():
    nans = np.array([np.nan, -np.nan], np.float32)
    bits = np.asarray(bitcast(xp, xp.asarray(nans), xp.uint32))
    np.testing.assert_array_equal(bits, [0x7FC00000, 0xFFC00000])
    assert np.isnan(np.asarray(bitcast(xp, xp.asarray(bits), xp.float32))).all()
    integers = np.array([-5, 0, 7, np.iinfo(np.int16).min], np.int16)
    np.testing.assert_array_equal(np.asarray(bitcast(xp, xp.asarray(integers), xp.uint16)), integers.view(np.uint16))
    with pytest.raises(UnsupportedOperatorError, match="float32 as int64"):
        bitcast(xp, xp.asarray(nans), xp.int64)
