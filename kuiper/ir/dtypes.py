"""Dtype names and PyTorch's type promotion rules.

Dtypes are plain strings.  Tensor dtypes use NumPy's names::

    bool uint8 int8 int16 int32 int64 float16 float32 float64 complex64 complex128

Python scalars (literals, ``size()`` results, scalar inputs) have their own
names, because PyTorch treats them as "weak": they only decide the result's
*category*, never its width::

    pybool pyint pyfloat pycomplex        pyshape (the list ``size(@N)`` returns)

The rules (torch.result_type):
  * categories are ordered bool < integer < floating < complex;
  * between tensors, the higher category wins, within a category the wider
    type (uint8 with int8 gives int16); complex64 with float64 gives complex128;
  * a scalar of a higher category than every tensor gives that category's
    default: int64 for integers, float32 for floats;  otherwise the tensors'
    type stands (a Python float with a float16 tensor stays float16);
  * with only scalars, Python's own rules apply (pyint with pyfloat is pyfloat).
0-d arrays count as tensors here (PyTorch ranks them between the two).

Array dtypes NumPy lacks (bfloat16, the float8/float4 types, int4 ... int1) come from
``ml_dtypes``, the package JAX uses for them: ``EXTENDED_DTYPES``. They are storage types for
frontends that name them (XLA HLO), not part of the promotion rules or the tensor IR, and
``array_dtype`` is the one place a dtype name becomes a backend's dtype object.
"""

from __future__ import annotations

import ml_dtypes
import numpy

from kuiper.errors import IRError, UnsupportedOperatorError

BOOL, INT, FLOAT, COMPLEX = 0, 1, 2, 3  # categories

TENSOR_DTYPES: dict[str, tuple[int, int]] = {  # name -> (category, bits)
    "bool": (BOOL, 8),
    "uint8": (INT, 8),
    "int8": (INT, 8),
    "int16": (INT, 16),
    "int32": (INT, 32),
    "int64": (INT, 64),
    "float16": (FLOAT, 16),
    "float32": (FLOAT, 32),
    "float64": (FLOAT, 64),
    "complex64": (COMPLEX, 64),
    "complex128": (COMPLEX, 128),
}
SCALAR_DTYPES: dict[str, int] = {"pybool": BOOL, "pyint": INT, "pyfloat": FLOAT, "pycomplex": COMPLEX}
SHAPE = "pyshape"

DEFAULT_TENSOR_DTYPE = {BOOL: "bool", INT: "int64", FLOAT: "float32", COMPLEX: "complex64"}
SCALAR_DTYPE = {BOOL: "pybool", INT: "pyint", FLOAT: "pyfloat", COMPLEX: "pycomplex"}
# What a Python scalar is computed as when it becomes an array.
SCALAR_STORAGE = {"pybool": "bool", "pyint": "int64", "pyfloat": "float64", "pycomplex": "complex128"}
# The real dtype of a complex one (abs, real and imaginary parts).
REAL_PART = {"complex64": "float32", "complex128": "float64", "pycomplex": "pyfloat"}


# ml_dtypes' names -> (category, bits). An older ml_dtypes may lack some (see extended_type).
EXTENDED_DTYPES: dict[str, tuple[int, int]] = {
    "bfloat16": (FLOAT, 16),
    "float8_e5m2": (FLOAT, 8), "float8_e4m3fn": (FLOAT, 8), "float8_e4m3b11fnuz": (FLOAT, 8),
    "float8_e5m2fnuz": (FLOAT, 8), "float8_e4m3fnuz": (FLOAT, 8), "float8_e4m3": (FLOAT, 8),
    "float8_e3m4": (FLOAT, 8), "float8_e8m0fnu": (FLOAT, 8), "float4_e2m1fn": (FLOAT, 4),
    "int4": (INT, 4), "uint4": (INT, 4), "int2": (INT, 2), "uint2": (INT, 2), "int1": (INT, 1), "uint1": (INT, 1),
}
# Widths of the array dtypes the promotion rules leave out (the IR has no such unsigned types).
_WIDE = {"uint16": 16, "uint32": 32, "uint64": 64}
# The namespaces whose arrays are NumPy arrays, which hold ml_dtypes' types.
_NUMPY_NAMESPACES = ("numpy", "array_api_compat.numpy", "kuiper.backends.numpy_namespace")


def extended_type(name: str):
    """ml_dtypes' scalar type for an EXTENDED_DTYPES name; an UnsupportedOperatorError if this ml_dtypes lacks it."""
    found = getattr(ml_dtypes, name, None)
    if found is None:
        raise UnsupportedOperatorError(
            f"dtype {name}: the installed ml_dtypes {ml_dtypes.__version__} has no such type (newer versions do)")
    return found


def is_available(name: str) -> bool:
    """False for an extended dtype the installed ml_dtypes lacks."""
    return name not in EXTENDED_DTYPES or hasattr(ml_dtypes, name)


