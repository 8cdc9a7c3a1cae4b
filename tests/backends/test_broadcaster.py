"""Backend.broadcaster: a broadcast the NumPy backend makes as a strided view, against np.broadcast_to."""

import numpy as np
import pytest

from kuiper.backends import get_backend
from kuiper.backends.base import Backend

CASES = [((3,), (2, 3)), ((1, 3), (4, 3)), ((4, 1), (4, 5)), ((2, 1, 3), (5, 2, 7, 3)), ((), (2, 2)),
         ((1,), (3,)), ((3,), (3,)), ((0, 1), (0, 4)), ((2, 1), (2, 0))]


@pytest.mark.parametrize("source, shape", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.float64])
def test_the_numpy_broadcaster_is_numpys_broadcast(source, shape, dtype):
    backend = get_backend("numpy")
    x = (np.arange(int(np.prod(source))) - 2).astype(dtype).reshape(source)
    view = backend.broadcaster(x, shape)(x)
    want = np.broadcast_to(x, shape)
    assert view.shape == want.shape and view.dtype == want.dtype
    np.testing.assert_array_equal(view, want)
    assert not view.flags.writeable  # as np.broadcast_to's: nothing may write through a repeated element
    if view.size:
        assert np.shares_memory(view, x)  # a view, not a copy


def test_a_strided_input_and_a_read_only_one_are_broadcast_too():
    backend = get_backend("numpy")
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    broadcast = backend.broadcaster(x[:, :1], (2, 3, 4))
    np.testing.assert_array_equal(broadcast(x[:, 1:2]), np.broadcast_to(x[:, 1:2], (2, 3, 4)))  # not contiguous
    frozen = np.arange(3, dtype=np.float32)
    frozen.flags.writeable = False
    np.testing.assert_array_equal(backend.broadcaster(frozen, (2, 3))(frozen), np.broadcast_to(frozen, (2, 3)))


def test_shapes_that_do_not_broadcast_are_refused_as_numpy_refuses_them():
    backend = get_backend("numpy")
    x = np.ones((3,), np.float32)
    with pytest.raises(ValueError):
        backend.broadcaster(x, (2, 4))(x)
    generic = Backend.broadcaster(backend, x, (2, 3))  # the array-API default
    np.testing.assert_array_equal(generic(x), np.ones((2, 3), np.float32))
