"""A bias vector added after a conv or a product whose weight is an input becomes the layer's bias input
(kuiper/graph/bias_inputs.py): the same float32 sums, one step fewer, and only where the
chain is exactly a layer's output plus a vector along its channels or columns."""

from __future__ import annotations

import numpy as np
import pytest

import kuiper


def conv_program(bias_dims="3", bias_shape="32", extra_output=False, as_row=False):
    """JAX's NHWC conv + bias + ReLU with the kernel and the bias as arguments, as jax.jit lowers it;
    ``extra_output`` returns the conv's result too; ``as_row`` broadcasts the bias reshaped to
    (1, C), as Flax's U-Net lowers."""
    root = ("ROOT out = (f32[2,6,6,32], f32[2,6,6,32]) tuple(relu, conv)" if extra_output
            else "ROOT out = f32[2,6,6,32] copy(relu)")
    spread = (f"row = f32[1,{bias_shape}] reshape(bias)\n  spread = f32[2,6,6,32] broadcast(row), dimensions={{0,{bias_dims}}}"
              if as_row else f"spread = f32[2,6,6,32] broadcast(bias), dimensions={{{bias_dims}}}")
    return f"""HloModule conv_bias

ENTRY main {{
  x = f32[2,6,6,3] parameter(0)
  kernel = f32[3,3,3,32] parameter(1)
  conv = f32[2,6,6,32] convolution(x, kernel), window={{size=3x3 pad=1_1x1_1}}, dim_labels=b01f_01io->b01f
  bias = f32[{bias_shape}] parameter(2)
  {spread}
  sum = f32[2,6,6,32] add(conv, spread)
  zero = f32[] constant(0)
  zeros = f32[2,6,6,32] broadcast(zero), dimensions={{}}
  relu = f32[2,6,6,32] maximum(sum, zeros)
  {root}
}}
"""


def reference(x, kernel, bias):
    """The NHWC conv (3x3, pad 1) + bias + ReLU in float64."""
    padded = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    out = np.zeros(x.shape[:3] + (kernel.shape[3],))
    for i in range(3):
        for j in range(3):
            out += np.einsum("nhwc,co->nhwo", padded[:, i:i + x.shape[1], j:j + x.shape[2]], kernel[i, j])
    return np.maximum(out + bias, 0)


def _arguments(bias_shape=(32,)):
    rng = np.random.default_rng(0)
    return (rng.standard_normal((2, 6, 6, 3)).astype(np.float32), rng.standard_normal((3, 3, 3, 32)).astype(np.float32),
            rng.standard_normal(bias_shape).astype(np.float32))


def _steps(model):
    return [(step.node.type, len(step.node.inputs)) for step in model.steps]


@pytest.mark.parametrize("as_row", [False, True], ids=["vector", "(1, C) row"])
def test_the_bias_becomes_the_convs_third_input_and_gives_the_same_sums(as_row):
    arguments = _arguments()
    model = kuiper.load_hlo(conv_program(as_row=as_row), backend="numpy")
    unfused = kuiper.load_hlo(conv_program(as_row=as_row), backend="numpy", fuse=False)
    assert ("Conv", 3) in _steps(model)
    assert not {"Broadcast", "Reshape"} & {t for t, _ in _steps(model)}  # nothing left of the bias's layout
    assert ("Conv", 2) in _steps(unfused)
    for _ in range(2):  # the specializing call and a specialized one
        got = model(*arguments)
        np.testing.assert_array_equal(got, unfused(*arguments))  # bit for bit: the same float32 sums
    np.testing.assert_allclose(got, reference(*arguments), rtol=1e-5, atol=1e-5)


