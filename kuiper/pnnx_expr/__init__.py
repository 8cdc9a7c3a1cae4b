"""The pnnx.Expression language: parser, AST and its canonical text, rewrites, lowering to the tensor IR.

    parse(text, num_inputs=None) -> Expr      read an ``expr=`` string
    to_string(expr) -> str                    canonical text, parse() reads it back
    substitute / renumber / shift_inputs / canonicalize_inputs / hoist_sizes
                                              rewrites used by the graph's fusion pass
    evaluate(text_or_expr, inputs, xp=numpy)  lower, simplify, compile and run (tests, tools)

Evaluation goes through the tensor IR (kuiper.ir); there is no tree-walking
interpreter here, so there is exactly one implementation of the semantics.
"""

from __future__ import annotations

from kuiper.pnnx_expr.evaluate import evaluate
from kuiper.pnnx_expr.functions import FUNCTIONS, FunctionInfo, describe_functions
from kuiper.pnnx_expr.nodes import Call, Expr, Input, ListExpr, Literal, Size, call, to_string
from kuiper.pnnx_expr.parser import MAX_DEPTH, parse
from kuiper.pnnx_expr.transform import (
    canonicalize_inputs,
    depth,
    first_appearance_order,
    hoist_sizes,
    input_indices,
    renumber,
    shift_inputs,
    substitute,
    uses_size_of,
)

__all__ = [
    "FUNCTIONS",
    "MAX_DEPTH",
    "Call",
    "Expr",
    "FunctionInfo",
    "Input",
    "ListExpr",
    "Literal",
    "Size",
    "call",
    "canonicalize_inputs",
    "depth",
    "describe_functions",
    "evaluate",
    "first_appearance_order",
    "hoist_sizes",
    "input_indices",
    "parse",
    "renumber",
    "shift_inputs",
    "substitute",
    "to_string",
    "uses_size_of",
]

