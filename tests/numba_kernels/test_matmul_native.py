"""The canonical MatMul (torch.matmul, XLA's dot) and MatrixProduct (torch.mm, torch.bmm) on oneDNN (kuiper/numba_kernels/matmul_native.py): which products go
there, that they compute what float64 NumPy does, and that the rest keep the reference path."""

from __future__ import annotations

import numpy as np
import pytest

import kuiper
from kuiper import onednn
from kuiper.onednn.primitives import PRODUCT_WORK
from kuiper.onednn.product import GEMM_MAX_ROWS

from kuiper.graph import build
from kuiper.model_ir import OpNode

from single_op import graph

pytest.importorskip("numba")
pytestmark = pytest.mark.skipif(not onednn.available(), reason=onednn.describe())

RNG = np.random.default_rng(5)
TOLERANCE = 1e-5


def array(*shape, dtype=np.float32):
    return (RNG.standard_normal(shape) / np.sqrt(shape[-1])).astype(dtype)


def close(actual, expected):
    assert actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=0, atol=TOLERANCE * max(1.0, np.abs(expected).max()))


def one_op(op_type, arrays, params=None):
    """Build the canonical ``op_type`` alone and run it on ``arrays``: (its output as NumPy, the model)."""
    model = build(graph([OpNode(op_type, "op", ["a", "b"], ["out"], params or {})], ["a", "b"], ["out"]),
                  backend="numpy")
    return np.asarray(model(*arrays, to_numpy=True)), model


def on_onednn(model) -> bool:
    """Whether the model's product ran on oneDNN (its op made a plan, or called oneDNN's GEMM)."""
    (step,) = [s for s in model.steps if s.node.type in ("MatMul", "MatrixProduct")]
    return step.op.native is not None and (bool(step.op.native.plans) or step.op.native.ran_gemm)


@pytest.mark.parametrize("a_shape, b_shape", [
    ((128, 96), (96, 100)),
    ((2, 3, 64, 48), (48, 80)),  # a 2-D right operand under batch dims
    ((2, 1, 64, 48), (3, 48, 80)),  # batch dims (2, 1) and (3,) broadcast to (2, 3)
    ((2, 1280), (1280, 1000)),  # two rows: oneDNN (one row would be a gemv)
])
def test_large_float32_products_run_on_onednn_and_match_float64(a_shape, b_shape):
    a, b = array(*a_shape), array(*b_shape)
    got, model = one_op("MatMul", [a, b])
    assert np.prod(got.shape) * a.shape[-1] >= PRODUCT_WORK
    assert on_onednn(model) and model.blas_threads == 1
    close(got, np.matmul(a.astype(np.float64), b.astype(np.float64)))


def test_bmm_runs_on_onednn():
    a, b = array(4, 64, 64), array(4, 64, 64)
    got, model = one_op("MatrixProduct", [a, b], {"rank": 3})
    assert on_onednn(model)
    close(got, np.matmul(a.astype(np.float64), b.astype(np.float64)))


@pytest.mark.parametrize("a, b", [
    (array(8, 8), array(8, 8)),  # too small to pay for a oneDNN call
    (array(256, 64, dtype=np.float64), array(64, 128, dtype=np.float64)),
    (array(4096), array(4096, 300)),  # a 1-D operand
    (array(1, 1280), array(1280, 1000)),  # one row over PRODUCT_WORK: a matrix-vector product, BLAS's gemv
], ids=["small", "float64", "vector", "one row"])
def test_other_products_keep_the_reference_path(a, b):
    got, model = one_op("MatMul", [a, b])
    assert not on_onednn(model)
    assert got.dtype == np.result_type(a, b)
    close(got, np.matmul(a.astype(np.float64), b.astype(np.float64)))


def test_the_reference_still_names_a_mismatch():
    with pytest.raises(kuiper.KuiperError):
        one_op("MatMul", [array(128, 96), array(95, 100)])
    with pytest.raises(kuiper.ShapeError, match=r"\$input must be 3-D"):
        one_op("MatrixProduct", [array(64, 64), array(64, 64)], {"rank": 3})


def add_product_model():
    """AddMatrixProduct(bias, a, b) alone, as kuiper/graph/bias_inputs.py writes it for JAX's Dense."""
    node = OpNode("AddMatrixProduct", "op", ["bias", "a", "b"], ["out"], {})
    return build(graph([node], ["bias", "a", "b"], ["out"]), backend="numpy")


@pytest.mark.parametrize("a_shape, b_shape", [((196, 192), (192, 768)), ((8, 784), (784, 512)), ((64, 256), (256, 256))])
def test_a_bias_added_by_onednn_gives_the_sums_of_the_product_then_the_add(a_shape, b_shape):
    """oneDNN adds the bias as it stores each result: the same float32 sum as adding it to the product after,
    bit for bit, on the first call and on the specialized calls after it; a strided bias view is added after."""
    a, b = array(*a_shape), array(*b_shape)
    bias = array(b_shape[1]) * 3
    bias[:3] = [np.inf, -0.0, np.nan]
    product, _ = one_op("MatMul", [a, b])
    model = add_product_model()
    for _ in range(3):  # the first call, then the specialized step
        got = np.asarray(model(bias, a, b, to_numpy=True))
        np.testing.assert_array_equal(got, product + bias)
    (step,) = model.steps
    if a_shape[0] <= GEMM_MAX_ROWS:  # oneDNN's GEMM, the bias added to its result
        assert step.op.native.ran_gemm and not step.op.native.plans
    else:
        assert [key[4] for key in step.op.native.plans] == [True]  # the bias went to oneDNN's matmul
    strided = np.repeat(bias, 2)[::2]
    np.testing.assert_array_equal(np.asarray(model(strided, a, b, to_numpy=True)), product + bias)
