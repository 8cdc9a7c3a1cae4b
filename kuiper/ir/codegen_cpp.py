"""Generate C++ (and CUDA) from a tensor-IR Function whose parameters are Buffers.

    cpp_function(fn) -> "void grad_case10(float (&u_dA)[8][8], float (&u_dB)[10][8]) { ... }"

Tensor and variable names are emitted as ``u_<name>`` and ``v_<name>``, the function name as
it is, once kuiper.ir.identifiers has accepted it, so no name can write code or
meet a name of the helpers.  Loops become ``for (long long i = start; i < stop; i += step)``, ``If`` becomes
``if``, stores become ``A[i][j] = ...``; expressions are rendered by the one C
target (render_c.py): integer ``//`` and ``%`` round toward -inf as in Python
(helpers in the preamble), float32 math calls the float functions (``expf``).

``cuda_source(fn)`` makes one ``__global__`` kernel per top-level loop nest
(and says how to launch each): the outer loops whose variable indexes every
store of the nest plainly are spread over threads (each thread then owns
distinct elements, so the accumulation needs no atomics); inner loops stay
loops.  It needs no headers, so NVRTC compiles it as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

from kuiper.errors import IRError
from kuiper.ir import dtypes
from kuiper.ir.buffers import Buffer
from kuiper.ir.identifiers import function_name_problem, tensor_identifier
from kuiper.ir.nodes import Assign, Const, For, Function, Indexing, Stmt
from kuiper.ir.render_c import DEVICE_HELPERS, HOST_HELPERS, CRenderer, is_one
from kuiper.ir.visitors import Visitor

CTYPES = dtypes.C_TYPES
# Tensor and variable names are a user's: emitted as u_<name> and v_<name> (kuiper.ir.identifiers).
_HOST = CRenderer(device=False, user_names=True)
_DEVICE = CRenderer(device=True, user_names=True)


def cpp_declaration(buffer: Buffer, const: bool = False) -> str:
    dims = "".join(f"[{d}]" for d in buffer.shape)
    prefix = "const " if const else ""
    name = tensor_identifier(buffer.name)
    return f"{prefix}{CTYPES[buffer.dtype]} (&{name}){dims}" if dims else f"{prefix}{CTYPES[buffer.dtype]} &{name}"


def function_name(fn: Function) -> str:
    """The function's name, refused unless it is safe to emit verbatim."""
    problem = function_name_problem(fn.name)
    if problem is not None:
        raise IRError(f"cannot emit function {fn.name!r}: {problem}")
    return fn.name


def cpp_function(fn: Function, const_params=()) -> str:
    """The C++ definition; parameters named in ``const_params`` are declared const."""
    params = ", ".join(cpp_declaration(p, p.name in const_params) for p in fn.params)
    lines = [f"void {function_name(fn)}({params}) {{", *_HOST.lines(fn.body, 1), "}"]
    return "\n".join(lines) + "\n"


def cpp_source(functions, const_params=()) -> str:
    return HOST_HELPERS + "\n" + "\n".join(cpp_function(fn, const_params) for fn in functions)


# --- CUDA ------------------------------------------------------------------------------

BLOCK_SIZE = 256


@dataclass(frozen=True)
class Launch:
    kernel: str
    threads: int

    @property
    def blocks(self) -> int:
        return (self.threads + BLOCK_SIZE - 1) // BLOCK_SIZE


def cuda_source(fn: Function) -> tuple[str, list[Launch]]:
    """``extern "C" __global__`` kernels ``{fn.name}_{n}``, one per top-level loop nest, and their launches.

    Every kernel takes pointers to the Function's parameters, in order; launch
    them in order with ``BLOCK_SIZE`` threads per block.
    """
    kernels, launches = [], []
    params = ", ".join(_pointer(p) for p in fn.params)
    for number, stmt in enumerate(fn.body.stmts):
        parallel, inner = _parallel_loops(stmt)
        kernel_name = f"{function_name(fn)}_{number}"
        threads = 1
        for loop in parallel:
            threads *= _extent(loop)
        lines = [f'extern "C" __global__ void {kernel_name}({params}) {{']
        lines.append("  long long flat = (long long)blockIdx.x * blockDim.x + threadIdx.x;")
        lines.append(f"  if (flat >= {threads}LL) return;")
        for loop in reversed(parallel):
            extent = _extent(loop)
            name = _DEVICE.variable(loop.var.name)
            lines.append(f"  const long long {name} = {_DEVICE.bound(loop.start)} + flat % {extent};")
            lines.append(f"  flat /= {extent};")
        lines += _DEVICE.lines(inner, 1)
        lines.append("}")
        kernels.append("\n".join(lines))
        launches.append(Launch(kernel_name, threads))
    plan = "\n".join(f"//   {launch.kernel}<<<{launch.blocks}, {BLOCK_SIZE}>>>" for launch in launches)
    source = "\n".join([DEVICE_HELPERS, f"// launch in order:\n{plan}", *kernels]) + "\n"
    return source, launches


def _pointer(buffer: Buffer) -> str:
    dims = "".join(f"[{d}]" for d in buffer.shape[1:])
    ctype, name = CTYPES[buffer.dtype], tensor_identifier(buffer.name)
    return f"{ctype} (*__restrict__ {name}){dims}" if buffer.shape else f"{ctype}* __restrict__ {name}"


def _extent(loop: For) -> int:
    return int(loop.stop.value) - int(loop.start.value)


def _parallel_loops(stmt: Stmt) -> tuple[list[For], Stmt]:
    """Outer perfectly nested constant-bound loops whose variable every store subscripts plainly.

    Distinct values of those variables then write distinct elements, so the
    loops can run as independent threads.
    """
    stores = _stores(stmt)
    parallel: list[For] = []
    node = stmt
    while (
        isinstance(node, For)
        and isinstance(node.start, Const)
        and isinstance(node.stop, Const)
        and is_one(node.step)
        and stores
        and all(node.var in store.indices for store in stores)
    ):
        parallel.append(node)
        node = node.body.stmts[0] if len(node.body.stmts) == 1 else node.body
    return parallel, node


def _stores(node: Stmt) -> list[Indexing]:
    collector = _Stores()
    collector(node)
    return collector.found


class _Stores(Visitor):
    """The tensor elements a statement assigns."""

    def __init__(self):
        self.found: list[Indexing] = []

    def visit_Assign(self, node: Assign) -> None:
        if isinstance(node.target, Indexing):
            self.found.append(node.target)
