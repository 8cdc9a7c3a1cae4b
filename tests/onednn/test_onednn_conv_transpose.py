"""Transposed convolutions on oneDNN (deconvolution) against a float64 scatter loop written here."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from kuiper import onednn

pytestmark = pytest.mark.skipif(not onednn.available(), reason=onednn.describe())

RNG = np.random.default_rng(3)
TOLERANCE = 2e-5


def float64_conv_transpose(x, weight, bias, stride, padding, output_padding, dilation, groups):
    """PyTorch's ConvTranspose by its definition: every input element scatters weight * x into the output."""
    spatial = x.ndim - 2
    in_channels, group_out, *kernel = weight.shape
    sizes = x.shape[2:]
    outs = [(size - 1) * s - 2 * p + d * (k - 1) + extra + 1
            for size, s, p, d, k, extra in zip(sizes, stride, padding, dilation, kernel, output_padding)]
    full = np.zeros((x.shape[0], group_out * groups) + tuple(o + 2 * p for o, p in zip(outs, padding)))
    group_in = in_channels // groups
    for c in range(in_channels):
        g = c // group_in
        for tap in itertools.product(*(range(k) for k in kernel)):
            window = tuple(slice(t * d, t * d + (size - 1) * s + 1, s) for t, d, s, size in zip(tap, dilation, stride, sizes))
            taps = weight[(c, slice(None)) + tap].astype(np.float64)  # (out/G,)
            contribution = np.einsum("o,n...->no...", taps, x[:, c].astype(np.float64))
            full[(slice(None), slice(g * group_out, (g + 1) * group_out)) + window] += contribution
    out = full[(slice(None), slice(None)) + tuple(slice(p, p + o) for p, o in zip(padding, outs))]
    if bias is not None:
        out = out + bias.astype(np.float64).reshape((1, -1) + (1,) * spatial)
    return out


CASES = {
    # name: (input shape, out channels, kernel, stride, padding, output padding, dilation, groups)
    "2-D k3 s2 p1 op1 (a decoder's upsampling)": ((2, 8, 5, 6), 6, (3, 3), (2, 2), (1, 1), (1, 1), (1, 1), 1),
    "2-D k4 s2 p1, 2 groups": ((1, 8, 6, 6), 4, (4, 4), (2, 2), (1, 1), (0, 0), (1, 1), 2),
    "2-D k3 dilated, unequal strides": ((1, 3, 4, 5), 5, (3, 3), (1, 2), (0, 1), (0, 1), (2, 1), 1),
    "2-D depthwise k2 s2": ((1, 4, 7, 7), 4, (2, 2), (2, 2), (0, 0), (0, 0), (1, 1), 4),
    "1-D k5 s3 p2 op2": ((2, 6, 9), 6, (5,), (3,), (2,), (2,), (1,), 1),
    "3-D k3 s2 p1 op1": ((1, 4, 3, 4, 3), 4, (3, 3, 3), (2, 2, 2), (1, 1, 1), (1, 1, 1), (1, 1, 1), 1),
}


