"""The IR's dtype table reads any namespace's dtypes by name (ir.dtypes.name_of, array_dtype, itemsize, isdtype)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from kuiper.errors import IRError
from kuiper.ir import dtypes

strict = pytest.importorskip("array_api_strict", reason="array-api-strict is in the test extra")


@pytest.mark.parametrize("name", ["bool", "uint8", "int8", "int16", "int32", "int64", "float32", "float64",
                                  "complex64", "complex128", "uint16", "uint64"])
def test_a_namespaces_dtype_is_named_and_found_by_name(name):
    found = dtypes.array_dtype(strict, name)
    assert found == getattr(strict, name)
    assert dtypes.name_of(found) == name == dtypes.name_of(np.dtype(name)) == dtypes.name_of(getattr(np, name))
    assert dtypes.itemsize(found) == np.dtype(name).itemsize


def test_what_the_standard_lacks_is_not_found_and_unknown_dtypes_are_refused():
    assert dtypes.array_dtype(strict, "float16") is None  # the standard has no float16
    assert dtypes.array_dtype(strict, "add") is None  # a function is no dtype
    with pytest.raises(IRError, match="not an array dtype kuiper knows"):
        dtypes.name_of(object())


def test_kinds_come_from_the_standard_and_cover_the_extended_types():
    assert dtypes.isdtype(strict, strict.float32, "real floating")
    assert not dtypes.isdtype(strict, strict.int8, ("real floating", "complex floating"))
    assert dtypes.isdtype(np, np.dtype(ml_dtypes.bfloat16), "real floating")  # NumPy's isdtype refuses it
    assert dtypes.isdtype(np, np.dtype(ml_dtypes.int4), "signed integer")
    assert dtypes.isdtype(np, np.dtype(ml_dtypes.uint4), ("unsigned integer",))
    assert not dtypes.isdtype(np, np.dtype(ml_dtypes.uint4), "signed integer")
    assert dtypes.itemsize(np.dtype(ml_dtypes.int4)) == 1 and dtypes.itemsize("bfloat16") == 2
