"""The names generated code may contain, and the namespace user names live in.

A name a user chose (a te tensor, index variable or kernel) reaches C++, CUDA
and NumPy source.  To keep it from writing code, or from colliding with a name
the generated code itself uses (``np``, a loop counter, a helper, a keyword):

* every user name must be an ASCII identifier, ``[A-Za-z_][A-Za-z0-9_]*``;
* tensor names are emitted as ``u_<name>``, index variables as ``v_<name>``
  (so a tensor ``i`` and an index ``i`` stay apart): no C++, CUDA or Python
  keyword starts with ``u_`` or ``v_``, and no name the generators make up does
  (they use ``np``, ``flat``, ``value``, ``gathered0``, ``kuiper_*`` ...);
* a kernel (function) name is emitted as it is, so that emitted C++ links with
  the caller's declaration (the course's ``run2.h``); it must therefore not be
  a keyword, a macro of the headers the code includes, or a name the emitted
  code defines itself (see ``function_name_problem``).
"""

from __future__ import annotations

import keyword
import re

TENSOR_PREFIX = "u_"
VARIABLE_PREFIX = "v_"
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

# C++17 and CUDA keywords and qualifiers (the ones a C++ compiler or NVRTC treats specially).
_C_KEYWORDS = frozenset(
    """alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t
    char32_t class compl concept const consteval constexpr constinit const_cast continue co_await
    co_return co_yield decltype default delete do double dynamic_cast else enum explicit export extern
    false float for friend goto if inline int long mutable namespace new noexcept not not_eq nullptr
    operator or or_eq private protected public register reinterpret_cast requires restrict return short
    signed sizeof static static_assert static_cast struct switch template this thread_local throw true
    try typedef typeid typename union unsigned using virtual void volatile wchar_t while xor xor_eq
    main __global__ __device__ __host__ __shared__ __constant__ __restrict__ __forceinline__
    blockIdx blockDim threadIdx gridDim warpSize""".split()
)
# Macros of <math.h> and the C library that the emitted C++ includes, and names the emitted code uses.
_RESERVED = frozenset(
    """NAN INFINITY HUGE_VAL HUGE_VALF HUGE_VALL FP_NAN FP_INFINITE FP_ZERO FP_NORMAL FP_SUBNORMAL
    FP_ILOGB0 FP_ILOGBNAN MATH_ERRNO MATH_ERREXCEPT math_errhandling errno assert NULL EOF
    isnan isinf isfinite isnormal signbit fpclassify isgreater isgreaterequal isless islessequal
    islessgreater isunordered np numpy float16""".split()
)
_RESERVED_PREFIXES = ("kuiper_", "KUIPER_", "__", "M_")


def identifier_problem(name: object) -> str | None:
    """Why ``name`` cannot be a user name in generated code, or None if it can."""
    if not isinstance(name, str) or not _IDENTIFIER.match(name):
        return f"{name!r} is not a name: expected letters, digits and '_', not starting with a digit"
    return None


def function_name_problem(name: object) -> str | None:
    """Why ``name`` cannot name an emitted function (kept verbatim), or None if it can."""
    problem = identifier_problem(name)
    if problem is not None:
        return problem
    if name in _C_KEYWORDS or keyword.iskeyword(name):
        return f"{name!r} is a keyword of the C++, CUDA or Python code it would name"
    if name in _RESERVED or name.startswith(_RESERVED_PREFIXES):
        return f"{name!r} is reserved: a macro or a name the generated code uses itself"
    return None


def tensor_identifier(name: str) -> str:
    """The identifier a (validated) tensor name is emitted as."""
    return TENSOR_PREFIX + name


def variable_identifier(name: str) -> str:
    """The identifier a (validated) index variable is emitted as."""
    return VARIABLE_PREFIX + name
