"""A backend whose namespace is array-api-strict, the standard's reference implementation, which
refuses everything the standard does not define: the conformance test of kuiper's ops, graph and IR.

It is written as a third party would write one: the array-API namespace, arrays in and out, and
nothing else; the primitives the standard lacks come from the Backend base class (written in the
standard, kuiper/backends/standard.py).  The tests register it through the ``kuiper_add_backends`` hook.
"""

from __future__ import annotations

import array_api_strict
import numpy as np

import kuiper
from kuiper.backends.base import Backend

ARRAY = type(array_api_strict.asarray(0))


class StrictBackend(Backend):
    name = "array-api-strict"
    description = "the array API standard's reference namespace (conformance tests)"
    xp = array_api_strict

    def asarray(self, array, dtype=None):
        xp = self.xp
        if dtype is not None and not isinstance(dtype, type(xp.float32)):
            dtype = getattr(xp, np.dtype(dtype).name)  # a dtype named by NumPy: the namespace's of that name
        if isinstance(array, ARRAY):
            return array if dtype is None else xp.astype(array, dtype)
        return xp.asarray(np.asarray(array), dtype=dtype)

    def to_numpy(self, array):
        return np.from_dlpack(array) if isinstance(array, ARRAY) else np.asarray(array)

    def is_array(self, value) -> bool:
        return isinstance(value, ARRAY)


class StrictPlugin:
    @kuiper.hookimpl
    def kuiper_add_backends(self):
        return [StrictBackend]
