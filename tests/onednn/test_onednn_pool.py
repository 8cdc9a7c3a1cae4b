"""Pooling on oneDNN (kuiper/onednn/pool.py, kuiper/numba_kernels/pool_native.py) against float64 references.

The references are the reference ops (kuiper.ops.pooling_max, pooling_average) run in
float64, and a few windows worked out by hand; nothing here trusts oneDNN.  Inputs arrive
plain or in oneDNN's blocked layout (from a oneDNN convolution), outputs leave either way.
"""

from __future__ import annotations

import numpy as np
import pytest

import kuiper
from kuiper import onednn
from kuiper.backends import get_backend
from kuiper.errors import ShapeError, SizeLimitError
from kuiper.onednn.binding import ARG_DST, ARG_SRC
from kuiper.onednn.primitives import Layout, reorder
from kuiper.ops.pooling_average import AvgPool2d
from kuiper.ops.pooling_max import MaxPool2d
from kuiper.ops.pooling_window import pool_output_size
from kuiper.thread_limits import limited

from conftest import pnnx_node, write_model

try:
    from kuiper.numba_kernels import pool_native
except ImportError:  # no numba: the ops are the reference's, the Pooling class is still tested
    pool_native = None

pytestmark = pytest.mark.skipif(not onednn.available(), reason=onednn.describe())
needs_ops = pytest.mark.skipif(pool_native is None, reason="the pooling ops come with the compiled CPU kernels (numba)")

RNG = np.random.default_rng(27)
TOLERANCE = 1e-6  # an average of up to 25 unit-scale float32 values; a max is exact

