"""Generate C++ (and CUDA) from a tensor-IR Function whose parameters are Buffers.

    cpp_function(fn) -> "void grad_case10(float (&dA)[8][8], float (&dB)[10][8]) { ... }"

Loops become ``for (int i = start; i < stop; i += step)``, ``If`` becomes
``if``, stores become ``A[i][j] = ...``.  Integer ``//`` and ``%`` round
toward -inf as in Python (helpers in the preamble); math functions are the
``std::`` overloads of <cmath>, which keep float32 arithmetic in float.

``cuda_source(fn)`` makes one ``__global__`` kernel per top-level loop nest
(and says how to launch each): the outer loops whose variable indexes every
store of the nest plainly are spread over threads (each thread then owns
distinct elements, so the accumulation needs no atomics); inner loops stay
loops.  It needs no headers, so NVRTC compiles it as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy

from kuiper.ir import dtypes
from kuiper.ir.buffers import Buffer
from kuiper.ir.functions import INTRINSICS, OPERATORS
from kuiper.ir.nodes import (
    Assign,
    Binary,
    Block,
    Call,
    Cast,
    Compare,
    Const,
    For,
    Function,
    If,
    Indexing,
    IRExpr,
    Node,
    Select,
    Stmt,
    Unary,
    Var,
)

CTYPES = dtypes.C_TYPES
# Infix C operators from the one operation table; and/or of bools are the logical && / ||
# (of integers the bitwise & / |, chosen where they are printed).
_INFIX = {
    name: op.symbol for name, op in OPERATORS.items()
    if op.arity == 2 and op.symbol and name not in ("floordiv", "mod", "pow")
} | {"and": "&&", "or": "||"}
_HELPERS = {"floordiv": "kuiper_floordiv", "mod": "kuiper_mod", "max": "kuiper_max", "min": "kuiper_min"}
_MATH = {name: fn.c_name for name, fn in INTRINSICS.items() if fn.c_name}  # the <cmath> names

PREAMBLE_TEMPLATE = r"""{include}#ifndef KUIPER_CODEGEN_HELPERS
#define KUIPER_CODEGEN_HELPERS
// Integer // and % round toward -inf, as in Python; max/min propagate NaN.
// (Two type parameters, so that a long long index meets a plain int literal.)
template <typename T, typename U> {qualifier}inline T kuiper_floordiv(T a, U b) {{
  T q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}}
template <typename T, typename U> {qualifier}inline T kuiper_mod(T a, U b) {{
  T r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}}
