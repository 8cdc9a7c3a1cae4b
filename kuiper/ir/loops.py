"""Loop-nest helpers on top of IRBuilder.

    with loop_nest(builder, [("i", 0, 8), ("j", 1, 9)]) as (i, j):
        builder.assign(A[i, j], 0.0)

opens one ``for`` per (name, start, stop) pair, outermost first, and
``accumulate(builder, A[i, j], value)`` writes the reduction step
``A[i, j] = A[i, j] + value`` (a reduction is a store that reads its target).
"""

from __future__ import annotations

from contextlib import ExitStack, contextmanager

from kuiper.ir import make
from kuiper.ir.builder import IRBuilder
from kuiper.ir.nodes import Indexing, IRExpr


@contextmanager
def loop_nest(builder: IRBuilder, loops):
    with ExitStack() as stack:
        yield tuple(stack.enter_context(builder.for_(name, start, stop)) for name, start, stop in loops)


def accumulate(builder: IRBuilder, target: Indexing, value: IRExpr) -> None:
    builder.assign(target, make.add(target, make.cast(value, target.dtype)))


def zero_fill(builder: IRBuilder, buffer, index_names) -> None:
    """``buffer[...] = 0`` over its whole shape."""
    with loop_nest(builder, [(name, 0, extent) for name, extent in zip(index_names, buffer.shape)]) as indices:
        builder.assign(buffer[indices] if indices else buffer[()], make.const(0, buffer.dtype))