MAX_CASES = {
    # name: (input shape, params); channels 20 and 24 fill their last channel block only in part
    "3x3 s2 p1 (ResNet stem)": ((2, 24, 13, 11), {"kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1]}),
    "5x5 s1 p2 (SPPF)": ((1, 20, 9, 10), {"kernel_size": [5, 5], "stride": [1, 1], "padding": [2, 2]}),
    "2x2 floor drops the last row and column": ((1, 24, 9, 7), {"kernel_size": [2, 2]}),
    "2x2 ceil keeps a window hanging past the input": ((2, 20, 9, 7), {"kernel_size": [2, 2], "ceil_mode": True}),
    # size 5, k2 s2 p1: a ceil fourth window would start in the right padding, and PyTorch drops it
    "2x2 s2 p1 ceil drops a window starting in the padding": (
        (1, 24, 5, 5), {"kernel_size": [2, 2], "stride": [2, 2], "padding": [1, 1], "ceil_mode": True}),
    "3x3 dilation 2 p1": ((1, 20, 11, 12), {"kernel_size": [3, 3], "stride": [1, 1], "padding": [1, 1],
                                            "dilation": [2, 2]}),
    "3x2 s(2,3) p(1,1) dilation (2,1) ceil": ((2, 24, 13, 12), {"kernel_size": [3, 2], "stride": [2, 3],
                                                                 "padding": [1, 1], "dilation": [2, 1],
                                                                 "ceil_mode": True}),
}

AVG_CASES = {
    # name: (input shape, params, whether oneDNN's divisors are PyTorch's for it)
    "3x3 s2 p1 counting padding": ((2, 24, 13, 11), {"kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1]}, True),
    "3x3 s1 p1 not counting padding": ((1, 20, 9, 10), {"kernel_size": [3, 3], "stride": [1, 1], "padding": [1, 1],
                                                        "count_include_pad": False}, True),
    "3x3 s2 p1 ceil not counting padding": ((1, 24, 8, 6), {"kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1],
                                                            "ceil_mode": True, "count_include_pad": False}, True),
    "2x2 ceil counting padding, none given": ((2, 20, 9, 7), {"kernel_size": [2, 2], "ceil_mode": True}, True),
    # size 7: the ceil window [5, 8) ends at the right padding's edge, so it divides by 9
    "3x3 s2 p1 ceil counting padding, inside it": ((1, 24, 7, 7), {"kernel_size": [3, 3], "stride": [2, 2],
                                                                   "padding": [1, 1], "ceil_mode": True}, True),
    # size 6: the ceil window [5, 8) passes the padded edge 7; PyTorch divides by 6, oneDNN would by 9
    "3x3 s2 p1 ceil counting padding, past it": ((1, 24, 6, 6), {"kernel_size": [3, 3], "stride": [2, 2],
                                                                 "padding": [1, 1], "ceil_mode": True}, False),
    "divisor_override": ((1, 24, 8, 8), {"kernel_size": [2, 2], "divisor_override": 3}, False),
}


def _blocked(x):
    """x copied into the blocked layout a oneDNN convolution gives its output (a copy keeps NaNs)."""
    library = onednn.library()
    channels = x.shape[1]
    identity = np.ones((channels, 1, 1, 1), np.float32)  # depthwise: small plain convs give plain layouts
    layout = onednn.Convolution(library, identity, None, (1, 1), (1, 1), ((0, 0), (0, 0)), channels)(
        np.zeros_like(x), blocked=True).layout
    plain, buffer = Layout.plain(library, x.shape), layout.empty()
    reorder(library, plain, layout).run({ARG_SRC: (plain, x), ARG_DST: (layout, buffer)}, library.threads(None))
    return onednn.Blocked(library, x.shape, layout, buffer)


def _ops(op_type, params):
    """(the oneDNN op, the reference op) for a node of ``op_type`` with ``params``."""
    node = pnnx_node(op_type, "pool", ["x"], ["y"], params=params)
    native, reference = {"nn.MaxPool2d": (pool_native.NativeMaxPool2d, MaxPool2d),
                         "nn.AvgPool2d": (pool_native.NativeAvgPool2d, AvgPool2d)}[op_type]
    return native(node, get_backend("numpy")), reference(node, get_backend("numpy"))


def _counting_calls(monkeypatch):
    """The inputs oneDNN poolings are called with from now on."""
    calls = []
    run = onednn.Pooling.__call__

    def counted(self, x, *args, **kwargs):
        calls.append(x)
        return run(self, x, *args, **kwargs)

    monkeypatch.setattr(onednn.Pooling, "__call__", counted)
    return calls


def test_a_ceil_mode_edge_window_by_hand():
    """2x2 windows, stride 2, ceil_mode, on a 5x5 plane: the third row and column of windows hold
    only the input's last row or column (the window hangs past the input)."""
    x = np.arange(2 * 16 * 25, dtype=np.float32).reshape(2, 16, 5, 5)
    pooling = onednn.Pooling(onednn.library(), "max", (2, 2), (2, 2), (1, 1), (0, 0))
    expected = x[:, :, [1, 3, 4]][:, :, :, [1, 3, 4]]  # each window's last element is its largest
    np.testing.assert_array_equal(pooling(x, (3, 3)), expected)
    np.testing.assert_array_equal(pooling(_blocked(x), (3, 3)), expected)
    average = onednn.Pooling(onednn.library(), "average_exclude_padding", (2, 2), (2, 2), (1, 1), (0, 0))
    rows = [x[:, :, 0:2], x[:, :, 2:4], x[:, :, 4:5]]
    expected = np.stack([np.stack([r[..., c].mean(axis=(2, 3)) for c in (slice(0, 2), slice(2, 4), slice(4, 5))], -1)
                         for r in rows], -2)
    np.testing.assert_allclose(average(_blocked(x), (3, 3)), expected, rtol=TOLERANCE)


CASES = {**{f"max {name}": ("nn.MaxPool2d", shape, params, True) for name, (shape, params) in MAX_CASES.items()},
         **{f"average {name}": ("nn.AvgPool2d", *case) for name, case in AVG_CASES.items()}}


@needs_ops
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("layout_out", [None, "onednn"])
@pytest.mark.parametrize("case", CASES)
def test_a_blocked_input_pools_as_the_float64_reference_does(case, layout_out, threads, monkeypatch):
    """Where oneDNN computes what PyTorch does the pool runs there; elsewhere the compiled loop does.
    A max is exact."""
    op_type, shape, params, on_onednn = CASES[case]
    op, reference = _ops(op_type, params)
    op.output_layout = layout_out
    calls = _counting_calls(monkeypatch)
    x = RNG.standard_normal(shape).astype(np.float32)
    with limited(threads):
        got = op.forward(_blocked(x))
    assert len(calls) == int(on_onednn)
    assert isinstance(got, onednn.Blocked if layout_out and on_onednn else np.ndarray)
    expected = reference.forward(x.astype(np.float64))
    assert got.shape == expected.shape
    tolerance = 0.0 if op_type == "nn.MaxPool2d" else TOLERANCE
    assert np.max(np.abs(np.asarray(got) - expected)) <= tolerance


@needs_ops
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", CASES)
def test_a_plain_input_pools_as_the_float64_reference_does(case, threads):
    """On oneDNN where it has a compiled kernel for plain NCHW and divides as PyTorch does, else
    on the compiled loop: the same numbers either way."""
    op_type, shape, params, _ = CASES[case]
    op, reference = _ops(op_type, params)
    x = RNG.standard_normal(shape).astype(np.float32)
    with limited(threads):
        got = op.forward(x)
    expected = reference.forward(x.astype(np.float64))
    assert isinstance(got, np.ndarray) and got.shape == expected.shape
    tolerance = 0.0 if op_type == "nn.MaxPool2d" else TOLERANCE
    assert np.max(np.abs(got - expected)) <= tolerance


@pytest.mark.parametrize("threads", [1, 2])
def test_plain_inputs_pool_into_plain_outputs_where_onednn_has_a_compiled_kernel_for_them(threads):
    # Plain NCHW has oneDNN's jit kernels on some machines and configurations (AVX-512, no dilation)
    # and only its slow reference loop on others: that is refused, and the op's own loop takes it.
    ran = refused = 0
    for shape, params in MAX_CASES.values():
        kernel = params["kernel_size"]
        stride, padding = params.get("stride", kernel), params.get("padding", [0, 0])
        dilation = params.get("dilation", [1, 1])
        out_size = tuple(pool_output_size(n, k, s, p, d, params.get("ceil_mode", False)) for n, k, s, p, d in
                         zip(shape[2:], kernel, stride, padding, dilation))
        x = RNG.standard_normal(shape).astype(np.float32)
        pooling = onednn.Pooling(onednn.library(), "max", kernel, stride, dilation, padding)
        try:
            got = pooling(x, out_size, threads=threads)
        except onednn.OneDnnError as exc:
            assert "reference loop" in str(exc) or "only padding" in str(exc)
            refused += 1
            continue
        assert not pooling.plan(None, shape, out_size, pooling.library.threads(threads)).pooling.implementation(
            ).startswith("ref")
        reference = MaxPool2d(pnnx_node("nn.MaxPool2d", "pool", ["x"], ["y"], params=params), get_backend("numpy"))
        assert isinstance(got, np.ndarray)
        np.testing.assert_array_equal(got, reference.forward(x.astype(np.float64)).astype(np.float32))
        ran += 1
    assert ran + refused == len(MAX_CASES)


def test_a_window_over_padding_only_is_refused_and_the_op_gives_minus_infinity():
    """k2, dilation 4, pad 1 on a 3-wide plane: the taps -1 and 3 both miss the input.  oneDNN would
    give -FLT_MAX there; PyTorch gives -inf."""
    pooling = onednn.Pooling(onednn.library(), "max", (2, 2), (1, 1), (4, 4), (1, 1))
    x = RNG.standard_normal((1, 16, 3, 3)).astype(np.float32)
    with pytest.raises(onednn.OneDnnError, match="only padding"):
        pooling(_blocked(x), (1, 1))
    with pytest.raises(onednn.OneDnnError, match="only padding"):
        pooling(_blocked(x), (1, 1))  # remembered
    assert len(pooling.plans) == 1
    if pool_native is not None:
        op, _ = _ops("nn.MaxPool2d", {"kernel_size": [2, 2], "padding": [1, 1], "dilation": [4, 4], "stride": [1, 1]})
        np.testing.assert_array_equal(op.forward(_blocked(x)), np.full((1, 16, 1, 1), -np.inf, np.float32))


@needs_ops
def test_a_nan_takes_the_compiled_loop_which_keeps_it(monkeypatch):
    """oneDNN's max drops a NaN; PyTorch's (and the compiled loop's) keeps it."""
    op, _ = _ops("nn.MaxPool2d", MAX_CASES["3x3 s2 p1 (ResNet stem)"][1])
    calls = _counting_calls(monkeypatch)
    x = RNG.standard_normal((1, 16, 6, 6)).astype(np.float32)
    x[0, 3, 2, 3] = np.nan
    got = op.forward(_blocked(x))
    assert not calls
    assert np.isnan(got[0, 3]).sum() == 2 and np.isnan(got).sum() == 2  # windows at rows 1 and columns 1-2


@needs_ops
def test_a_plain_max_pool_input_holding_nan_or_infinity_takes_the_compiled_loop(monkeypatch):
    """A plain float32 input goes to oneDNN (where it has a compiled kernel for plain NCHW) only when it
    holds no NaN, which oneDNN's max drops, and no infinity (it gives -inf as -FLT_MAX)."""
    op, reference = _ops("nn.MaxPool2d", {"kernel_size": [2, 2], "stride": [2, 2]})
    calls = _counting_calls(monkeypatch)
    x = RNG.standard_normal((2, 16, 8, 8)).astype(np.float32)
    np.testing.assert_array_equal(op.forward(x), reference.forward(x.astype(np.float64)).astype(np.float32))
    finite_calls = len(calls)
    assert finite_calls == 1  # offered to oneDNN (which refuses plain NCHW where it has only its reference loop)
    for special in (np.nan, -np.inf, np.inf):
        y = x.copy()
        y[1, 5, 2:4, 4:6] = special  # one whole window: -inf there stays -inf, not -FLT_MAX
        y[0, 2, 3, 3] = special
        got = op.forward(y)
        np.testing.assert_array_equal(got, reference.forward(y.astype(np.float64)).astype(np.float32))
        assert np.isnan(got).sum() == (2 if np.isnan(special) else 0)
    assert len(calls) == finite_calls  # none of them reached oneDNN


@needs_ops
def test_what_onednn_does_not_take_goes_to_the_compiled_op(monkeypatch):
    params = {"kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1]}
    op, reference = _ops("nn.MaxPool2d", params)
    calls = _counting_calls(monkeypatch)
    x = RNG.standard_normal((2, 16, 9, 9)).astype(np.float32)
    expected = reference.forward(x.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(op.forward(x[0]), expected[0])  # unbatched
    np.testing.assert_array_equal(op.forward(x.astype(np.float64)), expected)  # float64: the reference
    assert not calls
    unpadded, _ = _ops("nn.MaxPool2d", {"kernel_size": [3, 3]})
    with pytest.raises(ShapeError, match="too small"):
        unpadded.forward(_blocked(np.ones((1, 16, 2, 2), np.float32)))  # an empty output: the reference's error
    indices, _ = _ops("nn.MaxPool2d", {**params, "return_indices": True})
    assert indices.native is None and indices.native_layout() is None and not indices.takes_layout(0, "onednn")


@needs_ops
def test_a_refusal_takes_the_compiled_loop_from_a_blocked_input(monkeypatch):
    op, reference = _ops("nn.MaxPool2d", MAX_CASES["5x5 s1 p2 (SPPF)"][1])
    monkeypatch.setattr(onednn.Pooling, "_make_plan", lambda self, *args: (_ for _ in ()).throw(
        onednn.OneDnnError("oneDNN pooling: unimplemented")))
    x = RNG.standard_normal((1, 16, 7, 7)).astype(np.float32)
    got = op.forward(_blocked(x))
    assert isinstance(got, np.ndarray)
    np.testing.assert_array_equal(got, reference.forward(x.astype(np.float64)).astype(np.float32))


@needs_ops
def test_the_size_budget_counts_the_channels_a_blocked_buffer_rounds_up_to(monkeypatch):
    op, _ = _ops("nn.MaxPool2d", {"kernel_size": [1, 1]})
    x = _blocked(np.ones((1, 2, 64, 64), np.float32))  # 32 KiB plain; 256 KiB blocked
    monkeypatch.setenv("KUIPER_MEMORY_BUDGET", str(100 * 1024))
    with pytest.raises(SizeLimitError, match="pool"):
        op.forward(x)


# x -> conv (3x3) -> relu -> max pool (3x3 s2 p1) -> conv (1x1) -> output
STEM = """7767517
6 5
pnnx.Input in0 0 1 x
nn.Conv2d c1 1 1 x a bias=False kernel_size=(3,3) in_channels=3 out_channels=16 padding=(1,1) @weight=(16,3,3,3)f32
nn.ReLU r1 1 1 a b
nn.MaxPool2d pool 1 1 b c kernel_size=(3,3) stride=(2,2) padding=(1,1)
nn.Conv2d c2 1 1 c d bias=False kernel_size=(1,1) in_channels=16 out_channels=8 @weight=(8,16,1,1)f32
pnnx.Output out 1 0 d
"""
W1 = (RNG.standard_normal((16, 3, 3, 3)) / 5).astype(np.float32)
W2 = (RNG.standard_normal((8, 16, 1, 1)) / 4).astype(np.float32)


def _stem_reference(x):
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    height, width = x.shape[2] - 2, x.shape[3] - 2
    a = sum(np.einsum("oc,nchw->nohw", W1[:, :, i, j].astype(np.float64), x[:, :, i:i + height, j:j + width])
            for i in range(3) for j in range(3))
    b = np.pad(np.maximum(a, 0), ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    out_h, out_w = (height - 1) // 2 + 1, (width - 1) // 2 + 1
    c = np.max([b[:, :, i:i + 2 * out_h - 1:2, j:j + 2 * out_w - 1:2] for i in range(3) for j in range(3)], axis=0)
    return np.einsum("oc,nchw->nohw", W2[:, :, 0, 0].astype(np.float64), c)


def _run_seeing_input_types(model, x):
    """(the model's output on x, {step name: the class of its first input}): which steps met a Blocked tensor."""
    seen = {}

    class Observer:
        def before_step(self, node, inputs):
            seen[node.name] = type(inputs[0])

        def after_step(self, node, inputs, outputs):
            pass

    return model(x, observer=Observer()), seen


@needs_ops
@pytest.mark.parametrize("threads", [1, 2])
def test_a_conv_pool_conv_model_keeps_the_blocked_layout_through_the_pool(tmp_path, threads):
    param = write_model(tmp_path, STEM, {"c1.weight": W1.tobytes(), "c2.weight": W2.tobytes()})
    model = kuiper.load(param, threads=threads, providers=False)  # op by op: the providers make it one sequence
    layouts = {step.node.name: step.op.output_layout for step in model.steps}
    assert layouts == {"c1": "onednn", "pool": "onednn", "c2": None}
    x = RNG.standard_normal((2, 3, 15, 12)).astype(np.float32)
    got, seen = _run_seeing_input_types(model, x)
    assert seen == {"c1": np.ndarray, "pool": onednn.Blocked, "c2": onednn.Blocked}
    assert isinstance(got, np.ndarray) and np.max(np.abs(got - _stem_reference(x))) <= 2e-5
    as_sequence = kuiper.load(param, threads=threads)
    (step,) = as_sequence.steps
    assert [unit.node.name for unit in step.op.members] == ["c1", "pool", "c2"]
    for _ in range(2):  # the members, then the sequence: the same numbers
        np.testing.assert_array_equal(as_sequence(x), got)


HEAD = """7767517
5 4
pnnx.Input in0 0 1 x
nn.Conv2d c1 1 1 x a bias=False kernel_size=(3,3) in_channels=3 out_channels=20 padding=(1,1) @weight=(20,3,3,3)f32
nn.AdaptiveAvgPool2d pool 1 1 a b output_size=(1,1)
torch.flatten flat 1 1 b c end_dim=-1 start_dim=1
pnnx.Output out 1 0 c
"""
W_HEAD = (RNG.standard_normal((20, 3, 3, 3)) / 5).astype(np.float32)


def _head_reference(x):
    x64 = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    height, width = x.shape[2], x.shape[3]
    a = sum(np.einsum("oc,nchw->nohw", W_HEAD[:, :, i, j].astype(np.float64), x64[:, :, i:i + height, j:j + width])
            for i in range(3) for j in range(3))
    return a.mean(axis=(2, 3))


@needs_ops
@pytest.mark.parametrize("threads", [1, 2])
def test_a_global_average_pool_reads_the_last_convs_blocked_output(tmp_path, threads):
    param = write_model(tmp_path, HEAD, {"c1.weight": W_HEAD.tobytes()})
    model = kuiper.load(param, threads=threads, providers=False)  # op by op; with them, conv and pool are one run
    assert {step.node.name: step.op.output_layout for step in model.steps}["c1"] == "onednn"
    as_sequence = kuiper.load(param, threads=threads)
    assert [unit.node.name for unit in as_sequence.steps[0].op.members] == ["c1", "pool"]
    for shape in [(2, 3, 14, 11), (1, 3, 7, 7), (3, 3, 1, 5)]:  # the window is each input's whole map
        x = RNG.standard_normal(shape).astype(np.float32)
        got, seen = _run_seeing_input_types(model, x)
        assert seen["pool"] is onednn.Blocked
        assert isinstance(got, np.ndarray) and got.shape == (shape[0], 20)
        assert np.max(np.abs(got - _head_reference(x))) <= 2e-6
        np.testing.assert_array_equal(model(x), got)  # and as a plain (specialized) call runs it
        for _ in range(2):  # the members, then (for the first shape) the sequence
            np.testing.assert_array_equal(as_sequence(x), got)
        pool = model.steps[1].op
        conv_out = np.asarray(model.steps[0].op.forward(x), dtype=np.float64)
        assert float(np.linalg.norm(got)) <= pool.bound_through([conv_out.shape], [float(np.linalg.norm(conv_out))])
    x = RNG.standard_normal((1, 3, 9, 9)).astype(np.float32)
    x[0, 1, 4, 4] = np.nan
    assert np.isnan(model(x)).all()  # each channel's conv output reads the NaN, and its average keeps it
    assert np.isnan(as_sequence(x)).all()


AUDIO = """7767517
5 4
pnnx.Input in0 0 1 x
nn.Conv1d c1 1 1 x a bias=False kernel_size=(5) in_channels=2 out_channels=20 stride=(2) padding=(0) @weight=(20,2,5)f32
nn.MaxPool1d pool 1 1 a b kernel_size=(4) stride=(4) padding=(0)
nn.Conv1d c2 1 1 b y bias=False kernel_size=(3) in_channels=20 out_channels=8 padding=(1) @weight=(8,20,3)f32
pnnx.Output out 1 0 y
"""
W_A1 = (RNG.standard_normal((20, 2, 5)) / 3).astype(np.float32)
W_A2 = (RNG.standard_normal((8, 20, 3)) / 4).astype(np.float32)


def _audio_reference(x):
    x = x.astype(np.float64)
    length = (x.shape[2] - 5) // 2 + 1
    a = sum(np.einsum("oc,ncl->nol", W_A1[:, :, t].astype(np.float64), x[:, :, t:t + 2 * length - 1:2])
            for t in range(5))
    pooled = a[:, :, :a.shape[2] // 4 * 4].reshape(a.shape[0], a.shape[1], -1, 4).max(axis=3)
    padded = np.pad(pooled, ((0, 0), (0, 0), (1, 1)))
    return sum(np.einsum("oc,ncl->nol", W_A2[:, :, t].astype(np.float64), padded[:, :, t:t + pooled.shape[2]])
               for t in range(3))


@needs_ops
def test_a_max_pool_1d_between_conv1d_layers_pools_their_blocked_output(tmp_path):
    """M5's pattern: Conv1d -> MaxPool1d -> Conv1d, the pool on oneDNN in the convs' layout; a NaN the max
    would drop takes the compiled loop, which keeps it as PyTorch does."""
    param = write_model(tmp_path, AUDIO, {"c1.weight": W_A1.tobytes(), "c2.weight": W_A2.tobytes()})
    model = kuiper.load(param, threads=1, providers=False)
    assert {step.node.name: step.op.output_layout for step in model.steps} == {"c1": "onednn", "pool": "onednn",
                                                                                "c2": None}
    x = RNG.standard_normal((2, 2, 403)).astype(np.float32)
    got, seen = _run_seeing_input_types(model, x)
    assert seen["pool"] is onednn.Blocked
    assert np.max(np.abs(got - _audio_reference(x))) <= 2e-5
    as_sequence = kuiper.load(param, threads=1)
    (step,) = as_sequence.steps
    for _ in range(2):
        np.testing.assert_array_equal(as_sequence(x), got)
    x[1, 0, 200] = np.nan
    want = _audio_reference(x)
    for engine in (model, as_sequence):
        out = engine(x)
        assert np.array_equal(np.isnan(out), np.isnan(want))
        assert np.max(np.abs(out[~np.isnan(want)] - want[~np.isnan(want)])) <= 2e-5
