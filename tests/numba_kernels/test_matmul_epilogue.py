"""A Dense layer's activation as its product's epilogue (kuiper/graph/fusion.py, numba_kernels/matmul_native.py,
product_post_ops.py): JAX's ``dot -> reshape -> + bias -> gelu`` with the weights as arguments runs as one
AddMatrixProduct whose GELU oneDNN applies as each result is stored.  The activation reaches the product
through the reshape only where nothing else reads what lies between; ReLU's post-op gives the unfused
program's bits, the tanh GELU's the float64 GELU's to float32 rounding, and math oneDNN has no post-op for
runs after the product, as the elementwise op ran it."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kuiper
from kuiper import onednn
from kuiper.numba_kernels.product_post_ops import GELU_TANH

pytest.importorskip("numba")
pytestmark = pytest.mark.skipif(not onednn.available(), reason=onednn.describe())

ROWS, INNER, COLUMNS = 64, 128, 256

JAX_GELU = """  cubed = f32[1,64,256] multiply(sum, sum)
  cube = f32[1,64,256] multiply(cubed, sum)
  c0 = f32[] constant({cube_factor})
  c0s = f32[1,64,256] broadcast(c0), dimensions={{}}
  scaled = f32[1,64,256] multiply(cube, c0s)
  inner = f32[1,64,256] add(sum, scaled)
  c1 = f32[] constant(0.797884583)
  c1s = f32[1,64,256] broadcast(c1), dimensions={{}}
  argument = f32[1,64,256] multiply(inner, c1s)
  t = f32[1,64,256] tanh(argument)
  one = f32[] constant(1)
  ones = f32[1,64,256] broadcast(one), dimensions={{}}
  shifted = f32[1,64,256] add(t, ones)
  half = f32[] constant(0.5)
  halves = f32[1,64,256] broadcast(half), dimensions={{}}
  cdf = f32[1,64,256] multiply(shifted, halves)
  act = f32[1,64,256] multiply(sum, cdf)
"""
RELU = """  zero = f32[] constant(0)
  zeros = f32[1,64,256] broadcast(zero), dimensions={}
  act = f32[1,64,256] maximum(sum, zeros)
"""


def dense_program(activation: str = "gelu", also_return_sum: bool = False) -> str:
    """Flax's ``nn.gelu(nn.Dense(256)(x))`` (or a ReLU) on a (1, 64, 128) input as jax.jit lowers it, the
    kernel and the bias as arguments; ``gelu 0.05`` has another cube factor than the tanh GELU's."""
    if activation == "relu":
        body = RELU
    else:
        body = JAX_GELU.format(cube_factor="0.05" if activation == "gelu 0.05" else "0.044715")
    root = ("ROOT out = (f32[1,64,256], f32[1,64,256]) tuple(act, sum)" if also_return_sum
            else "ROOT out = f32[1,64,256] copy(act)")
    return f"""HloModule dense_gelu

ENTRY main {{
  x = f32[1,64,128] parameter(0)
  w = f32[128,256] parameter(1)
  product = f32[1,64,256] dot(x, w), lhs_contracting_dims={{2}}, rhs_contracting_dims={{0}}
  b = f32[256] parameter(2)
  row = f32[1,1,256] reshape(b)
  spread = f32[1,64,256] broadcast(row), dimensions={{0,1,2}}
  sum = f32[1,64,256] add(product, spread)
{body}  {root}
}}
"""


def arguments():
    rng = np.random.default_rng(3)
    return (rng.standard_normal((1, ROWS, INNER)).astype(np.float32),
            (rng.standard_normal((INNER, COLUMNS)) / math.sqrt(INNER)).astype(np.float32),
            rng.standard_normal(COLUMNS).astype(np.float32))


def float64_dense(x, w, b):
    return x.astype(np.float64) @ w.astype(np.float64) + b


def product_step(model):
    (step,) = [step for step in model.steps if step.node.type == "AddMatrixProduct"]
    return step


def elementwise_steps(model) -> int:
    return sum(step.node.type in ("kuiper.Elementwise", "Elementwise") for step in model.steps)