template <typename T> {qualifier}inline T kuiper_max(T a, T b) {{ return (a > b || a != a) ? a : b; }}
template <typename T> {qualifier}inline T kuiper_min(T a, T b) {{ return (a < b || a != a) ? a : b; }}
#endif
"""
PREAMBLE = PREAMBLE_TEMPLATE.format(include="#include <cmath>\n", qualifier="")
CUDA_PREAMBLE = PREAMBLE_TEMPLATE.format(include="", qualifier="__device__ ")  # NVRTC needs no headers


def cpp_declaration(buffer: Buffer, const: bool = False) -> str:
    dims = "".join(f"[{d}]" for d in buffer.shape)
    prefix = "const " if const else ""
    return (
        f"{prefix}{CTYPES[buffer.dtype]} (&{buffer.name}){dims}"
        if dims
        else f"{prefix}{CTYPES[buffer.dtype]} &{buffer.name}"
    )


def cpp_function(fn: Function, const_params=()) -> str:
    """The C++ definition; parameters named in ``const_params`` are declared const."""
    params = ", ".join(cpp_declaration(p, p.name in const_params) for p in fn.params)
    lines = [f"void {fn.name}({params}) {{", *_stmt_lines(fn.body, 1), "}"]
    return "\n".join(lines) + "\n"


def cpp_source(functions, const_params=()) -> str:
    return PREAMBLE + "\n" + "\n".join(cpp_function(fn, const_params) for fn in functions)


def _stmt_lines(node: Stmt, level: int, math: str = "std::") -> list[str]:
    pad = "  " * level
    if isinstance(node, Block):
        return [line for stmt in node.stmts for line in _stmt_lines(stmt, level, math)]
    if isinstance(node, Assign):
        return [f"{pad}{expr(node.target, math)} = {expr(node.value, math)};"]
    if isinstance(node, For):
        name = node.var.name
        step = "++" + name if node.step == Const(1, "pyint") or _is_one(node.step) else f"{name} += {expr(node.step)}"
        header = f"{pad}for (long long {name} = {expr(node.start)}; {name} < {expr(node.stop)}; {step}) {{"
        return [header, *_stmt_lines(node.body, level + 1, math), f"{pad}}}"]
    if isinstance(node, If):
        lines = [f"{pad}if ({_bare(expr(node.cond, math))}) {{", *_stmt_lines(node.then_body, level + 1, math)]
        if node.else_body is not None:
            lines += [f"{pad}}} else {{", *_stmt_lines(node.else_body, level + 1, math)]
        return [*lines, f"{pad}}}"]
    raise TypeError(f"no C++ for {type(node).__name__}")


def _is_one(node: IRExpr) -> bool:
    return isinstance(node, Const) and node.value == 1


def _bare(text: str) -> str:
    return text[1:-1] if text.startswith("(") and text.endswith(")") and _balanced(text[1:-1]) else text


def _balanced(text: str) -> bool:
    depth = 0
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0


def expr(node: Node, math: str = "std::") -> str:
    """C++ for an expression; ``math`` qualifies <cmath> functions (CUDA device code uses none)."""

    def sub(child):
        return expr(child, math)

    if isinstance(node, Const):
        return _literal(node)
    if isinstance(node, Indexing):
        return node.tensor.name + "".join(f"[{_bare(sub(i))}]" for i in node.indices)
    if isinstance(node, Var):
        return node.name
    if isinstance(node, Unary):
        return f"(-{sub(node.operand)})" if node.op == "neg" else f"(!{sub(node.operand)})"
    if isinstance(node, (Binary, Compare)):
        if node.op in _HELPERS:
            return f"{_HELPERS[node.op]}({sub(node.lhs)}, {sub(node.rhs)})"
        if node.op == "pow":
            return f"{math}pow({sub(node.lhs)}, {sub(node.rhs)})"
        if node.op in ("and", "or") and node.dtype not in ("bool", "pybool"):
            return f"({sub(node.lhs)} {'&' if node.op == 'and' else '|'} {sub(node.rhs)})"
        return f"({sub(node.lhs)} {_INFIX[node.op]} {sub(node.rhs)})"
    if isinstance(node, Call):
        return f"{math}{_MATH.get(node.func, node.func)}({', '.join(sub(a) for a in node.args)})"
    if isinstance(node, Cast):
        return f"static_cast<{CTYPES[node.dtype]}>({sub(node.operand)})"
    if isinstance(node, Select):
        return f"({sub(node.cond)} ? {sub(node.true_value)} : {sub(node.false_value)})"
    raise TypeError(f"no C++ for {type(node).__name__}")


def _literal(node: Const) -> str:
    value = node.value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if value >= 0 else f"({value})"
    # float32: the shortest decimal that rounds back to the same float32 (0.1f, not 0.10000000149011612f)
    text = str(numpy.float32(value)) if node.dtype == "float32" else repr(float(value))
    if text in ("inf", "-inf", "nan"):
        number = {"inf": "INFINITY", "-inf": "(-INFINITY)", "nan": "NAN"}[text]
        return number if node.dtype == "float32" else f"static_cast<double>({number})"
    if "e" not in text and "." not in text:
        text += ".0"
    if node.dtype == "float32":
        text += "f"
    return f"({text})" if text.startswith("-") else text


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
        kernel_name = f"{fn.name}_{number}"
        threads = 1
        for loop in parallel:
            threads *= _extent(loop)
        lines = [f'extern "C" __global__ void {kernel_name}({params}) {{']
        lines.append("  long long flat = (long long)blockIdx.x * blockDim.x + threadIdx.x;")
        lines.append(f"  if (flat >= {threads}LL) return;")
        for loop in reversed(parallel):
            extent = _extent(loop)
            lines.append(f"  const long long {loop.var.name} = {expr(loop.start)} + flat % {extent};")
            lines.append(f"  flat /= {extent};")
        lines += _stmt_lines(inner, 1, math="")
        lines.append("}")
        kernels.append("\n".join(lines))
        launches.append(Launch(kernel_name, threads))
    plan = "\n".join(f"//   {launch.kernel}<<<{launch.blocks}, {BLOCK_SIZE}>>>" for launch in launches)
    source = "\n".join([CUDA_PREAMBLE, f"// launch in order:\n{plan}", *kernels]) + "\n"
    return source, launches


def _pointer(buffer: Buffer) -> str:
    dims = "".join(f"[{d}]" for d in buffer.shape[1:])
    ctype = CTYPES[buffer.dtype]
    return f"{ctype} (*__restrict__ {buffer.name}){dims}" if buffer.shape else f"{ctype}* __restrict__ {buffer.name}"


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
        and _is_one(node.step)
        and stores
        and all(node.var in store.indices for store in stores)
    ):
        parallel.append(node)
        node = node.body.stmts[0] if len(node.body.stmts) == 1 else node.body
    return parallel, node


def _stores(node: Node) -> list[Indexing]:
    if isinstance(node, Assign):
        return [node.target] if isinstance(node.target, Indexing) else []
    return [store for child in node.children() if isinstance(child, Stmt) for store in _stores(child)]