def array_dtype(xp, name: str):
    """The dtype object of array namespace ``xp`` for the dtype name ``name``; None for an unknown name.

    The one place a dtype name is resolved:
    NumPy's and CuPy's as attributes of ``xp`` (float16 too, which the standard leaves out), any
    other namespace's from its table of dtypes by name (the standard's
    ``__array_namespace_info__().dtypes()``), and the extended ones through ml_dtypes, which extends
    NumPy only (CuPy has no such types: an UnsupportedOperatorError).
    """
    if name in EXTENDED_DTYPES:
        namespace = getattr(xp, "__name__", str(xp))
        if namespace not in _NUMPY_NAMESPACES:
            raise UnsupportedOperatorError(
                f"dtype {name} is not supported on the {namespace} backend: it has no such type "
                "(ml_dtypes extends NumPy only); run the model on the NumPy backend")
        return extended_type(name)
    if name.startswith("_"):
        return None
    found = getattr(xp, name, None)
    if found is not None:
        try:
            numpy.dtype(found)  # NumPy's and CuPy's types (xp.add or xp.linalg is no dtype)
            return found
        except TypeError:
            pass
    return _namespace_dtypes(xp).get(name)


def _namespace_dtypes(xp) -> dict:
    """``{name: dtype}`` as the namespace lists them (the standard's inspection API); {} without one."""
    info = getattr(xp, "__array_namespace_info__", None)
    return dict(info().dtypes()) if info is not None else {}


# (dtype class, array dtype) -> name: str(dtype) costs ~10 us, paid on every elementwise call.  The class
# comes first so that no two namespaces' dtypes are ever compared (array-api-strict warns when they are).
_ARRAY_DTYPE_NAMES: dict = {}


def name_of(dtype) -> str:
    """The name of an array dtype of any namespace (or of a name): NumPy's float32 dtype, its
    scalar type numpy.float32, ``array_api_strict.float32`` and ``torch.float32`` are all 'float32'.

    A dtype that is not NumPy's is named by the last dotted part of its text, which is how the
    namespaces that follow the standard print their dtypes; a name kuiper does not know is an IRError.
    """
    if isinstance(dtype, str):
        return dtype
    key = (dtype.__class__, dtype)
    name = _ARRAY_DTYPE_NAMES.get(key)
    if name is not None:
        return name
    if isinstance(dtype, numpy.dtype) or isinstance(dtype, type) and issubclass(dtype, numpy.generic):
        name = numpy.dtype(dtype).name
    else:
        name = str(dtype).rpartition(".")[2]
        if not (name in TENSOR_DTYPES or name in EXTENDED_DTYPES or name in _WIDE):
            raise IRError(f"{dtype!r} is not an array dtype kuiper knows")
    _ARRAY_DTYPE_NAMES[key] = name
    return name