NCHW_PROGRAM = """HloModule conv_bias_nchw

ENTRY main {
  x = f32[1,8,6,6] parameter(0)
  kernel = f32[16,8,3,3] parameter(1)
  conv = f32[1,16,6,6] convolution(x, kernel), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01
  bias = f32[1,16,1,1] parameter(2)
  same = f32[1,16,1,1] broadcast(bias), dimensions={0,1,2,3}
  row = f32[1,16] reshape(same)
  spread = f32[1,16,6,6] broadcast(row), dimensions={0,1}
  sum = f32[1,16,6,6] add(conv, spread)
  zero = f32[] constant(0)
  zeros = f32[1,16,6,6] broadcast(zero), dimensions={}
  ROOT relu = f32[1,16,6,6] maximum(sum, zeros)
}
"""


def test_a_bias_given_as_c_1_1_after_the_conv_becomes_its_third_input():
    """An NCHW conv whose (1, C, 1, 1) bias JAX passes after it in the order, broadcast, reshaped to (1, C) and
    broadcast again (the HLO conv net with its weights as arguments): the conv takes the bias as its (C,)
    vector, placed where the add was, and gives the add's sums bit for bit."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 8, 6, 6)).astype(np.float32)
    kernel = rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
    bias = rng.standard_normal((1, 16, 1, 1)).astype(np.float32)
    model = kuiper.load_hlo(NCHW_PROGRAM, backend="numpy")
    unfused = kuiper.load_hlo(NCHW_PROGRAM, backend="numpy", fuse=False)
    assert ("Conv", 3) in _steps(model) and ("Conv", 2) in _steps(unfused)
    for _ in range(2):
        got = model(x, kernel, bias)
        np.testing.assert_array_equal(got, unfused(x, kernel, bias))
    nhwc = reference(x.transpose(0, 2, 3, 1), kernel.transpose(2, 3, 1, 0), bias.reshape(16)).transpose(0, 3, 1, 2)
    np.testing.assert_allclose(got, nhwc, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("variant", [dict(bias_dims="1", bias_shape="6"), dict(extra_output=True)],
                         ids=["along another axis", "the conv's result is returned too"])
def test_other_chains_are_left_as_they_are(variant):
    program = conv_program(**variant)
    model = kuiper.load_hlo(program, backend="numpy")
    assert ("Conv", 2) in _steps(model)
    arguments = _arguments((6,) if variant.get("bias_shape") == "6" else (32,))
    unfused = kuiper.load_hlo(program, backend="numpy", fuse=False)
    for got, want in zip(*(m(*arguments) if variant.get("extra_output") else (m(*arguments),) for m in (model, unfused))):
        np.testing.assert_array_equal(got, want)


TRANSPOSED_PROGRAM = """HloModule conv_transpose_bias

