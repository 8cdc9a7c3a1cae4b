"""A small float32 product's specialized forward calls np.dot where np.matmul would make the same BLAS call
(kuiper/numba_kernels/matmul_native.py, ``_RowMajorDot``): the same bits as the first call's np.matmul, on
the shapes of a Flax LSTM's step and a fori_loop's Dense, and np.matmul again for operands laid out otherwise."""

from __future__ import annotations

import numpy as np
import pytest

import kuiper
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

    def __call__(self, x, y, out=None):  # out: a result of PLANNED_MIN_ELEMENTS or more (the memory plan's)
        self.calls += 1
        return REAL_DOT(x, y) if out is None else REAL_DOT(x, y, out=out)


@pytest.mark.parametrize("a_shape, b_shape", [((1, 128), (128, 512)), ((1, 64), (64, 512)), ((4, 64), (64, 64)),
                                              ((17, 33), (33, 257)), ((1, 1), (1, 1)), ((1, 9), (9, 1)),
                                              ((3, 1), (1, 4)), ((5, 7), (7, 1))])
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


DENSE_TANH = """HloModule dense
ENTRY main {
  x = f32[4,64] parameter(0)
  w = f32[64,64] parameter(1)
  b = f32[64] parameter(2)
  product = f32[4,64] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bias = f32[4,64] broadcast(b), dimensions={1}
  sum = f32[4,64] add(product, bias)
  ROOT out = f32[4,64] tanh(sum)
}
"""


@pytest.mark.parametrize("epilogue", [True, False], ids=["dense + tanh", "dense"])
def test_a_bias_product_takes_dot_and_gives_its_forwards_bits(monkeypatch, epilogue):
    """``AddMatrixProduct(b, x, w)`` (JAX's Dense, kuiper/graph/bias_inputs.py), with the tanh the fusion pass
    gives it or alone: the specialized calls' bits are the first call's (forward: np.matmul, the add, tanh)."""
    counting = CountingDot()
    monkeypatch.setattr(matmul_native.np, "dot", counting)
    text = DENSE_TANH if epilogue else DENSE_TANH.replace("ROOT out = f32[4,64] tanh(sum)", "ROOT out = f32[4,64] copy(sum)")
    model = kuiper.load_hlo(text)
    assert [step.node.type for step in model.steps if "Product" in step.node.type] == ["AddMatrixProduct"]
    x, w, b = array(4, 64), array(64, 64), array(64) * 3
    first = model(x, w, b)  # forward; specializing tries the product once for the epilogue's direct form
    counting.calls = 0
    through_object = []
    monkeypatch.setattr(matmul_native._RowMajorDot, "__call__", lambda *args: through_object.append(args))
    for _ in range(2):
        np.testing.assert_array_equal(model(x, w, b), first)
    assert counting.calls == 2 and not through_object  # the checks and the dot written out in one function
    expected = np.matmul(x, w) + b
    np.testing.assert_array_equal(first, np.tanh(expected) if epilogue else expected)
    # Another layout: forward (BLAS reads the column-major weight transposed: other bits than row-major's).
    w_columns = np.asfortranarray(w)
    expected = np.matmul(x, w_columns) + b
    np.testing.assert_array_equal(model(x, w_columns, b), np.tanh(expected) if epilogue else expected)
    assert counting.calls == 2
