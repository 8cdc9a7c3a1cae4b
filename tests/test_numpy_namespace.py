"""The NumPy backend's namespace computes what array_api_compat.numpy (the reference) computes."""

import array_api_compat.numpy as compat
import numpy as np
import pytest

from kuiper.backends import numpy_namespace
from kuiper.backends.numpy_backend import NumpyBackend

xp = numpy_namespace.array_namespace()
RNG = np.random.default_rng(7)
TIES = np.array([[3, 1, 3, 2, 1, 3], [0, 0, 5, 5, -1, 0]], np.int32)
FLOATS = RNG.standard_normal((3, 4)).astype(np.float32)


def test_the_backend_computes_with_it():
    if numpy_namespace._numpy_version() < numpy_namespace.FIRST_SERVING_NUMPY:
        pytest.skip(f"NumPy {np.__version__}: the backend uses array_api_compat.numpy itself")
    assert NumpyBackend.xp is xp is numpy_namespace


def test_names_where_numpy_is_not_the_standard_are_array_api_compats():
    for name in numpy_namespace.FROM_ARRAY_API_COMPAT:
        assert getattr(xp, name) is getattr(compat, name), name


@pytest.mark.parametrize("call", [
    lambda ns: ns.argsort(TIES, axis=-1, descending=True, stable=True),
    lambda ns: ns.argsort(TIES, axis=0),  # stable by default in the standard
    lambda ns: ns.sort(TIES, axis=-1, descending=True),
    lambda ns: ns.clip(TIES, 0.5, 2.5),  # keeps int32; NumPy's own clip gives float64
    lambda ns: ns.clip(TIES.astype(np.int8), 0, 300),  # a bound past int8's range
    lambda ns: ns.astype(FLOATS, ns.int32),
    lambda ns: ns.astype(np.float32(2.5), ns.int64),
    lambda ns: ns.ceil(TIES), lambda ns: ns.floor(TIES), lambda ns: ns.trunc(FLOATS),
    lambda ns: ns.permute_dims(FLOATS[None], (2, 0, 1)),
    lambda ns: ns.permute_dims(np.float32(2.5), ()),
    lambda ns: ns.matrix_transpose(FLOATS),
    lambda ns: ns.matrix_transpose(FLOATS[None, :, 1:]),
    lambda ns: ns.reshape(FLOATS, (4, 3)),
    lambda ns: ns.reshape(FLOATS.T, (-1,)),  # a copy: not contiguous
    lambda ns: ns.reshape(FLOATS, (2, 6), copy=True),
    lambda ns: ns.reshape(np.float32(1.5), (1, 1)),
    lambda ns: ns.sum(FLOATS), lambda ns: ns.sum(FLOATS, axis=1, keepdims=True),
    lambda ns: ns.sum(TIES, axis=(0, 1), dtype=ns.int64), lambda ns: ns.sum(np.int8(3)),
    lambda ns: ns.max(FLOATS, axis=0), lambda ns: ns.max(TIES, axis=-1, keepdims=True),
    lambda ns: ns.min(FLOATS), lambda ns: ns.min(TIES, axis=(0, 1)),
    lambda ns: ns.take_along_axis(FLOATS, ns.argsort(FLOATS, axis=1), axis=1),
    lambda ns: ns.var(FLOATS, axis=0, correction=1, keepdims=True),
    lambda ns: ns.matmul(FLOATS, FLOATS.T),
    lambda ns: ns.arange(1, 7, 2, dtype=ns.float32),
    lambda ns: ns.full((2, 2), 3, dtype=ns.int16),
    lambda ns: ns.zeros_like(TIES, dtype=ns.float64),
    lambda ns: ns.asarray([1.5, 2], dtype=ns.float32, copy=True),
    lambda ns: ns.sign(np.array([-2.0, 0.0, 3.0 + 4j])),
    lambda ns: ns.concat([TIES, TIES], axis=1),
    lambda ns: ns.linalg.solve(FLOATS[:3, :3] + 3 * np.eye(3, dtype=np.float32), FLOATS[:3]),
])
def test_it_computes_what_array_api_compat_does(call):
    got, want = call(xp), call(compat)
    assert (type(got), got.dtype, got.shape) == (type(want), want.dtype, want.shape)
    np.testing.assert_array_equal(got, want)


def test_numpys_submodules_and_missing_names():
    assert xp.random is np.random  # loaded on first use, as NumPy does
    assert not hasattr(xp, "no_such_function")


def test_an_older_numpy_gets_array_api_compat_itself(monkeypatch):
    monkeypatch.setattr(numpy_namespace, "_numpy_version", lambda: (2, 0))
    assert numpy_namespace.array_namespace() is compat


def test_reshape_and_permute_dims_give_views_where_numpy_does():
    view = xp.reshape(FLOATS, (12,))
    assert np.shares_memory(view, FLOATS)
    assert not np.shares_memory(xp.reshape(FLOATS, (12,), copy=True), FLOATS)
    with pytest.raises(ValueError):
        xp.reshape(FLOATS.T, (12,), copy=False)  # would need a copy
    assert np.shares_memory(xp.permute_dims(FLOATS, (1, 0)), FLOATS)
    assert np.shares_memory(xp.matrix_transpose(FLOATS), FLOATS)
    with pytest.raises(ValueError):
        xp.matrix_transpose(FLOATS[0])  # one dim: no matrix