def itemsize(dtype) -> int:
    """Bytes per element of an array dtype of any namespace (an int4 is stored in a byte)."""
    return max(1, bits(name_of(dtype)) // 8)


# The standard's dtype kinds (``xp.isdtype``) of the extended types, which NumPy's isdtype refuses.
_EXTENDED_KINDS = {FLOAT: ("real floating", "numeric"), INT: ("integral", "numeric")}


def isdtype(xp, dtype, kind) -> bool:
    """``xp.isdtype(dtype, kind)`` (a kind name or a tuple of them), also for ml_dtypes' types."""
    name = _ARRAY_DTYPE_NAMES.get((dtype.__class__, dtype)) or (str(dtype) if is_extended(dtype) else None)
    if name in EXTENDED_DTYPES:
        category_, _ = EXTENDED_DTYPES[name]
        kinds = (kind,) if isinstance(kind, str) else kind
        signed = "signed integer" if not name.startswith("u") else "unsigned integer"
        return any(k in _EXTENDED_KINDS[category_] or (category_ == INT and k == signed) for k in kinds)
    return xp.isdtype(dtype, kind)


def is_extended(dtype) -> bool:
    """An ml_dtypes dtype (given by name or as an array dtype)."""
    return str(dtype) in EXTENDED_DTYPES


def is_extended_float(dtype) -> bool:
    return EXTENDED_DTYPES.get(str(dtype), (None,))[0] == FLOAT


def bits(dtype: str) -> int:
    """The width in bits of a tensor or extended dtype (int4: 4, though ml_dtypes stores it in a byte)."""
    if dtype in EXTENDED_DTYPES:
        return EXTENDED_DTYPES[dtype][1]
    return TENSOR_DTYPES[dtype][1] if dtype in TENSOR_DTYPES else _WIDE[dtype]


def array_category(name: str) -> int | None:
    """The category (BOOL, INT, FLOAT, COMPLEX) of an array dtype name, the extended and wide
    unsigned ones too; None for a name kuiper does not know."""
    if name in _WIDE:
        return INT
    found = TENSOR_DTYPES.get(name) or EXTENDED_DTYPES.get(name)
    return found[0] if found else None


def integer_info(dtype):
    """iinfo of an integer dtype, NumPy's or ml_dtypes' (int4 ...)."""
    return ml_dtypes.iinfo(dtype)


def float_info(dtype):
    """finfo of a float dtype, NumPy's or ml_dtypes' (bfloat16, float8_e4m3fn ...)."""
    return ml_dtypes.finfo(dtype)


def is_known(dtype: str) -> bool:
    return dtype in TENSOR_DTYPES or dtype in SCALAR_DTYPES or dtype == SHAPE


def is_scalar(dtype: str) -> bool:
    """A Python scalar dtype (pybool, pyint, pyfloat)."""
    return dtype in SCALAR_DTYPES


def category(dtype: str) -> int:
    if dtype in TENSOR_DTYPES:
        return TENSOR_DTYPES[dtype][0]
    if dtype in SCALAR_DTYPES:
        return SCALAR_DTYPES[dtype]
    raise IRError(f"{dtype!r} is not a value dtype")


def is_float(dtype: str) -> bool:
    return category(dtype) == FLOAT


def is_integer(dtype: str) -> bool:
    return category(dtype) == INT


def is_bool(dtype: str) -> bool:
    return category(dtype) == BOOL


def is_complex(dtype: str) -> bool:
    return category(dtype) == COMPLEX


def storage_dtype(dtype: str) -> str:
    """The array dtype that holds values of ``dtype`` (float64 for pyfloat ...)."""
    return SCALAR_STORAGE.get(dtype, dtype)


def promote(*dtypes: str) -> str:
    """The dtype an operation on operands of these dtypes computes in."""
    tensors = [d for d in dtypes if d in TENSOR_DTYPES]
    scalars = [d for d in dtypes if d in SCALAR_DTYPES]
    unknown = [d for d in dtypes if d not in TENSOR_DTYPES and d not in SCALAR_DTYPES]
    if unknown:
        raise IRError(f"{unknown[0]!r} cannot take part in arithmetic")
    scalar_category = max((SCALAR_DTYPES[d] for d in scalars), default=-1)
    if not tensors:
        return SCALAR_DTYPE[scalar_category]
    result = tensors[0]
    for other in tensors[1:]:
        result = _promote_tensors(result, other)
    if scalar_category > category(result):
        return DEFAULT_TENSOR_DTYPE[scalar_category]
    return result


def _promote_tensors(a: str, b: str) -> str:
    (cat_a, bits_a), (cat_b, bits_b) = TENSOR_DTYPES[a], TENSOR_DTYPES[b]
    if cat_a != cat_b:
        high, low = (a, b) if cat_a > cat_b else (b, a)
        if high == "complex64" and low == "float64":
            return "complex128"  # the real part keeps float64's precision
        return high
    if a == b:
        return a
    if cat_a == INT and "uint8" in (a, b):
        # uint8 with a signed type needs the next wider signed type.
        signed_bits = bits_b if a == "uint8" else bits_a
        return f"int{max(16, signed_bits)}"
    return a if bits_a >= bits_b else b


def to_float(dtype: str) -> str:
    """The floating dtype a float-valued function (exp, div ...) of ``dtype`` returns (complex stays complex)."""
    if is_float(dtype) or is_complex(dtype):
        return dtype
    return "pyfloat" if is_scalar(dtype) else "float32"


def with_category(dtype: str, new_category: int) -> str:
    """The dtype of ``new_category`` that keeps ``dtype``'s scalar-or-tensor nature."""
    if category(dtype) == new_category:
        return dtype
    return SCALAR_DTYPE[new_category] if is_scalar(dtype) else DEFAULT_TENSOR_DTYPE[new_category]


def of_python_value(value: object) -> str:
    """The scalar dtype of a Python literal."""
    if isinstance(value, bool):
        return "pybool"
    if isinstance(value, int):
        return "pyint"
    if isinstance(value, float):
        return "pyfloat"
    if isinstance(value, complex):
        return "pycomplex"
    raise IRError(f"{value!r} has no elementwise dtype (None is not a value)")


def of_value(value) -> str:
    """The IR dtype of a run-time value: a Python scalar's own name, else its array's dtype name."""
    if isinstance(value, (bool, int, float, complex)):
        return of_python_value(value)
    dtype = value.dtype
    name = _ARRAY_DTYPE_NAMES.get((dtype.__class__, dtype))
    return name if name is not None else name_of(dtype)


# C type of a value of each dtype as stored (kernel parameters, buffers); float16 is CUDA's
# __half, typedef'd to float16 by the CUDA generator.  Shared by every C-style code generator.
C_TYPES = {
    "bool": "bool",
    "uint8": "unsigned char",
    "int8": "signed char",
    "int16": "short",
    "int32": "int",
    "int64": "long long",
    "float16": "float16",
    "float32": "float",
    "float64": "double",
    "pybool": "bool",
    "pyint": "long long",
    "pyfloat": "double",
}
