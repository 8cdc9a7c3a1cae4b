"""HLO ``dot`` (general dimension numbers) -> the shared ``Linear`` (a constant right operand, no batch dims)
or ``MatMul`` (one BLAS product, batched or not).

XLA's result dims are the batch dims, then the lhs free dims, then the rhs free dims. The
translation moves each operand's dims into matmul order, lhs (batch.., free.., contracting..)
and rhs (batch.., contracting.., free..), flattens each group into one dim, multiplies, and
reshapes the product into the result; steps that change nothing are left out (a plain
``x[M,K] . w[K,N]`` is one MatMul). A constant operand is laid out here, once, instead of
on every call.
"""

from __future__ import annotations

from dataclasses import replace
from math import prod

import numpy as np

from ..ir import dtypes
from ..model_ir import OpNode
from .shapes import ArrayShape
from .site import Site
from .translate_common import (
    constant_operand,
    ints,
    operand,
    reshape,
    result,
    transpose,
    widened_operand,
    widens,
    with_dims,
)


TRANSPOSE_OP = "Transpose"


def translate_dot(site: Site) -> list[OpNode]:
    lhs_shape, rhs_shape, out_shape = operand(site, 0), operand(site, 1), result(site)
    lhs_batch, rhs_batch = ints(site, "lhs_batch_dims", ()), ints(site, "rhs_batch_dims", ())
    lhs_contract, rhs_contract = ints(site, "lhs_contracting_dims", ()), ints(site, "rhs_contracting_dims", ())
    if len(lhs_batch) != len(rhs_batch) or len(lhs_contract) != len(rhs_contract):
        raise site.error("lhs and rhs must have as many batch dims, and as many contracting dims")
    for dims, rank in ((lhs_batch + lhs_contract, lhs_shape.rank), (rhs_batch + rhs_contract, rhs_shape.rank)):
        if len(set(dims)) != len(dims) or any(not 0 <= d < rank for d in dims):
            raise site.error(f"dimension numbers {list(dims)} do not fit an operand of rank {rank}")
    for left, right in zip(lhs_batch + lhs_contract, rhs_batch + rhs_contract):
        if lhs_shape.dims[left] != rhs_shape.dims[right]:
            raise site.error(f"lhs dim {left} ({lhs_shape.dims[left]}) and rhs dim {right} "
                             f"({rhs_shape.dims[right]}) are paired but differ")
    if not all(widens(shape.dtype, out_shape.dtype) for shape in (lhs_shape, rhs_shape)):
        wide = next((shape for shape in (lhs_shape, rhs_shape) if widens(out_shape.dtype, shape.dtype)
                     and widens(lhs_shape.dtype, shape.dtype) and widens(rhs_shape.dtype, shape.dtype)), None)
        if wide is None:
            raise site.error(f"a dot of {lhs_shape.element_type} and {rhs_shape.element_type} with a "
                             f"{out_shape.element_type} result is not supported")
        return _narrowed(site, wide.element_type)
    lhs_free = [d for d in range(lhs_shape.rank) if d not in lhs_batch and d not in lhs_contract]
    rhs_free = [d for d in range(rhs_shape.rank) if d not in rhs_batch and d not in rhs_contract]
    batch = [prod(lhs_shape.dims[d] for d in lhs_batch)] if lhs_batch else []
    rows = prod(lhs_shape.dims[d] for d in lhs_free)
    inner = prod(lhs_shape.dims[d] for d in lhs_contract)
    columns = prod(rhs_shape.dims[d] for d in rhs_free)
    ops: list[OpNode] = []
    leading = [d for d in rhs_free if rhs_contract and d < min(rhs_contract)]
    if rows == 1 and leading and constant_operand(site, 1) is None:
        return ops + _row_against_stacked_matrices(site, lhs_batch, lhs_free, lhs_contract, rhs_batch, rhs_contract,
                                                   leading, batch, inner, ops)
    if _both_read_across(lhs_shape.rank, lhs_free, lhs_contract, rhs_shape.rank, rhs_contract) \
            and constant_operand(site, 1) is None and rows > 1 and columns > 1:
        return ops + _swapped(site, lhs_batch, lhs_free, lhs_contract, rhs_batch, rhs_free, rhs_contract, batch,
                              rows, inner, columns, ops)
    lhs = _as_matrix(site, 0, [*lhs_batch, *lhs_free, *lhs_contract], [*batch, rows, inner], "lhs", ops)
    rhs_order = [*rhs_batch, *rhs_contract, *rhs_free]
    weight = None if batch else _laid_out_constant(site, 1, rhs_order, [inner, columns])
    if weight is not None:
        # x . W with a constant W is a dense layer: the shared Linear, whose kernels have the fast
        # paths (oneDNN's matmul with the elementwise math after it as post-ops) that PNNX models get.
        kind, inputs, params = "Linear", [lhs], {"in_features": inner, "out_features": columns, "bias": False}
        attrs = {"weight": np.ascontiguousarray(weight.T)}  # Linear's (out, in)
    else:
        rhs = _as_matrix(site, 1, rhs_order, [*batch, inner, columns], "rhs", ops)
        kind, inputs, params, attrs = "MatMul", [lhs, rhs], None, None
    product_dims = [*batch, rows, columns]
    if list(out_shape.dims) == product_dims:
        return ops + [site.op(kind, inputs, site.outputs, params, attrs)]
    product = site.temporary("product", with_dims(out_shape, product_dims))
    ops.append(site.op(kind, inputs, [product], params, attrs, suffix="product"))
    ops.append(site.op("Reshape", [product], site.outputs, {"shape": list(out_shape.dims)}))
    return ops


