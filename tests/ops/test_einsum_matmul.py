"""Einsums run as matmul (kuiper/ops/einsum_matmul.py) against NumPy's einsum in float64.

Every equation here is run by the Einsum op on float32 operands (some of them strided views)
and compared with np.einsum of the float64 operands; the plan must exist exactly for the
batched matrix products, and operands that need einsum's broadcasting must still come out right.
"""

from __future__ import annotations

import numpy as np
import pytest

from kuiper.backends import get_backend
from kuiper.model_ir import OpNode
from kuiper.ops.einsum_matmul import matmul_plan
from kuiper.ops.linear import Einsum

CASES = {
    # equation: (shape of a, shape of b)
    "ijkln,ijkmn->ijklm": ((1, 6, 2, 7, 5), (1, 6, 2, 9, 5)),  # MaxViT q k^T
    "ijkln,ijknm->ijklm": ((1, 6, 2, 7, 9), (1, 6, 2, 9, 5)),  # MaxViT weights v
    "bhqd,bhkd->bhqk": ((2, 3, 4, 8), (2, 3, 6, 8)),
    "ij,jk->ki": ((4, 5), (5, 3)),  # output transposed
    "bij,bj->bi": ((3, 4, 5), (3, 5)),  # no free label in b
    "bj,bjk->bk": ((3, 5), (3, 5, 2)),  # no free label in a
    "i,j->ij": ((4,), (3,)),  # outer product: nothing contracted
    "abcd,cdbe->bae": ((2, 3, 4, 5), (4, 5, 3, 6)),  # two contracted labels, batch in the middle
    "nchw,kc->nkhw": ((2, 3, 4, 5), (6, 3)),  # two free labels in a
}


def run(equation, *operands):
    node = OpNode("Einsum", "e", [f"x{i}" for i in range(len(operands))], ["y"], {"equation": equation})
    op = Einsum(node, get_backend("numpy"))
    return op, op.forward(*operands)


@pytest.mark.parametrize("equation", CASES)
def test_batched_products_match_float64_einsum(equation):
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(shape).astype(np.float32) for shape in CASES[equation])
    op, got = run(equation, a, b)
    assert op.plan is not None
    want = np.einsum(equation, a.astype(np.float64), b.astype(np.float64))
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_strided_operands():
    rng = np.random.default_rng(1)
    qkv = rng.standard_normal((1, 6, 2, 7, 3 * 5)).astype(np.float32)
    q, k = qkv[..., :5], qkv[..., 5:10]  # views with a row stride of 15
    _, got = run("ijkln,ijkmn->ijklm", q, k)
    np.testing.assert_allclose(got, np.einsum("ijkln,ijkmn->ijklm", q.astype(np.float64), k.astype(np.float64)),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("equation", ["ii->i", "ij,jk", "...ij,...jk->...ik", "ij,jk->i", "iij,jk->ik", "ijk,jl->il",
                                      "a,b,c->abc"])
def test_other_equations_have_no_plan(equation):
    assert matmul_plan(equation) is None


def test_broadcast_batch_falls_back_to_einsum():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((1, 4, 5)).astype(np.float32)
    b = rng.standard_normal((3, 5, 2)).astype(np.float32)
    _, got = run("bij,bjk->bik", a, b)
    np.testing.assert_allclose(got, np.einsum("bij,bjk->bik", a.astype(np.float64), b.astype(np.float64)),
                               rtol=1e-5, atol=1e-5)
