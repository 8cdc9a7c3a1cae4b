"""Conv epilogues in the compiled conv kernels: conv + elementwise math in one kernel, per output plane.

Each conv path (depthwise, Winograd, im2col, 1x1) with an epilogue (SiLU; a residual add +
ReLU; a ReLU6 with the residual first) must give what the conv followed by the separate ops
gives: the reference is the op's im2col path in float64, then the same math in float64
(NumPy, written out here, not through the IR).  The fused path must really be taken: the
op's after-the-conv fallback is switched off in those tests.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from kuiper.backends import get_backend
from kuiper.ir import composites, make
from kuiper.model_ir import OpNode
from kuiper.numba_kernels import conv as compiled_conv
from kuiper.ops import conv as reference
from kuiper.ops.elementwise import ElementwiseMath

from test_numba_kernels import TOLERANCE, conv_node, float64_im2col, inputs

# Both builds of every kernel, and both conv engines (conftest.py).
pytestmark = pytest.mark.usefixtures("kernel_variant", "conv_engine")


def _silu(x):
    return make.arith("mul", x, composites.sigmoid(x))


def _add_relu(residual, x):
    return composites.relu(make.arith("add", residual, x))


EPILOGUES = {
    # name: (math, position of the conv's result among its inputs, float64 reference of (conv, residual))
    "silu": (ElementwiseMath(_silu, 1), 0, lambda y, r: y / (1 + np.exp(-y))),
    "residual add + relu": (ElementwiseMath(_add_relu, 2), 1, lambda y, r: np.maximum(r + y, 0)),
    "relu6 of conv + residual": (
        ElementwiseMath(lambda x, residual: composites.clamp(make.arith("add", x, residual), 0.0, 6.0), 2), 0,
        lambda y, r: np.clip(y + r, 0, 6)),
}

CASES = {
    # name: (batch, in, out, height, width, kernel, stride, padding, groups, expected path)
    "depthwise 3x3 s1": (2, 8, 8, 11, 13, 3, 1, 1, 8, "depthwise"),
    "depthwise 3x3 s2": (1, 6, 6, 15, 9, 3, 2, 1, 6, "depthwise"),
    "winograd F(4x4)": (1, 16, 24, 13, 11, 3, 1, 1, 1, "winograd"),
    "winograd F(4x4), 3 chunks of images": (5, 16, 16, 28, 28, 3, 1, 1, 1, "winograd"),
    "winograd F(2x2)": (1, 16, 20, 14, 14, 3, 1, 0, 1, "winograd"),
    "winograd op on a tiny map (im2col)": (1, 16, 16, 3, 5, 3, 1, 1, 1, "winograd"),
    "im2col 3x3 s2": (2, 8, 12, 10, 9, 3, 2, 1, 1, "im2col"),
    "im2col 3x3 s2 groups 2": (2, 8, 12, 10, 9, 3, 2, 1, 2, "im2col"),
    "pointwise": (2, 12, 20, 9, 7, 1, 1, 0, 1, "pointwise"),
    "pointwise s2": (1, 12, 20, 9, 7, 1, 2, 0, 1, "pointwise"),
}


def epilogue_node(case, epilogue, bias=True):
    batch, cin, cout, height, width, kernel, stride, padding, groups, _ = CASES[case]
    math, operand, _ = EPILOGUES[epilogue]
    node = conv_node(cin, cout, kernel, stride, padding, groups, bias=bias)
    extras = ["r"] if math.arity == 2 else []
    fused = OpNode(node.type, node.name, node.inputs + extras, ["z"], attrs=node.attrs,
                   params={**node.params, "epilogue": math, "epilogue_operand": operand,
                           "epilogue_members": ["act"]})
    return node, fused


def expected_and_arguments(node, case, epilogue):
    batch, cin = CASES[case][:2]
    math, _, float64_math = EPILOGUES[epilogue]
    x = inputs((batch, cin) + CASES[case][3:5])
    conv = float64_im2col(node, x)
    residual = inputs(conv.shape, seed=2)
    arguments = [x, residual] if math.arity == 2 else [x]
    return float64_math(conv, residual.astype(np.float64)), arguments


@pytest.mark.parametrize("epilogue", EPILOGUES)
@pytest.mark.parametrize("case", CASES)
def test_conv_with_epilogue_matches_float64_conv_then_math(case, epilogue, monkeypatch, conv_engine):
    node, fused = epilogue_node(case, epilogue)
    op = compiled_conv.CompiledConv2d(fused, get_backend("numpy"))
    assert op.compiled == CASES[case][-1], op.kernel_note
    where = "as oneDNN post-ops" if conv_engine == "onednn" else "on each output plane"
    assert f"epilogue (act) {where}" in op.kernel_note

    def not_fused(*args):
        raise AssertionError("the epilogue ran after the conv, not in its kernel")

    monkeypatch.setattr(reference.ConvNd, "run_epilogue", not_fused)
    if case.endswith("3 chunks of images"):
        assert 28 * 28 // 16 * 5 > compiled_conv.algorithms.WINOGRAD_CHUNK_TILES  # F(4x4) takes 49 tiles an image
    expected, arguments = expected_and_arguments(node, case, epilogue)
    got = op.forward(*arguments)
    assert got.dtype == np.float32 and got.shape == expected.shape
    assert np.max(np.abs(got - expected)) <= TOLERANCE


@pytest.mark.parametrize("case", ["im2col 3x3 s2", "pointwise"])
def test_epilogue_after_gemms_in_chunks_of_images_reads_each_chunks_residual(case, monkeypatch):
    monkeypatch.setattr(reference, "IM2COL_CHUNK_BYTES", 1)  # one image per chunk
    node, fused = epilogue_node(case, "residual add + relu", bias=False)
    op = compiled_conv.CompiledConv2d(fused, get_backend("numpy"))
    expected, arguments = expected_and_arguments(node, case, "residual add + relu")
    assert np.max(np.abs(op.forward(*arguments) - expected)) <= TOLERANCE


@pytest.mark.parametrize("case", ["depthwise 3x3 s1", "winograd F(4x4)", "im2col 3x3 s2", "pointwise"])
def test_fused_and_separate_give_the_same_numbers(case, conv_engine):
    """The kernel runs the same interpreter program the elementwise op runs afterwards: equal bits."""
    if conv_engine == "onednn":
        pytest.skip("oneDNN's post-ops are its own math: compared with float64 above")
    _, fused = epilogue_node(case, "residual add + relu")
    op = compiled_conv.CompiledConv2d(fused, get_backend("numpy"))
    node, _ = epilogue_node(case, "silu")
    x = inputs((CASES[case][0], CASES[case][1]) + CASES[case][3:5])
    plain = compiled_conv.CompiledConv2d(node, get_backend("numpy")).forward(x)
    residual = inputs(plain.shape, seed=2)
    separate = op.run_epilogue(plain.copy(), [residual])
    np.testing.assert_array_equal(op.forward(x, residual), separate)


def test_an_epilogue_the_kernels_cannot_take_runs_after_the_conv():
    """A broadcast residual (one value per channel) is not a full-size input: the conv runs, then the math."""
    node, fused = epilogue_node("pointwise", "residual add + relu")
    op = compiled_conv.CompiledConv2d(fused, get_backend("numpy"))
    x = inputs((2, 12, 9, 7))
    per_channel = inputs((1, 20, 1, 1), seed=3)
    expected = np.maximum(per_channel + float64_im2col(node, x), 0)
    got = op.forward(x, per_channel)
    assert got.shape == expected.shape and np.max(np.abs(got - expected)) <= TOLERANCE
    unbatched = op.forward(x[0], per_channel[0])
    assert np.max(np.abs(unbatched - expected[0])) <= TOLERANCE


def test_the_reference_conv_runs_an_epilogue_after_the_conv():
    node, fused = epilogue_node("im2col 3x3 s2", "silu")
    op = reference.Conv2d(fused, get_backend("numpy"))
    expected, arguments = expected_and_arguments(node, "im2col 3x3 s2", "silu")
    assert np.max(np.abs(op.forward(*arguments) - expected)) <= TOLERANCE


def test_an_epilogue_operand_outside_the_math_is_an_error():
    from kuiper.errors import KuiperError

    _, fused = epilogue_node("pointwise", "silu")
    fused.params["epilogue_operand"] = 1
    with pytest.raises(KuiperError, match="epilogue_operand"):
        compiled_conv.CompiledConv2d(fused, get_backend("numpy"))