def _both_read_across(lhs_rank: int, lhs_free, lhs_contract, rhs_rank: int, rhs_contract) -> bool:
    """Whether, with both operands row-major, the product ``lhs . rhs`` would read each across its rows:
    the lhs's last dim one of its free dims (its rows' elements lie a row apart) and the rhs's last dim its
    one contracting dim (its columns lie a row apart), as JAX's attention ``einsum("...hqk,...khd->...qhd")``
    lowers (``dot(value, probs)``, lhs contracting the tokens, rhs the keys)."""
    return (bool(lhs_free) and lhs_free[-1] == lhs_rank - 1 and max(lhs_contract, default=-1) < lhs_rank - 1
            and list(rhs_contract) == [rhs_rank - 1])


def _swapped(site: Site, lhs_batch, lhs_free, lhs_contract, rhs_batch, rhs_free, rhs_contract, batch: list[int],
             rows: int, inner: int, columns: int, ops: list[OpNode]) -> list[OpNode]:
    """``lhs . rhs`` as ``(rhs' . lhs')`` transposed: each operand then read along its rows, where the product
    read both across them (ViT-Ti's (3, 64, 196) x (3, 196, 196) attention product, 1 thread: 0.215 ms
    against 0.158; the result is a transposed view, copied only where a later reshape needs it: 10 us).
    (ops appended to ``ops``)"""
    rhs = _as_matrix(site, 1, [*rhs_batch, *rhs_free, *rhs_contract], [*batch, columns, inner], "rhs", ops)
    lhs = _as_matrix(site, 0, [*lhs_batch, *lhs_contract, *lhs_free], [*batch, inner, rows], "lhs", ops)
    out_shape = result(site)
    swapped = site.temporary("product_t", with_dims(out_shape, [*batch, columns, rows]))
    rank = len(batch) + 2
    order = [*range(len(batch)), rank - 1, rank - 2]
    tail = [site.op("MatMul", [rhs, lhs], [swapped], suffix="product_t")]
    if list(out_shape.dims) == [*batch, rows, columns]:
        return tail + [site.op(TRANSPOSE_OP, [swapped], site.outputs, {"dims": order}, suffix="product")]
    product = site.temporary("product", with_dims(out_shape, [*batch, rows, columns]))
    return tail + [site.op(TRANSPOSE_OP, [swapped], [product], {"dims": order}, suffix="product"),
                   site.op("Reshape", [product], site.outputs, {"shape": list(out_shape.dims)})]


