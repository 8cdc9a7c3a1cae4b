"""HLO convolution and dot become the shared Conv and MatMul ops: every layout, pad, dilation and group
count against float64 references computed here by direct loops (convolution) or np.einsum (dot)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

import kuiper
from kuiper import onednn
from kuiper.numba_kernels import availability
from kuiper.graph.plan import StepObserver
from kuiper.ops.conv import Conv2d

FIXTURES = Path(__file__).parents[1] / "fixtures" / "hlo"


def literal(array: np.ndarray) -> str:
    """An HLO constant literal: nested braces of numbers."""
    if array.ndim == 0:
        return repr(float(array))
    return "{" + ", ".join(literal(item) for item in array) + "}"


def shape_text(array_or_dims, element_type: str = "f64") -> str:
    dims = array_or_dims.shape if isinstance(array_or_dims, np.ndarray) else array_or_dims
    return f"{element_type}[{','.join(map(str, dims))}]"


def direct_convolution(lhs, rhs, stride, pads, lhs_dilate, rhs_dilate, groups=1, batch_groups=1, reversal=None):
    """XLA's convolution, one output element and one tap at a time: lhs (B, C, S..), rhs (O, I, K..) -> (B', O, ..)."""
    spatial = lhs.ndim - 2
    if reversal is not None:
        rhs = np.flip(rhs, axis=tuple(2 + d for d, flip in enumerate(reversal) if flip))
    dilated = np.zeros(lhs.shape[:2] + tuple((s - 1) * d + 1 for s, d in zip(lhs.shape[2:], lhs_dilate)))
    dilated[(slice(None), slice(None), *(slice(None, None, d) for d in lhs_dilate))] = lhs
    padded = np.pad(dilated, [(0, 0), (0, 0)] + [(max(lo, 0), max(hi, 0)) for lo, hi in pads])
    padded = padded[(slice(None), slice(None), *(slice(max(-lo, 0), padded.shape[2 + i] - max(-hi, 0))
                                                 for i, (lo, hi) in enumerate(pads)))]
    kernel = rhs.shape[2:]
    out_spatial = [(padded.shape[2 + i] - (kernel[i] - 1) * rhs_dilate[i] - 1) // stride[i] + 1 for i in range(spatial)]
    batch = lhs.shape[0] // batch_groups
    out_features, in_per_group = rhs.shape[:2]
    out = np.zeros((batch, out_features, *out_spatial))
    for b, o in itertools.product(range(batch), range(out_features)):
        feature_group = o // (out_features // groups)
        batch_group = o // (out_features // batch_groups)
        image = batch_group * batch + b
        for position in itertools.product(*(range(n) for n in out_spatial)):
            total = 0.0
            for i, tap in itertools.product(range(in_per_group), itertools.product(*(range(k) for k in kernel))):
                where = tuple(p * s + t * d for p, s, t, d in zip(position, stride, tap, rhs_dilate))
                total += padded[(image, feature_group * in_per_group + i, *where)] * rhs[(o, i, *tap)]
            out[(b, o, *position)] = total
    return out


# (dim_labels, lhs canonical shape (B, C, S..), rhs canonical shape (O, I, K..), window, extra attributes)
CASES = {
    "bf01_oi01->bf01 stride, unequal pads": ("bf01_oi01->bf01", (2, 3, 6, 5), (4, 3, 3, 2),
                                             dict(stride=(2, 1), pad=((1, 1), (0, 2))), {}),
    "b01f_01io->b01f feature groups, rhs dilation": ("b01f_01io->b01f", (2, 4, 7, 6), (6, 2, 3, 3),
                                                     dict(pad=((2, 2), (1, 1)), rhs_dilate=(2, 1)),
                                                     {"feature_group_count": 2}),
    "f01b_i01o->01bf": ("f01b_i01o->01bf", (2, 3, 5, 4), (2, 3, 2, 3), dict(pad=((0, 1), (1, 0))), {}),
    "bf01_io01->fb01": ("bf01_io01->fb01", (3, 2, 4, 4), (3, 2, 2, 2), dict(stride=(1, 2)), {}),
    "lhs dilation (transposed convolution)": ("b01f_01io->b01f", (1, 3, 4, 3), (2, 3, 2, 2),
                                              dict(pad=((1, 1), (1, 1)), lhs_dilate=(2, 2)), {}),
    "lhs dilation, kernel 3, output padding": ("b01f_01io->b01f", (2, 2, 3, 4), (3, 2, 3, 3),
                                               dict(pad=((2, 3), (1, 2)), lhs_dilate=(2, 3)), {}),
    "lhs and rhs dilation, reversal": ("bf01_oi01->bf01", (1, 2, 3, 3), (2, 2, 2, 3),
                                       dict(pad=((2, 2), (1, 1)), lhs_dilate=(2, 2), rhs_dilate=(2, 1),
                                            rhs_reversal=(0, 1)), {}),
    "lhs dilation 1-D": ("bf0_oi0->bf0", (2, 3, 5), (2, 3, 4), dict(pad=((3, 3),), lhs_dilate=(3,)), {}),
    "lhs dilation and window stride": ("bf01_oi01->bf01", (1, 2, 4, 4), (2, 2, 3, 3),
                                       dict(stride=(2, 2), pad=((1, 1), (1, 1)), lhs_dilate=(2, 2)), {}),
    "lhs dilation, a pad past the kernel": ("bf01_oi01->bf01", (1, 2, 3, 3), (2, 2, 2, 2),
                                            dict(pad=((2, 1), (0, 0)), lhs_dilate=(2, 2)), {}),
    "lhs dilation, feature groups": ("bf01_oi01->bf01", (1, 4, 3, 3), (4, 2, 2, 2),
                                     dict(pad=((1, 1), (1, 1)), lhs_dilate=(2, 2)), {"feature_group_count": 2}),
    "negative pads crop": ("bf01_oi01->bf01", (1, 2, 6, 6), (2, 2, 3, 3), dict(pad=((-1, 1), (0, -2))), {}),
    "batch groups": ("bf01_oi01->bf01", (4, 3, 4, 4), (4, 3, 3, 3), {}, {"batch_group_count": 2}),
    "rhs reversal": ("bf01_oi01->bf01", (1, 2, 5, 5), (3, 2, 3, 2), dict(rhs_reversal=(1, 0)), {}),
    "depthwise, asymmetric pads": ("bf01_oi01->bf01", (1, 4, 6, 6), (4, 1, 3, 3), dict(pad=((0, 2), (1, 0))),
                                   {"feature_group_count": 4}),
    "1-D": ("bf0_oi0->bf0", (2, 3, 7), (2, 3, 3), dict(stride=(2,), pad=((1, 0),)), {}),
    "3-D": ("b012f_012io->b012f", (1, 2, 3, 4, 3), (2, 2, 2, 2, 2), dict(pad=((0, 1), (1, 0), (0, 0))), {}),
}


# Convolutions over an lhs-dilated input that are the shared transposed convolution (window stride 1, one
# group, each pad at most the dilated kernel's reach, the output's extra positions below the stride); the
# other lhs-dilated ones stay a Conv over an explicitly dilated and padded input.
TRANSPOSED = {"lhs dilation (transposed convolution)": "ConvTranspose2d",
              "lhs dilation, kernel 3, output padding": "ConvTranspose2d",
              "lhs and rhs dilation, reversal": "ConvTranspose2d", "lhs dilation 1-D": "ConvTranspose1d"}


def _window_text(window: dict, kernel: tuple[int, ...]) -> str:
    parts = ["size=" + "x".join(map(str, kernel))]
    for key in ("stride", "lhs_dilate", "rhs_dilate", "rhs_reversal"):
        if key in window:
            parts.append(f"{key}={'x'.join(map(str, window[key]))}")
    if "pad" in window:
        parts.append("pad=" + "x".join(f"{lo}_{hi}" for lo, hi in window["pad"]))
    return " ".join(parts)


def _conv_program(name: str, constant_kernel: bool):
    labels, lhs_shape, rhs_shape, window, extra = CASES[name]
    rng = np.random.default_rng(len(name))
    lhs, rhs = rng.standard_normal(lhs_shape), rng.standard_normal(rhs_shape)
    spatial = len(lhs_shape) - 2
    expected = direct_convolution(lhs, rhs, window.get("stride", (1,) * spatial),
                                  window.get("pad", ((0, 0),) * spatial), window.get("lhs_dilate", (1,) * spatial),
                                  window.get("rhs_dilate", (1,) * spatial), extra.get("feature_group_count", 1),
                                  extra.get("batch_group_count", 1), window.get("rhs_reversal"))
    operands, out_labels = labels.split("->")
    lhs_labels, rhs_labels = operands.split("_")
    digits = "".join(str(d) for d in range(spatial))
    lhs_given = np.transpose(lhs, [("bf" + digits).index(c) for c in lhs_labels])
    rhs_given = np.transpose(rhs, [("oi" + digits).index(c) for c in rhs_labels])
    out_given = np.transpose(expected, [("bf" + digits).index(c) for c in out_labels])
    window_text = _window_text(window, rhs_shape[2:])
    attributes = "".join(f", {key}={value}" for key, value in extra.items())
    kernel_line = (f"  k = {shape_text(rhs_given)} constant({literal(rhs_given)})" if constant_kernel
                   else f"  k = {shape_text(rhs_given)} parameter(1)")
    text = (f"HloModule conv\nENTRY main {{\n  x = {shape_text(lhs_given)} parameter(0)\n{kernel_line}\n"
            f"  ROOT y = {shape_text(out_given)} convolution(x, k), window={{{window_text}}}, "
            f"dim_labels={labels}{attributes}\n}}\n")
    inputs = [lhs_given] if constant_kernel else [lhs_given, rhs_given]
    return text, inputs, out_given


@pytest.mark.parametrize("constant_kernel", [True, False], ids=["constant kernel", "kernel parameter"])
@pytest.mark.parametrize("name", list(CASES))
def test_convolution_matches_a_direct_loop(name, constant_kernel):
    text, inputs, expected = _conv_program(name, constant_kernel)
    model = kuiper.load_hlo(text, backend="numpy")
    types = [s.node.type for s in model.steps]
    assert types.count(TRANSPOSED.get(name, "Conv")) == 1 and len([t for t in types if t.startswith("Conv")]) == 1
    got = model(*inputs, to_numpy=True)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_a_constant_kernel_is_laid_out_once_and_the_conv_takes_its_fast_path():
    """The benchmark's net: every convolution is the shared Conv op with a build-time weight (Winograd)."""
    data = np.load(FIXTURES / "conv_net.npz")
    model = kuiper.load(FIXTURES / "conv_net.hlo.txt", backend="numpy", providers=False)  # op by op
    convs = [step for step in model.steps if step.node.type == "Conv"]
    assert len(convs) == 4
    assert not [step.node.type for step in model.steps if step.node.type.startswith("hlo.")]
    for step in convs:
        assert isinstance(step.op, Conv2d)
        assert step.op.static_weight is not None and step.op.algorithm == "winograd"
        if availability()[0]:
            assert type(step.op).__name__ == "CompiledConv2d"
            assert ("oneDNN" if onednn.available() else "compiled") in step.op.kernel_note
    np.testing.assert_allclose(model(data["input0"], to_numpy=True), data["output0"], rtol=1e-4, atol=1e-5)
    with_providers = kuiper.load(FIXTURES / "conv_net.hlo.txt", backend="numpy")  # a run of oneDNN convs: one step
    for _ in range(2):
        np.testing.assert_allclose(with_providers(data["input0"], to_numpy=True), data["output0"], rtol=1e-4,
                                   atol=1e-5)


