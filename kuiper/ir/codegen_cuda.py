"""Generate CUDA C++ for an elementwise IR Function.

Two products from the same body:

* ``elementwise_kernel_spec(fn)`` -> KernelSpec, the arguments of a CuPy
  ``ElementwiseKernel(in_params, out_params, operation, name, preamble=...)``
  (CuPy does the broadcasting and the indexing);
* ``cuda_source(fn)`` -> a standalone ``extern "C" __global__`` kernel over a
  flat index (inputs of equal size, or scalars), which tests compile with
  NVRTC to check the generated code without a GPU.

Semantics follow PyTorch: ``expf``/``erff``... for float32 and ``exp``/``erf``
for float64; Python rounding for floor_divide/remainder on integers and
floats; NaN-propagating max/min; float16 values are computed in float (an
explicit cast to float16 still rounds).  Python scalars become kernel
arguments: pyint -> int64, pyfloat -> float64, pybool -> bool.
``size(@N,d)`` must be hoisted into a scalar input first
(kuiper.pnnx_expr.hoist_sizes), since a kernel does not see shapes.
"""

from __future__ import annotations

import functools
import hashlib
import math
from dataclasses import dataclass

from kuiper.errors import IRError
from kuiper.ir import dtypes
from kuiper.ir.functions import INTRINSICS
from kuiper.ir.linearize import linearize
from kuiper.ir.nodes import Binary, Call, Cast, Compare, Const, DimSize, Function, IRExpr, Select, Unary, Var
from kuiper.ir.printer import INFIX, print_ir


@dataclass(frozen=True)
class KernelSpec:
    name: str
    in_params: str
    out_params: str
    operation: str
    preamble: str = ""

    def elementwise_kernel_args(self) -> dict[str, str]:
        """Keyword arguments for ``cupy.ElementwiseKernel(**spec.elementwise_kernel_args())``."""
        return {
            "in_params": self.in_params,
            "out_params": self.out_params,
            "operation": self.operation,
            "name": self.name,
            "preamble": self.preamble,
        }


# C type of a value of each dtype, as stored (parameters) and as computed (temporaries).
_STORAGE_CTYPE = dtypes.C_TYPES
_COMPUTE_CTYPE = {**_STORAGE_CTYPE, "float16": "float"}
_PARAM_DTYPE = {"pybool": "bool", "pyint": "int64", "pyfloat": "float64"}  # CuPy's names for scalar args

# IR intrinsic -> C function for double (float32 adds an 'f'), from the one table; pow and fmod are operators.
_MATH = {name: fn.c_name for name, fn in INTRINSICS.items() if fn.c_name} | {"pow": "pow", "fmod": "fmod"}

PREAMBLE = r"""
// kuiper elementwise helpers: PyTorch semantics where C differs.
template <typename T> __device__ __forceinline__ T kuiper_max(T a, T b) { return (a > b || a != a) ? a : b; }
template <typename T> __device__ __forceinline__ T kuiper_min(T a, T b) { return (a < b || a != a) ? a : b; }
template <typename T> __device__ __forceinline__ T kuiper_abs_int(T a) { return a < 0 ? T(-a) : a; }
// Integer // and % round toward -inf (Python); x/0 gives 0 as in NumPy instead of a fault.
template <typename T> __device__ T kuiper_floordiv_int(T a, T b) {
  if (b == 0) return T(0);
  if (b == T(-1)) return T(-a);
  T q = T(a / b);
  if ((a % b != 0) && ((a < 0) != (b < 0))) q = T(q - 1);
  return q;
}
template <typename T> __device__ T kuiper_remainder_int(T a, T b) {
  if (b == 0 || b == T(-1)) return T(0);
  T r = T(a % b);
  if (r != 0 && ((r < 0) != (b < 0))) r = T(r + b);
  return r;
}
template <typename T> __device__ T kuiper_fmod_int(T a, T b) {
  return (b == 0 || b == T(-1)) ? T(0) : T(a % b);
}
template <typename T> __device__ T kuiper_pow_int(T base, T exponent) {
  if (exponent < 0) {
    if (base == 1) return T(1);
    if (base == T(-1)) return (exponent & 1) ? T(-1) : T(1);
    return T(0);
  }
  T result = 1;
  while (exponent) {
    if (exponent & 1) result = T(result * base);
    exponent = T(exponent >> 1);
    base = T(base * base);
  }
  return result;
}
// Floating // and % as Python (and NumPy, and PyTorch) compute them.
template <typename T> __device__ T kuiper_floordiv_float(T a, T b) {
  if (b == 0) return a / b;
  T mod = fmod(a, b);
  T div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
  if (div == 0) return copysign(T(0), a / b);
  T floordiv = floor(div);
  if (div - floordiv > T(0.5)) floordiv += 1;
  return floordiv;
}
template <typename T> __device__ T kuiper_remainder_float(T a, T b) {
  T mod = fmod(a, b);
  if (mod != 0 && ((b < 0) != (mod < 0))) mod += b;
  return mod;
}
template <typename T> __device__ T kuiper_logaddexp(T a, T b) {
  if (isinf(a) && a == b) return a;
  T m = a > b ? a : b;
  return m + log1p(exp(-fabs(a - b)));
}
"""


