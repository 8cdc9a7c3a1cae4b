"""The CuPy backend's own array arithmetic, with NumPy standing in for CuPy (the same API), so that
CI checks it without a GPU: the sliding windows it builds from strides (CuPy's sliding_window_view
synchronises with the host) and its scatter-add of complex values (CuPy's add.at takes real ones)."""

from __future__ import annotations

import types

import numpy as np
import pytest

from kuiper.backends.cupy_backend import CupyBackend

NUMPY_AS_CUPY = types.SimpleNamespace(native=np)


@pytest.mark.parametrize("shape, window, axes", [
    ((2, 3, 7, 9), (3, 3), (2, 3)),
    ((1, 4, 5, 5), (5, 1), (2, 3)),
    ((6, 10), (4,), (1,)),
    ((3, 8, 8), (2, 3), (2, 1)),  # axes out of order
])
def test_sliding_window_is_numpys_view(shape, window, axes):
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    got = CupyBackend.sliding_window(NUMPY_AS_CUPY, x, window, axes)
    np.testing.assert_array_equal(got, np.lib.stride_tricks.sliding_window_view(x, window, axis=axes))
    # on a strided input too (a slice of a larger array)
    wide = np.zeros(shape[:-1] + (shape[-1] * 2,), np.float32)
    view = wide[..., ::2]
    view[...] = x
    np.testing.assert_array_equal(CupyBackend.sliding_window(NUMPY_AS_CUPY, view, window, axes),
                                  np.lib.stride_tricks.sliding_window_view(view, window, axis=axes))


def test_a_window_larger_than_its_axis_is_refused():
    with pytest.raises(ValueError, match="does not fit axis 1"):
        CupyBackend.sliding_window(NUMPY_AS_CUPY, np.zeros((2, 3)), (4,), (1,))


@pytest.mark.parametrize("dtype", [np.float32, np.complex64, np.complex128])
def test_scatter_add_accumulates_repeated_indices(dtype):
    indices = np.array([0, 3, 0, 2, 3, 3])
    values = (np.arange(6) + 1j * np.arange(6, 12)).astype(dtype) if np.dtype(dtype).kind == "c" \
        else np.arange(6, dtype=dtype)
    target = np.ones(5, dtype)
    expected = target.copy()
    for index, value in zip(indices, values):  # by hand, one at a time
        expected[index] += value
    assert CupyBackend.scatter_add(NUMPY_AS_CUPY, target, indices, values) is target
    np.testing.assert_array_equal(target, expected)
