"""Two-operand einsums that are batched matrix products, run as one ``matmul``.

Attention written with einsum (MaxViT's ``ijkln,ijkmn->ijklm``: 128 batches of 49x32 by
32x49) has batch labels in both operands and the output; NumPy's ``einsum(optimize=True)``
hands only batch-free contractions to BLAS (tensordot) and runs these in its own loops,
up to twice as slow as ``matmul``.  Here the equation is read once: labels in both
operands and the output are batch dims, labels in both operands only are summed
(contracted), labels of one operand are its free dims.  Each operand is permuted (a view)
to (batch..., free, contracted) or (batch..., contracted, free), several free or
contracted labels merged into one dim, multiplied, and the product permuted to the
output's order.  Equations with an ellipsis, a label twice in one term, or a label
summed within one operand, and operands whose batch or contracted sizes differ
(broadcasting), go to the backend's einsum.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class MatmulPlan:
    a_order: tuple[int, ...]  # permutation of operand a to (batch, a_free, contracted)
    b_order: tuple[int, ...]  # permutation of operand b to (batch, contracted, b_free)
    batch: int  # how many batch labels lead both permuted operands
    a_free: int
    contracted: int
    out_order: tuple[int, ...]  # permutation of (batch, a_free, b_free) to the output's labels


def matmul_plan(equation: str) -> MatmulPlan | None:
    """The plan of ``a,b->out`` (spaces removed), or None when it is not a batched matrix product."""
    if "." in equation or "->" not in equation:
        return None
    inputs, out = equation.split("->")
    terms = inputs.split(",")
    if len(terms) != 2:
        return None
    a, b = terms
    if any(len(set(term)) != len(term) for term in (a, b, out)) or not set(out) <= set(a) | set(b):
        return None
    if any(label not in out for label in set(a) ^ set(b)):
        return None  # summed within one operand
    batch = [label for label in out if label in a and label in b]
    contracted = [label for label in a if label in b and label not in out]
    a_free = [label for label in a if label not in b]
    b_free = [label for label in b if label not in a]
    product_labels = batch + a_free + b_free
    return MatmulPlan(
        a_order=tuple(a.index(label) for label in batch + a_free + contracted),
        b_order=tuple(b.index(label) for label in batch + contracted + b_free),
        batch=len(batch),
        a_free=len(a_free),
        contracted=len(contracted),
        out_order=tuple(product_labels.index(label) for label in out),
    )


def run_plan(xp, plan: MatmulPlan, a, b):
    """The einsum of ``a`` and ``b`` by ``plan``, or None when their sizes need einsum's broadcasting."""
    a = xp.permute_dims(a, plan.a_order)
    b = xp.permute_dims(b, plan.b_order)
    n, m, k = plan.batch, plan.a_free, plan.contracted
    batch_shape = tuple(a.shape[:n])
    if tuple(b.shape[:n]) != batch_shape or tuple(a.shape[n + m:]) != tuple(b.shape[n:n + k]):
        return None
    a_free_shape, b_free_shape = tuple(a.shape[n:n + m]), tuple(b.shape[n + k:])
    rows, columns, inner = math.prod(a_free_shape), math.prod(b_free_shape), math.prod(a.shape[n + m:])
    # Reshapes merge only the free and contracted dims: the batch dims stay as they are, so a
    # strided batch (a view of a larger tensor) reaches matmul without a copy.
    if m != 1 or k != 1:
        a = xp.reshape(a, batch_shape + (rows, inner))
    if k != 1 or len(b_free_shape) != 1:
        b = xp.reshape(b, batch_shape + (inner, columns))
    product = xp.reshape(xp.matmul(a, b), batch_shape + a_free_shape + b_free_shape)
    return xp.permute_dims(product, plan.out_order)