def elementwise_kernel_spec(fn: Function) -> KernelSpec:
    """The CuPy ElementwiseKernel pieces for ``fn`` (cached per function)."""
    return _spec(fn)


@functools.lru_cache(maxsize=512)
def _spec(fn: Function) -> KernelSpec:
    fn = linearize(fn)
    _check_elementwise(fn)
    in_params = ", ".join(f"{_PARAM_DTYPE.get(p.dtype, p.dtype)} {p.name}" for p in fn.params)
    (result,) = fn.results
    out_params = f"{result.dtype} {result.name}"
    operation = "\n".join(_body_lines(fn))
    digest = hashlib.sha1(f"{in_params}|{out_params}|{operation}".encode()).hexdigest()[:12]
    return KernelSpec(f"kuiper_ew_{digest}", in_params, out_params, operation, PREAMBLE)


def cuda_source(fn: Function) -> str:
    """A standalone kernel ``NAME(inputs..., out, n)`` over a flat index, same body."""
    return cuda_module_source([fn])


def cuda_module_source(functions: list[Function]) -> str:
    """One translation unit with a kernel per function (the helpers once, duplicates once)."""
    kernels: dict[str, str] = {}
    uses_half = False
    for fn in functions:
        spec = _spec(fn)
        fn = linearize(fn)
        uses_half = uses_half or any(v.dtype == "float16" for v in (*fn.params, *fn.results))
        kernels.setdefault(spec.name, _kernel(spec, fn))
    header = ["#include <cuda_fp16.h>", "typedef __half float16;"] if uses_half else []
    return "\n".join([*header, PREAMBLE, *kernels.values()])


def _kernel(spec: KernelSpec, fn: Function) -> str:
    (result,) = fn.results
    arguments = []
    loads = []
    for p in fn.params:
        ctype = _STORAGE_CTYPE[p.dtype]
        if dtypes.is_scalar(p.dtype):
            arguments.append(f"const {ctype} {p.name}")
        else:
            arguments.append(f"const {ctype}* __restrict__ {p.name}_ptr")
            loads.append(f"  const {ctype} {p.name} = {p.name}_ptr[i];")
    out_ctype = _STORAGE_CTYPE[result.dtype]
    arguments += [f"{out_ctype}* __restrict__ {result.name}_ptr", "const long long n"]
    body = [f"  {line}" for line in spec.operation.splitlines()]
    return "\n".join(
        [
            f"// {print_ir(fn, compact=True)}",
            f'extern "C" __global__ void {spec.name}({", ".join(arguments)}) {{',
            "  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;",
            "  if (i >= n) return;",
            *loads,
            f"  {out_ctype} {result.name};",
            *body,
            f"  {result.name}_ptr[i] = {result.name};",
            "}",
            "",
        ]
    )


def _check_elementwise(fn: Function) -> None:
    if fn.returns_list or len(fn.results) != 1:
        raise IRError("a list expression is not elementwise: compute it on the host")
    result = fn.results[0]
    if result.dtype == dtypes.SHAPE or dtypes.is_scalar(result.dtype):
        raise IRError(f"the expression's result is a Python {result.dtype}, not a tensor")
    for stmt in fn.body.stmts:
        if isinstance(stmt.value, DimSize):
            raise IRError("size() inside a CUDA kernel: hoist it into a scalar input first")
    used = [p.dtype for p in fn.params] + [stmt.target.dtype for stmt in fn.body.stmts]
    if any(dtype != dtypes.SHAPE and dtypes.is_complex(dtype) for dtype in used):
        raise IRError("complex arithmetic has no generated CUDA kernel: it runs through the array namespace")


