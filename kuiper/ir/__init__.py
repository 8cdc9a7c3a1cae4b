"""Tensor IR: nodes, typed constructors, builder, printer, passes and code generators.

    functions.OPERATORS / INTRINSICS          every elementwise operation, declared once (functions.py)
    derivatives.derivative(name)              its reverse-mode rule, beside that table (derivatives.py)
    composites                                activations etc. built from the primitives (composites.py)
    simplify(node) -> node                    constant folding, identities (simplify.py)
    linearize(fn) -> Function                 one assignment per operation, CSE (linearize.py)
    print_ir(node, compact=False) -> str      readable text (printer.py)
    render.Renderer                           the one walk of every text target: readable (printer.py),
                                              C++ and CUDA (render_c.py), NumPy source (render_numpy.py)
    IRBuilder                                 statements with ``with`` scopes (builder.py)
    Visitor, Mutator                          pass bases (visitors.py)
    codegen_numpy.compile_elementwise(fn, xp) -> callable over an array namespace (an evaluator:
                                              closures over xp_ops, no source text)
    codegen_cuda.elementwise_kernel_spec(fn) / cuda_source(fn)    fused elementwise CUDA
    codegen_cpp.cpp_source(fns) / cuda_source(fn)                  loop nests (te kernels) as C++ / CUDA

The IR imports nothing from any frontend: the PNNX expression language
lowers into it (kuiper.pnnx_expr.lower), as do HLO and the tensor-expression
language.

Dtypes are strings: NumPy names for tensors, 'pybool'/'pyint'/'pyfloat' for
Python scalars (see dtypes.py for the PyTorch promotion rules).
"""

from __future__ import annotations

from kuiper.ir import composites, derivatives, dtypes, functions, make
from kuiper.ir.builder import IRBuilder
from kuiper.ir.linearize import linearize
from kuiper.ir.nodes import (
    Assign,
    Binary,
    Block,
    Call,
    Cast,
    Compare,
    Const,
    DimSize,
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
from kuiper.ir.printer import print_ir
from kuiper.ir.simplify import simplify
from kuiper.ir.visitors import Mutator, Visitor

__all__ = [
    "Assign",
    "Binary",
    "Block",
    "Call",
    "Cast",
    "Compare",
    "Const",
    "DimSize",
    "For",
    "Function",
    "IRBuilder",
    "IRExpr",
    "If",
    "Indexing",
    "Mutator",
    "Node",
    "Select",
    "Stmt",
    "Unary",
    "Var",
    "Visitor",
    "dtypes",
    "composites",
    "derivatives",
    "functions",
    "linearize",
    "make",
    "print_ir",
    "simplify",
]
