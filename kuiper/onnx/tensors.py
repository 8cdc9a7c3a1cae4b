"""ONNX element types and tensors as NumPy arrays, sizes checked before anything is allocated."""

from __future__ import annotations

import math
from pathlib import Path

import ml_dtypes
import numpy as np

from ..errors import ModelFormatError, UnsupportedOperatorError
from ..limits import check_size
from .protobuf import external_bytes, onnx_package

# TensorProto.DataType -> the NumPy (or ml_dtypes) dtype name kuiper computes with.
DTYPES = {
    1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 9: "bool",
    10: "float16", 11: "float64", 12: "uint32", 13: "uint64", 14: "complex64", 15: "complex128",
    16: "bfloat16", 17: "float8_e4m3fn", 18: "float8_e4m3fnuz", 19: "float8_e5m2", 20: "float8_e5m2fnuz",
    21: "uint4", 22: "int4", 23: "float4_e2m1fn", 24: "float8_e8m0fnu", 25: "uint2", 26: "int2",
}
NAMES = {1: "FLOAT", 2: "UINT8", 3: "INT8", 4: "UINT16", 5: "INT16", 6: "INT32", 7: "INT64", 8: "STRING",
         9: "BOOL", 10: "FLOAT16", 11: "DOUBLE", 12: "UINT32", 13: "UINT64", 14: "COMPLEX64", 15: "COMPLEX128",
         16: "BFLOAT16"}
ELEMENT_TYPES = {name: code for code, name in DTYPES.items()}
# Bits per element of the packed types (two or four to a byte in the file).
SUB_BYTE = {21: 4, 22: 4, 23: 4, 25: 2, 26: 2}


def dtype_name(code: int, where: str) -> str:
    """The dtype name of an ONNX element type; strings and unknown codes are refused."""
    if code not in DTYPES:
        kind = "strings" if code == 8 else f"element type {code}"
        raise UnsupportedOperatorError(f"{where}: tensors of {kind} are not supported (kuiper computes on numbers)")
    return DTYPES[code]


def element_type(dtype: str) -> int:
    return ELEMENT_TYPES[dtype]


def stored_bytes(code: int, count: int) -> int:
    """Bytes that ``count`` elements of type ``code`` take in raw_data."""
    if code in SUB_BYTE:
        return math.ceil(count * SUB_BYTE[code] / 8)
    return count * np.dtype(_numpy_dtype(DTYPES[code])).itemsize


def _numpy_dtype(name: str):
    if name in ("bfloat16",) or name.startswith(("float8", "float4", "int4", "uint4", "int2", "uint2")):
        return getattr(ml_dtypes, name)
    return np.dtype(name)


def to_array(tensor, folder: Path | None, where: str) -> np.ndarray:
    """A TensorProto's value; the declared size is checked against the budget first."""
    numpy_helper = onnx_package().numpy_helper
    dims = tuple(tensor.dims)
    if any(d < 0 for d in dims):
        raise ModelFormatError(f"{where}: a tensor with a negative dim {list(dims)}")
    code = tensor.data_type
    name = dtype_name(code, where)
    count = math.prod(dims)
    expected = stored_bytes(code, count)
    check_size((expected,), 1, where)
    if tensor.data_location == 1:  # EXTERNAL
        data = external_bytes(tensor, folder, expected, where)
        tensor = type(tensor)(dims=dims, data_type=code, raw_data=data)
    elif tensor.HasField("raw_data") and len(tensor.raw_data) != expected:
        raise ModelFormatError(f"{where}: raw data of {len(tensor.raw_data)} bytes, expected {expected} for "
                               f"{list(dims)} of {name}")
    try:
        array = numpy_helper.to_array(tensor)
    except Exception as exc:  # onnx raises ValueError/TypeError/... for inconsistent typed fields
        raise ModelFormatError(f"{where}: the tensor's data does not match its shape {list(dims)}: {exc}") from None
    if array.shape != dims:
        raise ModelFormatError(f"{where}: the tensor holds {array.size} values, its shape {list(dims)} "
                               f"needs {count}")
    return np.array(array, order="C", copy=not array.flags.c_contiguous)