DOTS = {
    # name: (lhs shape, rhs shape, lhs batch, lhs contracting, rhs batch, rhs contracting)
    "matrix . matrix": ((4, 3), (3, 5), (), (1,), (), (0,)),
    "contract the first dims": ((3, 4), (3, 5), (), (0,), (), (0,)),
    "batch in the middle, two contracting dims": ((2, 3, 4, 5), (4, 5, 6, 3), (2,), (1, 3), (0,), (3, 1)),
    "batched, no free rhs dim": ((2, 3, 4), (2, 4), (0,), (2,), (0,), (1,)),
    "outer product": ((3,), (4,), (), (), (), ()),
    # One lhs row per batch against a stack of matrices (MoE's einsum("td,tkdh->tkh")): the rhs's free dims
    # before its contracting dim become batch dims of the product, the row broadcast over them.
    "a row against stacked matrices": ((3, 4), (3, 2, 4, 5), (0,), (1,), (0,), (2,)),
    "one row, no batch, stacked matrices": ((4,), (2, 4, 5), (), (0,), (), (1,)),
    "lhs free dims of size 1, stacked matrices": ((3, 1, 4), (3, 2, 4, 5), (0,), (2,), (0,), (2,)),
    "two leading free dims, batch dim not first": ((2, 4), (3, 2, 2, 4, 5), (0,), (1,), (1,), (3,)),
    # Both operands read across their rows (JAX's attention probs . values, dot(value, probs)): swapped.
    "attention's values by probabilities": ((1, 6, 2, 4), (1, 2, 5, 6), (0, 2), (1,), (0, 1), (3,)),
    "both read across, no batch": ((6, 4), (5, 6), (), (0,), (), (1,)),
}


