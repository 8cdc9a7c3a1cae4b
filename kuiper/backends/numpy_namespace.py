"""The NumPy backend's array namespace: NumPy's own, plus array_api_compat where NumPy is not the standard.

Ops compute with an array-API namespace (``backend.xp``).  array_api_compat.numpy is one, but
importing it costs 110-130 ms of CPU and 16 MiB in every process that builds a NumPy model: it
reads every attribute of numpy, which imports numpy.f2py, numpy.testing, numpy.ma and the other
submodules NumPy itself loads only when asked (docs/performance.md, "Start-up and memory").

From NumPy 2.1 on, NumPy's main namespace follows the standard for everything kuiper's ops call
(permute_dims, astype, concat, isdtype, creation functions with ``device=``, integer-keeping
ceil/floor/trunc, var's ``correction``), except the names in FROM_ARRAY_API_COMPAT: NumPy's sort
and argsort take no ``descending`` and are not stable by default, its clip promotes where the
standard keeps the input's dtype, its sign of a complex number differs from x/|x| in the last
bit, and its linalg and fft differ in signatures and result types.
This module is that namespace: NumPy's attributes, and array_api_compat.numpy's for those names,
imported the first time one of them is asked for.  With an older NumPy,
``array_namespace()`` gives array_api_compat.numpy itself.

``reshape``, ``permute_dims``, ``matrix_transpose``, ``sum``, ``max`` and ``min`` of an ndarray call
the array's own method: NumPy's functions of those names reach the same code through a Python
dispatch layer that costs 1.2-1.5 us a call, and a small transformer's call makes about 80 of them
(nn.Transformer with 12 tokens: 0.1 ms of its 2).
"""

from __future__ import annotations

import importlib as _importlib
import sys as _sys
from types import ModuleType as _ModuleType

import numpy as _numpy

# Names taken from array_api_compat.numpy, where NumPy's own differ from the standard.
FROM_ARRAY_API_COMPAT = frozenset({"argsort", "sort", "clip", "sign", "linalg", "fft"})
# The first NumPy whose namespace serves (np.astype, reshape's copy=, ... arrived in 2.1).
FIRST_SERVING_NUMPY = (2, 1)


def array_namespace() -> _ModuleType:
    """This module on NumPy 2.1 or later, else array_api_compat.numpy."""
    if _numpy_version() >= FIRST_SERVING_NUMPY:
        return _sys.modules[__name__]
    return _array_api_compat()


def _numpy_version() -> tuple[int, int]:
    major, minor = _numpy.__version__.split(".")[:2]
    return int(major), int(minor)


def _array_api_compat() -> _ModuleType:
    return _importlib.import_module("array_api_compat.numpy")


def __getattr__(name: str):
    """A name not copied from NumPy below: array_api_compat's (then kept), or a NumPy submodule
    that loads on first use (numpy.random, ...)."""
    if name in FROM_ARRAY_API_COMPAT:
        value = getattr(_array_api_compat(), name)
        globals()[name] = value
        return value
    return getattr(_numpy, name)


# NumPy's attributes loaded so far (``vars``, not ``dir``: asking for the others imports them).
globals().update({name: value for name, value in vars(_numpy).items()
                  if not name.startswith("_") and name not in FROM_ARRAY_API_COMPAT})


def reshape(x, /, shape, *, copy=None):
    """The standard's reshape: ``x.reshape(shape)`` for an ndarray, NumPy's function for the rest."""
    if copy is None and x.__class__ is _numpy.ndarray:
        return x.reshape(shape)
    return _numpy.reshape(x, shape, copy=copy)


def permute_dims(x, /, axes):
    """The standard's permute_dims: ``x.transpose(axes)`` for an ndarray, NumPy's function for the rest."""
    if x.__class__ is _numpy.ndarray:
        return x.transpose(axes)
    return _numpy.permute_dims(x, axes)


def matrix_transpose(x, /):
    """The standard's matrix_transpose: the last two axes swapped (a view)."""
    if x.__class__ is _numpy.ndarray and x.ndim >= 2:
        return x.swapaxes(-1, -2)
    return _numpy.matrix_transpose(x)


def sum(x, /, *, axis=None, dtype=None, keepdims=False):  # noqa: A001 - the standard's name
    """The standard's sum: ``x.sum(...)`` for an ndarray, NumPy's function for the rest."""
    if x.__class__ is _numpy.ndarray:
        return x.sum(axis=axis, dtype=dtype, keepdims=keepdims)
    return _numpy.sum(x, axis=axis, dtype=dtype, keepdims=keepdims)


def max(x, /, *, axis=None, keepdims=False):  # noqa: A001
    """The standard's max: ``x.max(...)`` for an ndarray, NumPy's function for the rest."""
    if x.__class__ is _numpy.ndarray:
        return x.max(axis=axis, keepdims=keepdims)
    return _numpy.max(x, axis=axis, keepdims=keepdims)


def min(x, /, *, axis=None, keepdims=False):  # noqa: A001
    """The standard's min: ``x.min(...)`` for an ndarray, NumPy's function for the rest."""
    if x.__class__ is _numpy.ndarray:
        return x.min(axis=axis, keepdims=keepdims)
    return _numpy.min(x, axis=axis, keepdims=keepdims)
