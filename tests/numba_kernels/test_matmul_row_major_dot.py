"""A small float32 product's specialized forward calls np.dot where np.matmul would make the same BLAS call
(kuiper/numba_kernels/matmul_native.py, ``_RowMajorDot``): the same bits as the first call's np.matmul, on
the shapes of a Flax LSTM's step and a fori_loop's Dense, and np.matmul again for operands laid out otherwise."""

from __future__ import annotations

import numpy as np
import pytest

from kuiper.graph import build
from kuiper.model_ir import OpNode
from kuiper.numba_kernels import matmul_native

from single_op import graph

pytest.importorskip("numba")

RNG = np.random.default_rng(11)


def array(*shape):
    return (RNG.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)


def product_model(keys=(None, None)):
    node = OpNode("MatMul", "op", ["a", "b"], ["out"], {}, input_keys=list(keys))
    return build(graph([node], ["a", "b"], ["out"]), backend="numpy")


REAL_DOT = np.dot


class CountingDot:
    """np.dot as the module sees it, counting its calls."""

    def __init__(self):
        self.calls = 0

    def __call__(self, x, y):
        self.calls += 1
        return REAL_DOT(x, y)


@pytest.mark.parametrize("a_shape, b_shape", [((1, 128), (128, 512)), ((1, 64), (64, 512)), ((4, 64), (64, 64)),
                                              ((17, 33), (33, 257))])
def test_specialized_calls_take_dot_and_give_matmuls_bits(monkeypatch, a_shape, b_shape):
    counting = CountingDot()
    monkeypatch.setattr(matmul_native.np, "dot", counting)
    model = product_model()
    a, b = array(*a_shape), array(*b_shape)
    np.testing.assert_array_equal(model(a, b), np.matmul(a, b))  # forward, then specialized
    assert counting.calls == 0
    for _ in range(3):
        a, b = array(*a_shape), array(*b_shape)
        np.testing.assert_array_equal(model(a, b), np.matmul(a, b))
    assert counting.calls == 3
    np.testing.assert_allclose(model(a, b), a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5, atol=1e-6)


def test_operands_given_in_the_other_order_are_swapped_back(monkeypatch):
    counting = CountingDot()
    monkeypatch.setattr(matmul_native.np, "dot", counting)
    # "other" first on the op line: the op reads (input, other) = (its second, its first)
    model = product_model(keys=("other", "input"))
    w, x = array(128, 512), array(1, 128)
    model(w, x)
    w, x = array(128, 512), array(1, 128)
    np.testing.assert_array_equal(model(w, x), np.matmul(x, w))
    assert counting.calls == 1


@pytest.mark.parametrize("layout", ["transposed", "column slice", "float64"])
def test_operands_laid_out_otherwise_take_matmul(monkeypatch, layout):
    counting = CountingDot()
    monkeypatch.setattr(matmul_native.np, "dot", counting)
    model = product_model()
    model(array(1, 128), array(128, 512))
    model(array(1, 128), array(128, 512))
    assert counting.calls == 1
    a = array(1, 128)
    b = {"transposed": np.asarray(array(512, 128).T),
         "column slice": array(128, 1024)[:, ::2],
         "float64": array(128, 512).astype(np.float64)}[layout]
    np.testing.assert_array_equal(model(a, b), np.matmul(a, b))
    assert counting.calls == 1