ENTRY main {
  x = f32[1,5,4,6] parameter(0)
  kernel = f32[2,2,6,3] parameter(1)
  conv = f32[1,10,8,3] convolution(x, kernel), window={size=2x2 pad=1_1x1_1 lhs_dilate=2x2}, dim_labels=b01f_01io->b01f
  bias = f32[3] parameter(2)
  row = f32[1,3] reshape(bias)
  spread = f32[1,10,8,3] broadcast(row), dimensions={0,3}
  ROOT sum = f32[1,10,8,3] add(conv, spread)
}
"""


def transposed_reference(x, kernel, bias):
    """Flax's ConvTranspose(3, (2, 2), (2, 2)) as XLA spells it, in float64: the input with a zero between
    each two elements, padded by one, correlated with the 2x2 kernel, plus the bias."""
    n, h, w, c = x.shape
    dilated = np.zeros((n, 2 * h - 1, 2 * w - 1, c))
    dilated[:, ::2, ::2] = x
    padded = np.pad(dilated, ((0, 0), (1, 1), (1, 1), (0, 0)))
    out = sum(np.einsum("nhwc,co->nhwo", padded[:, i:i + 2 * h, j:j + 2 * w], kernel[i, j].astype(np.float64))
              for i in range(2) for j in range(2))
    return out + bias


def test_the_bias_of_a_transposed_conv_becomes_its_third_input():
    rng = np.random.default_rng(2)
    arguments = (rng.standard_normal((1, 5, 4, 6)).astype(np.float32),
                 rng.standard_normal((2, 2, 6, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32))
    model = kuiper.load_hlo(TRANSPOSED_PROGRAM, backend="numpy")
    unfused = kuiper.load_hlo(TRANSPOSED_PROGRAM, backend="numpy", fuse=False)
    assert ("ConvTranspose2d", 3) in _steps(model)
    assert not {"Broadcast", "Reshape", "Elementwise"} & {t for t, _ in _steps(model)}
    assert ("ConvTranspose2d", 2) in _steps(unfused)
    for _ in range(2):
        got = model(*arguments)
        np.testing.assert_array_equal(got, unfused(*arguments))  # bit for bit: the same float32 sums
    np.testing.assert_allclose(got, transposed_reference(*arguments), rtol=1e-5, atol=1e-5)


def dense_program(bias_layout="vector"):
    """JAX's Dense (a dot + bias vector) and DenseGeneral (the product reshaped to (1, 6, 2, 4), its bias
    (2, 4) laid over the split columns), weights as arguments."""
    if bias_layout == "vector":
        bias = "  b = f32[8] parameter(2)\n  spread = f32[6,8] broadcast(b), dimensions={1}\n"
        tail = "  sum = f32[6,8] add(product, spread)\n"
        shape = "f32[6,8]"
    elif bias_layout == "rows":  # a vector along the rows: not a bias of the product's columns
        bias = "  b = f32[6] parameter(2)\n  spread = f32[6,8] broadcast(b), dimensions={0}\n"
        tail = "  sum = f32[6,8] add(product, spread)\n"
        shape = "f32[6,8]"
    else:
        bias = ("  b = f32[2,4] parameter(2)\n  row = f32[1,2,4] reshape(b)\n"
                "  spread = f32[1,6,2,4] broadcast(row), dimensions={0,2,3}\n")
        tail = "  split = f32[1,6,2,4] reshape(product)\n  sum = f32[1,6,2,4] add(split, spread)\n"
        shape = "f32[1,6,2,4]"
    return f"""HloModule dense

ENTRY main {{
  x = f32[6,5] parameter(0)
  w = f32[5,8] parameter(1)
  product = f32[6,8] dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
{bias}{tail}  zero = f32[] constant(0)
  zeros = {shape} broadcast(zero), dimensions={{}}
  ROOT relu = {shape} maximum(sum, zeros)
}}
"""


def _dense_arguments(bias_shape):
    rng = np.random.default_rng(1)
    return (rng.standard_normal((6, 5)).astype(np.float32), rng.standard_normal((5, 8)).astype(np.float32),
            rng.standard_normal(bias_shape).astype(np.float32))


@pytest.mark.parametrize("layout, bias_shape", [("vector", (8,)), ("split", (2, 4))])
def test_a_bias_after_a_product_becomes_an_add_matrix_product(layout, bias_shape):
    model = kuiper.load_hlo(dense_program(layout), backend="numpy")
    unfused = kuiper.load_hlo(dense_program(layout), backend="numpy", fuse=False)
    assert ("AddMatrixProduct", 3) in _steps(model) and "MatMul" not in [t for t, _ in _steps(model)]
    assert "Broadcast" not in [t for t, _ in _steps(model)]
    x, w, b = _dense_arguments(bias_shape)
    want = np.maximum(x.astype(np.float64) @ w + b.reshape(-1), 0)
    for _ in range(2):
        got = model(x, w, b)
        np.testing.assert_array_equal(got, unfused(x, w, b))  # the same float32 sums
    np.testing.assert_allclose(got.reshape(6, 8), want, rtol=1e-5, atol=1e-5)


def test_a_vector_along_the_products_rows_stays_an_add():
    model = kuiper.load_hlo(dense_program("rows"), backend="numpy")
    assert "MatMul" in [t for t, _ in _steps(model)] and "AddMatrixProduct" not in [t for t, _ in _steps(model)]
    x, w, b = _dense_arguments((6,))
    np.testing.assert_allclose(model(x, w, b), np.maximum(x.astype(np.float64) @ w + b[:, None], 0), rtol=1e-5,
                               atol=1e-5)
