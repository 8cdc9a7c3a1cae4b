"""C for tensor IR, for host C++ and CUDA device code alike (one target of render.py).

Operations are spelled from functions.py: the C math function for floating
operands (``expf`` for float32, ``exp`` for double: the same names in C++'s
<math.h> and in CUDA device code), a ``kuiper_`` helper where C's meaning
differs from the IR's (PyTorch semantics: Python rounding for ``//`` and ``%``,
NaN-propagating max/min, x // 0 == 0 on integers), else the infix symbol.
float16 values are computed in float; an explicit cast to float16 still rounds.
The two dialects differ only in the helpers' ``__device__`` qualifier and in how
inf and NaN are written (NVRTC compiles without headers, so without INFINITY).
"""

from __future__ import annotations

import math

import numpy

from kuiper.errors import IRError
from kuiper.ir import dtypes
from kuiper.ir.functions import Operation
from kuiper.ir.identifiers import TENSOR_PREFIX, VARIABLE_PREFIX
from kuiper.ir.nodes import Cast, Const, DimSize, For, Indexing, IRExpr, Select
from kuiper.ir.render import Renderer, unwrap

# The C type a value of each dtype is computed in (stored values: dtypes.C_TYPES).
COMPUTE_CTYPES = {**dtypes.C_TYPES, "float16": "float"}

HELPERS_TEMPLATE = r"""{include}#ifndef KUIPER_CODEGEN_HELPERS
#define KUIPER_CODEGEN_HELPERS
// kuiper elementwise helpers: PyTorch semantics where C differs.
template <typename T> {qualifier}inline T kuiper_max(T a, T b) {{ return (a > b || a != a) ? a : b; }}
template <typename T> {qualifier}inline T kuiper_min(T a, T b) {{ return (a < b || a != a) ? a : b; }}
template <typename T> {qualifier}inline T kuiper_abs_int(T a) {{ return a < 0 ? T(-a) : a; }}
// Integer // and % round toward -inf (Python); x/0 gives 0 as in NumPy instead of a fault.
template <typename T> {qualifier}inline T kuiper_floordiv_int(T a, T b) {{
  if (b == 0) return T(0);
  if (b == T(-1)) return T(-a);
  T q = T(a / b);
  if ((a % b != 0) && ((a < 0) != (b < 0))) q = T(q - 1);
  return q;
}}
template <typename T> {qualifier}inline T kuiper_remainder_int(T a, T b) {{
  if (b == 0 || b == T(-1)) return T(0);
  T r = T(a % b);
  if (r != 0 && ((r < 0) != (b < 0))) r = T(r + b);
  return r;
}}
template <typename T> {qualifier}inline T kuiper_fmod_int(T a, T b) {{
  return (b == 0 || b == T(-1)) ? T(0) : T(a % b);
}}
template <typename T> {qualifier}inline T kuiper_pow_int(T base, T exponent) {{
  if (exponent < 0) {{
    if (base == 1) return T(1);
    if (base == T(-1)) return (exponent & 1) ? T(-1) : T(1);
    return T(0);
  }}
  T result = 1;
  while (exponent) {{
    if (exponent & 1) result = T(result * base);
    exponent = T(exponent >> 1);
    base = T(base * base);
  }}
  return result;
}}
// Floating // and % as Python (and NumPy, and PyTorch) compute them.
template <typename T> {qualifier}inline T kuiper_floordiv_float(T a, T b) {{
  if (b == 0) return a / b;
  T mod = fmod(a, b);
  T div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
  if (div == 0) return copysign(T(0), a / b);
  T floordiv = floor(div);
  if (div - floordiv > T(0.5)) floordiv += 1;
  return floordiv;
}}
template <typename T> {qualifier}inline T kuiper_remainder_float(T a, T b) {{
  T mod = fmod(a, b);
  if (mod != 0 && ((b < 0) != (mod < 0))) mod += b;
  return mod;
}}
template <typename T> {qualifier}inline T kuiper_logaddexp(T a, T b) {{
  if (isinf(a) && a == b) return a;
  T m = a > b ? a : b;
  return m + log1p(exp(-fabs(a - b)));
}}
#endif
"""
# <math.h> (not <cmath>) declares expf and the float overloads of fmod, isinf ... in the global namespace.
HOST_HELPERS = HELPERS_TEMPLATE.format(include="#include <math.h>\n", qualifier="")
DEVICE_HELPERS = HELPERS_TEMPLATE.format(include="", qualifier="__device__ ")


