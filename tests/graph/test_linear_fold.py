"""An XLA dense layer, ``max(dot(x, W) + broadcast(b), 0)``, becomes one Linear with bias b and its ReLU as
an epilogue (kuiper/hlo/translate_dot.py, kuiper/graph/constant_fold.py): the fast path PNNX's nn.Linear
takes.  Reference: float64 NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import kuiper
from kuiper import onednn
from kuiper.numba_kernels import availability

RNG = np.random.default_rng(41)
ROWS, IN, OUT = 64, 96, 200
WEIGHT = (RNG.standard_normal((IN, OUT)) / 10).astype(np.float32)
BIAS = RNG.standard_normal(OUT).astype(np.float32)


def _literal(array: np.ndarray) -> str:
    if array.ndim == 1:
        return "{" + ", ".join(repr(float(v)) for v in array) + "}"
    return "{" + ", ".join(_literal(row) for row in array) + "}"


def _dense_layer(bias_varies_along_rows: bool = False) -> str:
    bias = f"f32[{OUT}] constant({_literal(BIAS)})"
    spread = "broadcast(bias), dimensions={1}"
    if bias_varies_along_rows:  # not a bias: it differs from row to row, so it stays an add
        bias = f"f32[{ROWS}] constant({_literal(BIAS[:1].repeat(ROWS) + np.arange(ROWS, dtype=np.float32))})"
        spread = "broadcast(bias), dimensions={0}"
    return f"""HloModule dense
ENTRY main {{
  x = f32[{ROWS},{IN}] parameter(0)
  w = f32[{IN},{OUT}] constant({_literal(WEIGHT)})
  bias = {bias}
  product = f32[{ROWS},{OUT}] dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  spread = f32[{ROWS},{OUT}] {spread}
  sum = f32[{ROWS},{OUT}] add(product, spread)
  zero = f32[] constant(0)
  zeros = f32[{ROWS},{OUT}] broadcast(zero), dimensions={{}}
  ROOT relu = f32[{ROWS},{OUT}] maximum(sum, zeros)
}}
"""


def _float64(x, addend):
    return np.maximum(x.astype(np.float64) @ WEIGHT.astype(np.float64) + addend, 0)


def test_the_bias_folds_into_a_linear_and_every_path_computes_the_same():
    model = kuiper.load_hlo(_dense_layer(), backend="numpy")
    linear = next(step for step in model.steps if step.node.type == "Linear")
    np.testing.assert_array_equal(linear.node.attrs["bias"], BIAS)
    assert [step.node.type for step in model.steps] == ["Linear"]  # the bias add and the ReLU are in it
    if availability()[0] and onednn.available():
        assert "post-ops" in linear.op.kernel_note  # oneDNN's matmul, the ReLU as a post-op
    x = RNG.standard_normal((ROWS, IN)).astype(np.float32)
    np.testing.assert_allclose(model(x, to_numpy=True), _float64(x, BIAS), rtol=0, atol=1e-5)


def test_an_addend_that_varies_along_the_rows_stays_an_add():
    model = kuiper.load_hlo(_dense_layer(bias_varies_along_rows=True), backend="numpy")
    linear = next(step for step in model.steps if step.node.type == "Linear")
    assert "bias" not in linear.node.attrs
    x = RNG.standard_normal((ROWS, IN)).astype(np.float32)
    addend = (BIAS[:1].repeat(ROWS) + np.arange(ROWS, dtype=np.float32))[:, None]
    np.testing.assert_allclose(model(x, to_numpy=True), _float64(x, addend), rtol=0, atol=1e-5)


@pytest.mark.parametrize("fuse", [True, False])
def test_the_result_does_not_depend_on_fusion(fuse):
    model = kuiper.load_hlo(_dense_layer(), backend="numpy", fuse=fuse)
    x = RNG.standard_normal((3, ROWS, IN)).astype(np.float32)[0]
    np.testing.assert_allclose(model(x, to_numpy=True), _float64(x, BIAS), rtol=0, atol=1e-5)