@pytest.mark.parametrize("constant_rhs", [True, False], ids=["constant rhs", "rhs parameter"])
@pytest.mark.parametrize("name", list(DOTS))
def test_dot_general_matches_einsum(name, constant_rhs):
    lhs_shape, rhs_shape, lhs_batch, lhs_contract, rhs_batch, rhs_contract = DOTS[name]
    rng = np.random.default_rng(len(name))
    lhs, rhs = rng.standard_normal(lhs_shape), rng.standard_normal(rhs_shape)
    letters = iter("abcdefghij")
    lhs_letters = [next(letters) for _ in lhs_shape]
    rhs_letters = [next(letters) for _ in rhs_shape]
    for left, right in zip(lhs_batch + lhs_contract, rhs_batch + rhs_contract):
        rhs_letters[right] = lhs_letters[left]
    out = ([lhs_letters[d] for d in lhs_batch]
           + [c for d, c in enumerate(lhs_letters) if d not in lhs_batch + lhs_contract]
           + [c for d, c in enumerate(rhs_letters) if d not in rhs_batch + rhs_contract])
    expected = np.einsum(f"{''.join(lhs_letters)},{''.join(rhs_letters)}->{''.join(out)}", lhs, rhs)
    numbers = "".join(f", {key}={{{','.join(map(str, dims))}}}" for key, dims in (
        ("lhs_batch_dims", lhs_batch), ("lhs_contracting_dims", lhs_contract),
        ("rhs_batch_dims", rhs_batch), ("rhs_contracting_dims", rhs_contract)) if dims)
    rhs_line = f"constant({literal(rhs)})" if constant_rhs else "parameter(1)"
    text = (f"HloModule dot\nENTRY main {{\n  a = {shape_text(lhs)} parameter(0)\n  b = {shape_text(rhs)} {rhs_line}\n"
            f"  ROOT r = {shape_text(expected)} dot(a, b){numbers}\n}}\n")
    model = kuiper.load_hlo(text, backend="numpy")
    product = "Linear" if constant_rhs and not lhs_batch else "MatMul"  # a dense layer: the op with the fast paths
    assert [s.node.type for s in model.steps].count(product) == 1
    got = model(*([lhs] if constant_rhs else [lhs, rhs]), to_numpy=True)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_a_row_against_stacked_matrices_reads_them_where_they_lie():
    """MoE's ``einsum("td,tkdh->tkh", x, up[chosen])``: no transpose, no copy of the (32, 2, 128, 256) stack."""
    text = ("HloModule moe\nENTRY main {\n  x = f32[32,128] parameter(0)\n  g = f32[32,2,128,256] parameter(1)\n"
            "  ROOT r = f32[32,2,256] dot(x, g), lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={0}, "
            "rhs_contracting_dims={2}\n}\n")
    model = kuiper.load_hlo(text, backend="numpy")
    assert [s.node.type for s in model.steps] == ["Reshape", "MatMul", "Reshape"]  # x as rows; the stack as is
    rng = np.random.default_rng(0)
    x, g = rng.standard_normal((32, 128)).astype(np.float32), rng.standard_normal((32, 2, 128, 256)).astype(np.float32)
    got = np.asarray(model(x, g, to_numpy=True))
    np.testing.assert_allclose(got, np.einsum("td,tkdh->tkh", x.astype(np.float64), g), rtol=0, atol=1e-4)