def test_jax_gelu_after_a_dense_layer_becomes_the_products_post_op():
    model = kuiper.load_hlo(dense_program(), backend="numpy", threads=1)
    unfused = kuiper.load_hlo(dense_program(), backend="numpy", threads=1, fuse=False)
    step = product_step(model)
    assert step.op.post_ops == (GELU_TANH,) and elementwise_steps(model) == 0
    x, w, b = arguments()
    dense = float64_dense(x, w, b)
    want = 0.5 * dense * (1 + np.tanh(math.sqrt(2 / math.pi) * (dense + 0.044715 * dense ** 3)))
    for _ in range(3):  # the first call, then the specialized step
        got = np.asarray(model(x, w, b))
        np.testing.assert_allclose(got, want, rtol=0, atol=4e-6 * np.abs(want).max())
    # As close to float64 as the program run op by op.
    error, unfused_error = np.abs(got - want).max(), np.abs(np.asarray(unfused(x, w, b)) - want).max()
    assert error <= 2 * unfused_error + 1e-6


def test_a_relu_post_op_gives_the_unfused_programs_bits():
    model = kuiper.load_hlo(dense_program("relu"), backend="numpy", threads=1)
    unfused = kuiper.load_hlo(dense_program("relu"), backend="numpy", threads=1, fuse=False)
    assert product_step(model).op.post_ops == (("eltwise_relu", 0.0, 0.0),) and elementwise_steps(model) == 0
    x, w, b = arguments()
    for _ in range(3):
        np.testing.assert_array_equal(model(x, w, b), unfused(x, w, b))


def test_math_without_a_post_op_runs_after_the_product_as_the_elementwise_op_ran_it():
    model = kuiper.load_hlo(dense_program("gelu 0.05"), backend="numpy", threads=1)
    unfused = kuiper.load_hlo(dense_program("gelu 0.05"), backend="numpy", threads=1, fuse=False)
    step = product_step(model)
    assert step.op.epilogue is not None and step.op.post_ops is None and elementwise_steps(model) == 0
    x, w, b = arguments()
    dense = float64_dense(x, w, b)
    want = 0.5 * dense * (1 + np.tanh(math.sqrt(2 / math.pi) * (dense + 0.05 * dense ** 3)))
    for _ in range(3):
        got = np.asarray(model(x, w, b))
        np.testing.assert_allclose(got, want, rtol=0, atol=4e-6 * np.abs(want).max())
        np.testing.assert_array_equal(got, unfused(x, w, b))


def test_an_activation_whose_input_is_read_elsewhere_stays_separate():
    model = kuiper.load_hlo(dense_program(also_return_sum=True), backend="numpy", threads=1)
    assert product_step(model).op.epilogue is None and elementwise_steps(model) == 1
    x, w, b = arguments()
    act, total = model(x, w, b)
    np.testing.assert_allclose(total, float64_dense(x, w, b), rtol=1e-5, atol=1e-5)


SMALL_TANH = """HloModule small_tanh

ENTRY main {
  h = f32[4,64] parameter(0)
  w = f32[64,64] parameter(1)
  product = f32[4,64] dot(h, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  b = f32[64] parameter(2)
  spread = f32[4,64] broadcast(b), dimensions={1}
  sum = f32[4,64] add(product, spread)
  ROOT out = f32[4,64] tanh(sum)
}
"""


def test_a_small_products_epilogue_runs_after_it_as_the_elementwise_op_ran_it():
    """A loop body's tanh(h @ w + b): BLAS's product (too small for oneDNN), the bias, then the tanh in the
    direct form the elementwise op's own specialized step calls: the unfused program's bits, every call."""
    model = kuiper.load_hlo(SMALL_TANH, backend="numpy", threads=1)
    unfused = kuiper.load_hlo(SMALL_TANH, backend="numpy", threads=1, fuse=False)
    step = product_step(model)
    assert step.op.epilogue is not None and elementwise_steps(model) == 0
    rng = np.random.default_rng(4)
    h, w, b = (rng.standard_normal(shape).astype(np.float32) for shape in ((4, 64), (64, 64), (64,)))
    for _ in range(3):
        np.testing.assert_array_equal(model(h, w, b), unfused(h, w, b))
    assert model.plan.specialized_count() == 1