def _body_lines(fn: Function) -> list[str]:
    emitter = _Emitter({p for p in fn.params if p.dtype == "float16"})
    lines = []
    results = set(fn.results)
    for stmt in fn.body.stmts:
        target = stmt.target
        if target in results:
            value = emitter.operand(stmt.value)
            if target.dtype == "float16":
                value = f"float16({value})"
            lines.append(f"{target.name} = {value};")
        else:
            lines.append(f"{_COMPUTE_CTYPE[target.dtype]} {target.name} = {emitter.expr(stmt.value)};")
    return lines


class _Emitter:
    """C for linearized operations; operands are Vars and Consts."""

    def __init__(self, half_params: set[Var]):
        self.half_params = half_params  # float16 inputs, read as float; temporaries already are float

    def expr(self, node: IRExpr) -> str:
        if isinstance(node, Unary):
            return f"(-{self.operand(node.operand)})" if node.op == "neg" else f"(!{self.operand(node.operand)})"
        if isinstance(node, Binary):
            return self.binary(node)
        if isinstance(node, Compare):
            return f"({self.operand(node.lhs)} {INFIX[node.op]} {self.operand(node.rhs)})"
        if isinstance(node, Call):
            args = ", ".join(self.operand(a) for a in node.args)
            if node.func == "logaddexp":
                return f"kuiper_logaddexp({args})"
            if node.func == "abs" and not dtypes.is_float(node.dtype):
                return f"kuiper_abs_int({args})"
            return f"{_math_name(node.func, node.dtype)}({args})"
        if isinstance(node, Cast):
            value = f"static_cast<{_COMPUTE_CTYPE[node.dtype]}>({self.operand(node.operand)})"
            if node.dtype == "float16":
                value = f"static_cast<float>(float16({value}))"  # round to half precision
            return value
        if isinstance(node, Select):
            cond, a, b = (self.operand(x) for x in (node.cond, node.true_value, node.false_value))
            return f"({cond} ? {a} : {b})"
        raise IRError(f"no CUDA code for {type(node).__name__}")

    def binary(self, node: Binary) -> str:
        a, b, op = self.operand(node.lhs), self.operand(node.rhs), node.op
        is_float = dtypes.is_float(node.dtype)
        if op in INFIX and op not in ("floordiv", "mod", "pow"):
            return f"({a} {INFIX[op]} {b})"
        if op in ("max", "min"):
            return f"kuiper_{op}({a}, {b})"
        if op == "floordiv":
            return f"kuiper_floordiv_{'float' if is_float else 'int'}({a}, {b})"
        if op == "mod":
            return f"kuiper_remainder_{'float' if is_float else 'int'}({a}, {b})"
        if op in ("pow", "fmod"):
            if is_float:
                return f"{_math_name(op, node.dtype)}({a}, {b})"
            return f"kuiper_{op}_int({a}, {b})"
        raise IRError(f"no CUDA code for operator {op}")

    def operand(self, node: IRExpr) -> str:
        if isinstance(node, Var):
            return f"static_cast<float>({node.name})" if node in self.half_params else node.name
        if isinstance(node, Const):
            text = c_literal(node.value, node.dtype)
            return f"({text})" if text.startswith("-") else text  # so that -(x) never reads as --x
        raise IRError(f"expected a variable or constant, found {node}")


def _math_name(func: str, dtype: str) -> str:
    name = _MATH[func]
    return name if dtype in ("float64", "pyfloat") else f"{name}f"


def c_literal(value: bool | int | float, dtype: str) -> str:
    """A C literal of the compute type of ``dtype``."""
    category = dtypes.category(dtype)
    if category == dtypes.BOOL:
        return "true" if value else "false"
    if category == dtypes.INT:
        ctype = _COMPUTE_CTYPE[dtype]
        if ctype == "long long":
            return "(-9223372036854775807LL - 1)" if value == -(2**63) else f"{value}LL"
        if ctype == "int":
            return "(-2147483647 - 1)" if value == -(2**31) else str(value)
        return f"(({ctype}){value})"
    single = _COMPUTE_CTYPE[dtype] == "float"
    if math.isnan(value):
        return "__int_as_float(0x7fffffff)" if single else "__longlong_as_double(0x7ff8000000000000LL)"
    if math.isinf(value):
        if single:
            return "__int_as_float(0x7f800000)" if value > 0 else "__int_as_float((int)0xff800000)"
        bits = "0x7ff0000000000000LL" if value > 0 else "(long long)0xfff0000000000000ULL"
        return f"__longlong_as_double({bits})"
    text = repr(float(value))
    return f"{text}f" if single else text