def _row_against_stacked_matrices(site: Site, lhs_batch, lhs_free, lhs_contract, rhs_batch, rhs_contract, leading,
                                  batch: list[int], inner: int, ops: list[OpNode]) -> list[OpNode]:
    """A dot whose lhs is one row per batch and whose rhs has free dims before its contracting ones (a stack
    of matrices: MoE's ``einsum("td,tkdh->tkh", x, up[chosen])``): those free dims become batch dims of
    the product, the row broadcast over them, so the rhs is read where it lies.  Moving them after the
    contracting dims instead would copy the whole rhs (32 x 2 x 128 x 256: 0.24 ms, then 0.66 ms for the
    product against 0.16 for the stacked one; the same sums).  (ops appended to ``ops``)"""
    rhs_shape = operand(site, 1)
    trailing = [d for d in range(rhs_shape.rank) if d not in rhs_batch and d not in rhs_contract and d not in leading]
    groups = prod(rhs_shape.dims[d] for d in leading)
    columns = prod(rhs_shape.dims[d] for d in trailing)
    lhs = _as_matrix(site, 0, [*lhs_batch, *lhs_free, *lhs_contract], [*batch, 1, 1, inner], "lhs", ops)
    rhs = _as_matrix(site, 1, [*rhs_batch, *leading, *rhs_contract, *trailing], [*batch, groups, inner, columns],
                     "rhs", ops)
    # [batch, groups, 1, columns] holds the result's elements in its order: batch, lhs free (all of size 1),
    # then the rhs's free dims, the leading ones first.
    product = site.temporary("product", with_dims(result(site), [*batch, groups, 1, columns]))
    return [site.op("MatMul", [lhs, rhs], [product], suffix="product"),
            site.op("Reshape", [product], site.outputs, {"shape": list(result(site).dims)})]


def _narrowed(site: Site, element_type: str) -> list[OpNode]:
    """A dot whose result is narrower than an operand (``f16 x f32 -> f16``): as XLA's result caster
    rewrites it, the dot computes in the wider operand type and its result is converted."""
    out_shape = result(site)
    wide = ArrayShape(element_type, out_shape.dims)
    product = site.temporary("wide", wide)
    ops = translate_dot(replace(site, instruction=replace(site.instruction, shape=wide), outputs=[product]))
    params = {"function": "convert", "operand_dtypes": [wide.dtype], "dtype": out_shape.dtype}
    return ops + [site.op("Elementwise", [product], site.outputs, params, suffix="narrowed")]


def _laid_out_constant(site: Site, index: int, order: list[int], matrix_dims: list[int]) -> np.ndarray | None:
    """Operand ``index``, when a constant gives it, with its dims in ``order`` flattened to ``matrix_dims``
    and in the result's dtype: laid out now, once, instead of on every call."""
    value = constant_operand(site, index)
    if value is None:
        return None
    laid_out = np.reshape(np.transpose(value, order), matrix_dims)
    return np.ascontiguousarray(laid_out.astype(dtypes.array_dtype(np, result(site).dtype)))


def _as_matrix(site: Site, index: int, order: list[int], matrix_dims: list[int], suffix: str,
               ops: list[OpNode]) -> str:
    """Operand ``index`` in the result's type with its dims in ``order``, flattened to ``matrix_dims``.

    (ops appended to ``ops``)"""
    shape = operand(site, index)
    laid_out = _laid_out_constant(site, index, order, matrix_dims)
    if laid_out is not None:  # a weight
        name = site.temporary(suffix, ArrayShape(result(site).element_type, tuple(matrix_dims)))
        ops.append(site.op("Constant", [], [name], attrs={"data": laid_out}, suffix=suffix))
        return name
    source, shape, emitted = widened_operand(site, index, suffix)
    ops += emitted
    name, moved, emitted = transpose(site, source, shape, order, f"{suffix}_moved")
    ops += emitted
    if list(moved.dims) == matrix_dims:
        return name
    name, _, emitted = reshape(site, name, moved, matrix_dims, suffix)
    ops += emitted
    return name


TRANSLATORS = {"dot": translate_dot}