def make_case(name):
    shape, out_channels, kernel, stride, padding, output_padding, dilation, groups = CASES[name]
    x = RNG.standard_normal(shape).astype(np.float32)
    weight = (RNG.standard_normal((shape[1], out_channels // groups) + kernel) / 3).astype(np.float32)
    bias = RNG.standard_normal(out_channels).astype(np.float32)
    expected = float64_conv_transpose(x, weight, bias, stride, padding, output_padding, dilation, groups)
    return x, weight, bias, expected, (stride, padding, output_padding, dilation, groups)


def params_text(kernel, stride, padding, output_padding, dilation, groups) -> str:
    def text(values):
        return "(" + ",".join(map(str, values)) + ")"

    return (f"kernel_size={text(kernel)} stride={text(stride)} padding={text(padding)} "
            f"output_padding={text(output_padding)} dilation={text(dilation)} groups={groups}")


@pytest.mark.parametrize("name", CASES)
def test_a_model_runs_conv_transpose_on_onednn_like_the_definition(tmp_path, name):
    from conftest import op_model

    from kuiper.numba_kernels import available as numba_available

    if not numba_available():
        pytest.skip("oneDNN op classes come with the compiled CPU kernels plugin (numba)")
    x, weight, bias, expected, (stride, padding, output_padding, dilation, groups) = make_case(name)
    rank = x.ndim - 2
    model = op_model(tmp_path, f"nn.ConvTranspose{rank}d c 1 1 x y bias=True in_channels={x.shape[1]} "
                     f"out_channels={bias.shape[0]} {params_text(weight.shape[2:], stride, padding, output_padding, dilation, groups)}",
                     weights={"weight": weight, "bias": bias})
    assert "oneDNN" in model.steps[0].op.kernel_note
    assert np.max(np.abs(model(x) - expected)) <= TOLERANCE
    # Unbatched and float64 inputs take the reference path, with the same answer.
    assert np.max(np.abs(model(x[0]) - expected[0])) <= TOLERANCE
    assert np.max(np.abs(model(x.astype(np.float64)) - expected)) <= TOLERANCE


def test_a_blocked_input_and_output_between_convolutions(tmp_path):
    """conv -> transposed conv -> conv: the middle op takes and gives oneDNN's layout."""
    from conftest import write_model

    import kuiper
    from kuiper.numba_kernels import available as numba_available

    if not numba_available():
        pytest.skip("oneDNN op classes come with the compiled CPU kernels plugin (numba)")
    first = (RNG.standard_normal((8, 3, 1, 1)) / 2).astype(np.float32)
    middle = (RNG.standard_normal((8, 8, 3, 3)) / 4).astype(np.float32)
    last = (RNG.standard_normal((4, 8, 1, 1)) / 2).astype(np.float32)
    text = ("7767517\n5 4\npnnx.Input in0 0 1 x\n"
            "nn.Conv2d a 1 1 x h bias=False in_channels=3 out_channels=8 kernel_size=(1,1) @weight=(8,3,1,1)f32\n"
            "nn.ConvTranspose2d b 1 1 h u bias=False in_channels=8 out_channels=8 kernel_size=(3,3) stride=(2,2) "
            "padding=(1,1) output_padding=(1,1) @weight=(8,8,3,3)f32\n"
            "nn.Conv2d c 1 1 u y bias=False in_channels=8 out_channels=4 kernel_size=(1,1) @weight=(4,8,1,1)f32\n"
            "pnnx.Output out0 1 0 y\n")
    param = write_model(tmp_path, text, {"a.weight": first.tobytes(), "b.weight": middle.tobytes(),
                                         "c.weight": last.tobytes()})
    model = kuiper.load(param, providers=False)
    layouts = [step.op.output_layout for step in model.steps]
    assert layouts == ["onednn", "onednn", None]  # the model's output is plain
    # With the providers, the three run as one sequence of oneDNN calls, whose members keep those layouts
    with_sequence = kuiper.load(param)
    (sequence,) = with_sequence.steps
    assert [unit.op.output_layout for unit in sequence.op.members] == ["onednn", "onednn", None]
    x = RNG.standard_normal((2, 3, 5, 5)).astype(np.float32)
    h = np.einsum("oc,nchw->nohw", first[:, :, 0, 0].astype(np.float64), x.astype(np.float64))
    u = float64_conv_transpose(h, middle, None, (2, 2), (1, 1), (1, 1), (1, 1), 1)
    expected = np.einsum("oc,nchw->nohw", last[:, :, 0, 0].astype(np.float64), u)
    assert np.max(np.abs(model(x) - expected)) <= TOLERANCE
    for _ in range(2):  # the first call runs the members, the next one the sequence
        np.testing.assert_array_equal(with_sequence(x), model(x))


def test_the_transposed_convolution_class_matches_the_definition_at_one_and_two_threads():
    for name in CASES:
        x, weight, bias, expected, (stride, padding, output_padding, dilation, groups) = make_case(name)
        in_channels, group_out, *kernel = weight.shape
        swapped = np.swapaxes(np.reshape(weight, (groups, in_channels // groups, group_out, *kernel)), 1, 2)
        conv = onednn.Convolution(onednn.library(), np.reshape(swapped, (groups * group_out, in_channels // groups, *kernel)),
                                  bias, stride, dilation, [(p, p) for p in padding], groups,
                                  output_padding=output_padding)
        assert conv.output_shape(x.shape) == expected.shape
        for threads in (1, 2):
            assert np.max(np.abs(conv(x, threads) - expected)) <= TOLERANCE, (name, threads)


def test_the_size_budget_counts_the_channels_a_blocked_output_rounds_up_to(tmp_path, monkeypatch):
    """A one-channel output is 16 KiB plain and 256 KiB in a blocked buffer: the budget checks the latter."""
    from conftest import op_model

    from kuiper.errors import SizeLimitError
    from kuiper.numba_kernels import available as numba_available

    if not numba_available():
        pytest.skip("oneDNN op classes come with the compiled CPU kernels plugin (numba)")
    model = op_model(tmp_path, "nn.ConvTranspose2d t 1 1 x y bias=False in_channels=1 out_channels=1 "
                     "kernel_size=(2,2) stride=(2,2)", weights={"weight": np.ones((1, 1, 2, 2), np.float32)})
    x = np.ones((1, 1, 32, 32), np.float32)
    monkeypatch.setenv("KUIPER_MEMORY_BUDGET", str(100 * 1024))
    with pytest.raises(SizeLimitError, match=r"op 't'.*\(1, 16, 64, 64\)"):
        model(x)
    monkeypatch.setenv("KUIPER_MEMORY_BUDGET", str(1024 * 1024))
    assert np.array_equal(model(x), np.ones((1, 1, 64, 64), np.float32))  # each input pixel fills a 2x2 block


# A decoder: transposed conv + ReLU, transposed conv + residual sum + sigmoid.
DECODER = """7767517
8 7
pnnx.Input in0 0 1 x
pnnx.Input in1 0 1 r
nn.ConvTranspose2d up1 1 1 x a bias=True in_channels=8 out_channels=6 kernel_size=(3,3) stride=(2,2) padding=(1,1) output_padding=(1,1) @weight=(8,6,3,3)f32 @bias=(6)f32
nn.ReLU relu 1 1 a b
nn.ConvTranspose2d up2 1 1 b c bias=False in_channels=6 out_channels=2 kernel_size=(2,2) stride=(2,2) @weight=(6,2,2,2)f32
pnnx.Expression add 2 1 c r d expr=add(@0,@1)
F.sigmoid sig 1 1 d y
pnnx.Output out0 1 0 y
"""


def _decoder_case(tmp_path):
    from conftest import write_model

    first = (RNG.standard_normal((8, 6, 3, 3)) / 4).astype(np.float32)
    first_bias = RNG.standard_normal(6).astype(np.float32)
    second = (RNG.standard_normal((6, 2, 2, 2)) / 3).astype(np.float32)
    param = write_model(tmp_path, DECODER, {"up1.weight": first.tobytes(), "up1.bias": first_bias.tobytes(),
                                         "up2.weight": second.tobytes()})
    x = RNG.standard_normal((2, 8, 4, 5)).astype(np.float32)
    r = RNG.standard_normal((2, 2, 16, 20)).astype(np.float32)
    b = np.maximum(float64_conv_transpose(x, first, first_bias, (2, 2), (1, 1), (1, 1), (1, 1), 1), 0)
    d = float64_conv_transpose(b, second, None, (2, 2), (0, 0), (0, 0), (1, 1), 1) + r
    return param, (x, r), 1 / (1 + np.exp(-d))


def test_transposed_convs_run_their_activation_and_residual_as_post_ops(tmp_path):
    import kuiper
    from kuiper.numba_kernels import available as numba_available

    if not numba_available():
        pytest.skip("oneDNN op classes come with the compiled CPU kernels plugin (numba)")
    param, inputs, expected = _decoder_case(tmp_path)
    model = kuiper.load(param)
    assert [step.node.name for step in model.steps] == ["up1", "up2"]  # the ReLU, add and sigmoid went in
    up1, up2 = (step.op for step in model.steps)
    assert up1.native.post_ops == (("eltwise_relu", 0.0, 0.0),)
    assert up2.native.post_ops == (("sum",), ("eltwise_logistic", 0.0, 0.0))
    assert up1.output_layout == "onednn"  # its only reader is the next transposed conv
    assert np.max(np.abs(model(*inputs) - expected)) <= TOLERANCE
    unfused = kuiper.load(param, fuse=False)
    assert np.max(np.abs(unfused(*inputs) - expected)) <= TOLERANCE


def test_without_onednn_the_reference_runs_the_transposed_convs_epilogues(tmp_path, monkeypatch):
    import kuiper

    monkeypatch.setattr(onednn, "library", lambda: None)
    param, inputs, expected = _decoder_case(tmp_path)
    model = kuiper.load(param)
    assert all(getattr(step.op, "native", None) is None for step in model.steps)
    assert np.max(np.abs(model(*inputs) - expected)) <= TOLERANCE


def test_an_epilogue_without_post_ops_runs_after_the_onednn_deconvolution(tmp_path):
    """A leaky ReLU has no post-op: oneDNN still runs the transposed conv, the epilogue after it, and
    its output is plain (not handed on in oneDNN's layout)."""
    from conftest import write_model

    import kuiper
    from kuiper.numba_kernels import available as numba_available

    if not numba_available():
        pytest.skip("oneDNN op classes come with the compiled CPU kernels plugin (numba)")
    weight = (RNG.standard_normal((4, 3, 2, 2)) / 2).astype(np.float32)
    text = ("7767517\n4 3\npnnx.Input in0 0 1 x\n"
            "nn.ConvTranspose2d up 1 1 x a bias=False in_channels=4 out_channels=3 kernel_size=(2,2) stride=(2,2) "
            "@weight=(4,3,2,2)f32\nnn.LeakyReLU act 1 1 a y negative_slope=0.1\npnnx.Output out0 1 0 y\n")
    model = kuiper.load(write_model(tmp_path, text, {"up.weight": weight.tobytes()}))
    (step,) = model.steps
    assert step.op.native is not None and step.op.epilogue_after and step.op.native_layout() is None
    assert "epilogue after it" in step.op.kernel_note
    x = RNG.standard_normal((2, 4, 5, 6)).astype(np.float32)
    y = float64_conv_transpose(x, weight, None, (2, 2), (0, 0), (0, 0), (1, 1), 1)
    assert np.max(np.abs(model(x) - np.where(y > 0, y, 0.1 * y))) <= TOLERANCE
