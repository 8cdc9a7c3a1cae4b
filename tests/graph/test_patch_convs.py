"""A convolution whose windows tile its input is a matrix product of patches (kuiper/graph/patch_convs.py):
JAX's patch embedding (NHWC, kernel and bias as arguments) runs as one AddMatrixProduct and computes the
float64 conv's values to float32 rounding; a conv whose windows overlap, are padded, dilated, grouped or
do not divide the input, or whose weight is a constant, stays a Conv."""

from __future__ import annotations

import numpy as np
import pytest

import kuiper


def patch_program(size=4, stride=4, padding="0_0", height=8, width=12, bias=True, feature_groups=1) -> str:
    """``nn.Conv(16, (size, size), stride)`` on a (2, height, width, 6) NHWC input as jax.jit lowers it."""
    out_h = (height + 2 * int(padding.split("_")[0]) - size) // stride + 1
    out_w = (width + 2 * int(padding.split("_")[0]) - size) // stride + 1
    channels = 6 // feature_groups
    kernel = f"kernel = f32[{size},{size},{channels},16] parameter(1)"
    lines = [f"x = f32[2,{height},{width},6] parameter(0)", kernel,
             f"conv = f32[2,{out_h},{out_w},16] convolution(x, kernel), window={{size={size}x{size} "
             f"stride={stride}x{stride} pad={padding}x{padding}}}, dim_labels=b01f_01io->b01f, "
             f"feature_group_count={feature_groups}"]
    if bias:
        lines += ["b = f32[16] parameter(2)", f"spread = f32[2,{out_h},{out_w},16] broadcast(b), dimensions={{3}}",
                  f"ROOT out = f32[2,{out_h},{out_w},16] add(conv, spread)"]
    else:
        lines += [f"ROOT out = f32[2,{out_h},{out_w},16] copy(conv)"]
    return "HloModule patches\n\nENTRY main {\n  " + "\n  ".join(lines) + "\n}\n"


def reference(x, kernel, bias, stride):
    """The NHWC conv (no padding) in float64."""
    size = kernel.shape[0]
    out_h, out_w = (x.shape[1] - size) // stride + 1, (x.shape[2] - size) // stride + 1
    out = np.zeros((x.shape[0], out_h, out_w, kernel.shape[3]))
    for i in range(size):
        for j in range(size):
            window = x[:, i:i + stride * out_h:stride, j:j + stride * out_w:stride].astype(np.float64)
            out += np.einsum("nhwc,co->nhwo", window, kernel[i, j])
    return out + (0 if bias is None else bias)


def arguments(size=4, height=8, width=12, channels=6):
    rng = np.random.default_rng(7)
    return (rng.standard_normal((2, height, width, 6)).astype(np.float32),
            rng.standard_normal((size, size, channels, 16)).astype(np.float32),
            rng.standard_normal(16).astype(np.float32))


def types(model) -> list[str]:
    return [step.node.type for step in model.steps]


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no bias"])
def test_a_conv_whose_windows_tile_its_input_is_one_product_of_patches(bias):
    model = kuiper.load_hlo(patch_program(bias=bias), backend="numpy")
    assert "Conv" not in types(model) and types(model).count("AddMatrixProduct" if bias else "MatMul") == 1
    x, kernel, b = arguments()
    want = reference(x, kernel, b if bias else None, 4)
    for _ in range(3):  # the first call, then the specialized steps
        got = model(x, kernel, b) if bias else model(x, kernel)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())
    unfused = kuiper.load_hlo(patch_program(bias=bias), backend="numpy", fuse=False)
    assert "Conv" in types(unfused)  # the rewrite is the graph passes' (fuse=False keeps the ops as written)


@pytest.mark.parametrize("variant", [
    dict(size=4, stride=2),  # overlapping windows
    dict(size=3, stride=3, height=8),  # 3 does not divide 8
    dict(padding="1_1", height=6, width=10),  # padded
    dict(feature_groups=2),  # grouped
    dict(size=1, stride=1),  # one element a window: the conv kernels' 1x1 path
], ids=["overlapping", "not dividing", "padded", "grouped", "1x1"])
def test_other_convs_stay_convs(variant):
    groups = variant.get("feature_groups", 1)
    size = variant.get("size", 4)
    model = kuiper.load_hlo(patch_program(**variant), backend="numpy")
    assert "Conv" in types(model)
    if groups == 1 and variant.get("padding", "0_0") == "0_0":
        x, kernel, b = arguments(size=size, height=variant.get("height", 8), width=variant.get("width", 12))
        want = reference(x, kernel, b, variant["stride"])
        np.testing.assert_allclose(model(x, kernel, b), want, rtol=0, atol=1e-5 * np.abs(want).max())


def test_a_conv_with_its_kernel_bound_at_load_stays_a_conv():
    """A constant weight is prepared once by the conv kernels."""
    x, kernel, b = arguments()
    model = kuiper.load_hlo(patch_program(), backend="numpy", constants={1: kernel})
    assert "Conv" in types(model)
    want = reference(x, kernel, b, 4)
    np.testing.assert_allclose(model(x, b), want, rtol=0, atol=1e-5 * np.abs(want).max())
