"""Generate CUDA C++ for an elementwise IR Function.

Two products from the same body:

* ``elementwise_kernel_spec(fn)`` -> KernelSpec, the arguments of a CuPy
  ``ElementwiseKernel(in_params, out_params, operation, name, preamble=...)``
  (CuPy does the broadcasting and the indexing);
* ``cuda_source(fn)`` -> a standalone ``extern "C" __global__`` kernel over a
  flat index (inputs of equal size, or scalars), which tests compile with
  NVRTC to check the generated code without a GPU.

The body is the linearized function, one C declaration per operation,
rendered by the C target (render_c.py, PyTorch semantics: ``expf`` for
float32, Python rounding for floor_divide/remainder, NaN-propagating max/min,
float16 computed in float).  Python scalars become kernel
arguments: pyint -> int64, pyfloat -> float64, pybool -> bool.
``size(@N,d)`` must be hoisted into a scalar input first
(kuiper.pnnx_expr.hoist_sizes), since a kernel does not see shapes.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass

from kuiper.errors import IRError
from kuiper.ir import dtypes
from kuiper.ir.linearize import linearize
from kuiper.ir.nodes import Function, Var
from kuiper.ir.printer import print_ir
from kuiper.ir.render_c import COMPUTE_CTYPES, DEVICE_HELPERS, CRenderer


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


_PARAM_DTYPE = {"pybool": "bool", "pyint": "int64", "pyfloat": "float64"}  # CuPy's names for scalar args


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
    operation = "\n".join(_body_lines(fn))  # IRError for size(): a kernel does not see shapes
    digest = hashlib.sha1(f"{in_params}|{out_params}|{operation}".encode()).hexdigest()[:12]
    return KernelSpec(f"kuiper_ew_{digest}", in_params, out_params, operation, DEVICE_HELPERS)


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
    return "\n".join([*header, DEVICE_HELPERS, *kernels.values()])


def _kernel(spec: KernelSpec, fn: Function) -> str:
    (result,) = fn.results
    arguments = []
    loads = []
    for p in fn.params:
        ctype = dtypes.C_TYPES[p.dtype]
        if dtypes.is_scalar(p.dtype):
            arguments.append(f"const {ctype} {p.name}")
        else:
            arguments.append(f"const {ctype}* __restrict__ {p.name}_ptr")
            loads.append(f"  const {ctype} {p.name} = {p.name}_ptr[i];")
    out_ctype = dtypes.C_TYPES[result.dtype]
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
    used = [p.dtype for p in fn.params] + [stmt.target.dtype for stmt in fn.body.stmts]
    if any(dtype != dtypes.SHAPE and dtypes.is_complex(dtype) for dtype in used):
        raise IRError("complex arithmetic has no generated CUDA kernel: it runs through the array namespace")


def _body_lines(fn: Function) -> list[str]:
    renderer = _KernelBody({p for p in fn.params if p.dtype == "float16"})
    lines = []
    results = set(fn.results)
    for stmt in fn.body.stmts:
        target, value = stmt.target, renderer.render(stmt.value)
        if target not in results:
            lines.append(f"{COMPUTE_CTYPES[target.dtype]} {target.name} = {value};")
        elif target.dtype == "float16":
            lines.append(f"{target.name} = float16({value});")
        else:
            lines.append(f"{target.name} = {value};")
    return lines


class _KernelBody(CRenderer):
    """The C target, reading float16 inputs as float (temporaries already are float)."""

    def __init__(self, half_params: set[Var]):
        super().__init__(device=True)
        self.half_params = half_params

    def visit_Var(self, node: Var) -> str:
        return f"static_cast<float>({node.name})" if node in self.half_params else node.name