class CRenderer(Renderer):
    """C expressions and statements; ``device`` selects CUDA device code over host C++."""

    def __init__(self, device: bool, user_names: bool = False):
        """``user_names``: the IR's names are a user's, emitted in their namespace (kuiper.ir.identifiers)."""
        self.device = device
        self.target = "CUDA code" if device else "C++"
        if user_names:
            self.tensor_prefix, self.variable_prefix = TENSOR_PREFIX, VARIABLE_PREFIX

    def spell(self, row: Operation, node: IRExpr) -> str:
        if row.c_bool and dtypes.is_bool(node.dtype):
            return row.c_bool
        floating = dtypes.is_float(node.dtype)
        name = row.c_name if floating else row.c_integer
        if not name:
            return row.symbol  # every row without a C function for this category has a C symbol
        if floating and not name.startswith("kuiper_") and COMPUTE_CTYPES[node.dtype] == "float":
            return name + "f"  # the float overload of <math.h> (and CUDA): expf, fmodf ...
        return name

    def literal(self, node: Const) -> str:
        text = c_literal(node.value, node.dtype, self.device)
        return f"({text})" if text.startswith("-") else text  # so that -(x) never reads as --x

    def visit_Cast(self, node: Cast) -> str:
        value = f"static_cast<{COMPUTE_CTYPES[node.dtype]}>({self.visit(node.operand)})"
        if node.dtype == "float16":
            value = f"static_cast<float>(float16({value}))"  # round to half precision
        return value

    def visit_Select(self, node: Select) -> str:
        cond, a, b = (self.visit(x) for x in (node.cond, node.true_value, node.false_value))
        return f"({cond} ? {a} : {b})"

    def visit_Indexing(self, node: Indexing) -> str:
        return self.tensor(node.tensor.name) + "".join(f"[{unwrap(self.visit(i))}]" for i in node.indices)

    def visit_DimSize(self, node: DimSize) -> str:
        raise IRError(f"size() inside {self.target}: hoist it into a scalar input first")

    def assign(self, target: str, value: str) -> str:
        return f"{target} = {value};"

    def for_header(self, node: For) -> str:
        name = self.variable(node.var.name)
        step = f"++{name}" if is_one(node.step) else f"{name} += {self.bound(node.step)}"
        return f"for (long long {name} = {self.bound(node.start)}; {name} < {self.bound(node.stop)}; {step}) {{"

    def bound(self, node: IRExpr) -> str:
        """A loop bound; a constant one is a plain number (the loop variable is declared long long)."""
        return str(int(node.value)) if isinstance(node, Const) else unwrap(self.visit(node))


def is_one(node: IRExpr) -> bool:
    return isinstance(node, Const) and node.value == 1


def c_literal(value: bool | int | float, dtype: str, device: bool = True) -> str:
    """A C literal of the compute type of ``dtype`` (inf and NaN for CUDA unless ``device`` is False)."""
    category = dtypes.category(dtype)
    if category == dtypes.BOOL:
        return "true" if value else "false"
    ctype = COMPUTE_CTYPES[dtype]
    if category == dtypes.INT:
        if ctype == "long long":
            return "(-9223372036854775807LL - 1)" if value == -(2**63) else f"{value}LL"
        if ctype == "int":
            return "(-2147483647 - 1)" if value == -(2**31) else str(value)
        return f"(({ctype}){value})"
    single = ctype == "float"
    if not math.isfinite(value):
        return _non_finite(value, single, device)
    # float32: the shortest decimal that rounds back to the same float32 (0.1f, not 0.10000000149011612f)
    text = str(numpy.float32(value)) if single else repr(float(value))
    if "e" not in text and "." not in text:
        text += ".0"
    return f"{text}f" if single else text


def _non_finite(value: float, single: bool, device: bool) -> str:
    if not device:
        name = "NAN" if math.isnan(value) else "INFINITY" if value > 0 else "(-INFINITY)"
        return name if single else f"static_cast<double>({name})"
    if math.isnan(value):
        return "__int_as_float(0x7fffffff)" if single else "__longlong_as_double(0x7ff8000000000000LL)"
    if single:
        return "__int_as_float(0x7f800000)" if value > 0 else "__int_as_float((int)0xff800000)"
    bits = "0x7ff0000000000000LL" if value > 0 else "(long long)0xfff0000000000000ULL"
    return f"__longlong_as_double({bits})"
