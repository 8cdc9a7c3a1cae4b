"""Evaluate an expression on concrete inputs: parse, lower, simplify, compile, run.

The convenience path for tests and tools; the graph compiles once per op
instead.  Compiled functions are cached per (expression, input dtypes, xp).
"""

from __future__ import annotations

import functools

import numpy

from kuiper.ir import dtypes
from kuiper.ir.codegen_numpy import CompiledExpression, compile_elementwise
from kuiper.ir.simplify import simplify
from kuiper.pnnx_expr.lower import lower
from kuiper.pnnx_expr.nodes import Expr
from kuiper.pnnx_expr.parser import parse


def evaluate(text_or_expr: str | Expr, inputs, xp=None):
    xp = numpy if xp is None else xp
    inputs = list(inputs)
    if isinstance(text_or_expr, str):
        expr = parse(text_or_expr, num_inputs=len(inputs))
    else:
        expr = text_or_expr
    compiled = compiled_for(expr, tuple(dtypes.of_value(v) for v in inputs), xp)
    return compiled(*inputs)


@functools.lru_cache(maxsize=256)
def compiled_for(expr: Expr, input_dtypes: tuple[str, ...], xp) -> CompiledExpression:
    return compile_elementwise(simplify(lower(expr, list(input_dtypes))), xp)