def test_attention_probs_by_values_reads_both_operands_along_their_rows():
    """JAX's ``einsum("...hqk,...khd->...qhd", probs, value)`` lowers to ``dot(value, probs)``, which read
    as written takes both operands across their rows (a 1.4x slower product on oneDNN): it is computed
    swapped, probs . value, each operand's last dim its contiguous one, and the result given transposed."""
    text = ("HloModule attention\nENTRY main {\n  v = f32[1,196,3,64] parameter(0)\n  p = f32[1,3,196,196] parameter(1)\n"
            "  ROOT r = f32[1,3,64,196] dot(v, p), lhs_batch_dims={0,2}, lhs_contracting_dims={1}, "
            "rhs_batch_dims={0,1}, rhs_contracting_dims={3}\n}\n")
    model = kuiper.load_hlo(text, backend="numpy")
    seen = []

    class Strides(StepObserver):
        def before_step(self, node, inputs):
            if node.type == "MatMul":
                seen.extend(value.strides[-1] for value in inputs)

    rng = np.random.default_rng(2)
    v, p = rng.standard_normal((1, 196, 3, 64)).astype(np.float32), rng.standard_normal((1, 3, 196, 196)).astype(np.float32)
    got = np.asarray(model(v, p, to_numpy=True, observer=Strides()))
    assert seen == [4, 4]  # both operands' last dims contiguous float32
    np.testing.assert_allclose(got, np.einsum("bkhd,bhqk->bhdq", v.astype(np.float64), p), rtol=0, atol=1e-4)
