"""kuiper.onednn: oneDNN's convolutions against a float64 reference, its blocked layout, post-ops, threads.

The reference is a direct float64 loop over the kernel taps (NumPy, written out here), so
nothing here trusts oneDNN or kuiper's other conv paths.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from kuiper import onednn
from kuiper.onednn import conv as onednn_conv
from kuiper.onednn.primitives import MAX_PLANS, Layout, Primitive, reference_or_gemm

pytestmark = pytest.mark.skipif(not onednn.available(), reason=onednn.describe())

RNG = np.random.default_rng(0)
TOLERANCE = 2e-5  # float32 accumulation over up to a few hundred products of unit-scale values


def float64_conv(x, weight, bias, stride, dilation, pads, groups):
    """A direct convolution in float64 of any spatial rank: out[n, o] = sum over taps of w * shifted x."""
    spatial = x.ndim - 2
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0)) + tuple((max(b, 0), max(a, 0)) for b, a in pads))
    out_channels, group_in = weight.shape[:2]
    kernel = weight.shape[2:]
    out_size = [(x.shape[2 + d] - dilation[d] * (kernel[d] - 1) - 1) // stride[d] + 1 for d in range(spatial)]
    out = np.zeros((x.shape[0], out_channels, *out_size))
    group_out = out_channels // groups
    for g in range(groups):
        inputs = x[:, g * group_in:(g + 1) * group_in]
        for tap in itertools.product(*(range(k) for k in kernel)):
            window = tuple(slice(t * dil, t * dil + (o - 1) * s + 1, s)
                           for t, dil, o, s in zip(tap, dilation, out_size, stride))
            taps = weight[(slice(g * group_out, (g + 1) * group_out), slice(None)) + tap].astype(np.float64)
            out[:, g * group_out:(g + 1) * group_out] += np.einsum("oc,nc...->no...", taps, inputs[(Ellipsis,) + window])
    if bias is not None:
        out += bias.astype(np.float64).reshape((1, -1) + (1,) * spatial)
    return out


CASES = {
    # name: (input shape, out channels, kernel, stride, dilation, pads per dim, groups)
    "3x3 s1 p1": ((2, 16, 13, 11), 24, (3, 3), (1, 1), (1, 1), ((1, 1), (1, 1)), 1),
    "7x7 s2 p3, 3 channels (a stem)": ((1, 3, 23, 19), 8, (7, 7), (2, 2), (1, 1), ((3, 3), (3, 3)), 1),
    "1x1 s2": ((1, 24, 9, 8), 16, (1, 1), (2, 2), (1, 1), ((0, 0), (0, 0)), 1),
    "depthwise 3x3 s2": ((2, 32, 15, 9), 32, (3, 3), (2, 2), (1, 1), ((1, 1), (1, 1)), 32),
    "grouped, dilated, unequal pads": ((1, 8, 12, 10), 12, (3, 3), (2, 1), (2, 2), ((2, 0), (1, 3)), 2),
    "floor drops the last row (negative right pad)": ((1, 16, 9, 9), 24, (2, 2), (2, 2), (1, 1), ((0, 0), (0, 0)), 1),
    "1-D, k5 s2": ((3, 8, 40), 16, (5,), (2,), (1,), ((2, 2),), 1),
    "3-D 3x3x3": ((1, 8, 5, 6, 7), 8, (3, 3, 3), (1, 1, 1), (1, 1, 1), ((1, 1), (1, 1), (1, 1)), 1),
}


@pytest.fixture(params=["small convs plain", "all blocked"])
def layouts(request, monkeypatch):
    """Run a test under the library's rule (convolutions under PLAIN_CONV_WORK read and write plain
    arrays) and with every convolution on oneDNN's blocked layouts, as larger ones run."""
    if request.param == "all blocked":
        monkeypatch.setattr(onednn_conv, "PLAIN_CONV_WORK", 0)
    return request.param


def make_case(name, bias=True):
    shape, out_channels, kernel, stride, dilation, pads, groups = CASES[name]
    x = RNG.standard_normal(shape).astype(np.float32)
    weight = (RNG.standard_normal((out_channels, shape[1] // groups) + kernel) / 3).astype(np.float32)
    b = RNG.standard_normal(out_channels).astype(np.float32) if bias else None
    conv = onednn.Convolution(onednn.library(), weight, b, stride, dilation, pads, groups)
    return conv, x, float64_conv(x, weight, b, stride, dilation, pads, groups)


@pytest.mark.parametrize("name", CASES)
def test_convolution_matches_a_float64_direct_loop(name, layouts):
    conv, x, expected = make_case(name)
    got = conv(x)
    assert isinstance(got, np.ndarray) and got.dtype == np.float32 and got.shape == expected.shape
    assert np.max(np.abs(got - expected)) <= TOLERANCE
    assert conv.implementation(x.shape)  # oneDNN names the kernel it picked


@pytest.mark.parametrize("name", ["3x3 s1 p1", "depthwise 3x3 s2", "1-D, k5 s2"])
def test_a_blocked_output_holds_the_same_numbers_and_feeds_the_next_convolution(name, layouts):
    conv, x, expected = make_case(name)
    blocked = conv(x, blocked=True)
    assert isinstance(blocked, onednn.Blocked) and blocked.shape == expected.shape and blocked.ndim == x.ndim
    # reordered on demand; a blocked call may run another kernel than a plain one (small convs: plain
    # GEMM between plain neighbours), so both are held to the float64 reference
    assert np.max(np.abs(np.asarray(blocked) - expected)) <= TOLERANCE
    channels = expected.shape[1]
    weight = (RNG.standard_normal((channels, channels) + (1,) * (x.ndim - 2)) / 3).astype(np.float32)
    spatial = x.ndim - 2
    second = onednn.Convolution(onednn.library(), weight, None, (1,) * spatial, (1,) * spatial, ((0, 0),) * spatial, 1)
    from_blocked, from_plain = second(blocked), second(conv(x))
    reference = float64_conv(expected.astype(np.float32), weight, None, (1,) * spatial, (1,) * spatial,
                             ((0, 0),) * spatial, 1)
    assert np.max(np.abs(from_blocked - reference)) <= TOLERANCE
    assert np.max(np.abs(from_plain - reference)) <= TOLERANCE


@pytest.mark.parametrize("residual_blocked", [False, True], ids=["plain residual", "blocked residual"])
def test_post_ops_sum_then_relu_and_clip(residual_blocked, layouts):
    shape, out_channels, kernel, stride, dilation, pads, groups = CASES["3x3 s1 p1"]
    x = RNG.standard_normal(shape).astype(np.float32)
    weight = (RNG.standard_normal((out_channels, shape[1]) + kernel) / 3).astype(np.float32)
    plain = float64_conv(x, weight, None, stride, dilation, pads, groups)
    residual = RNG.standard_normal(plain.shape).astype(np.float32)
    library = onednn.library()
    add_relu = onednn.Convolution(library, weight, None, stride, dilation, pads, groups,
                                  post_ops=(("sum",), ("eltwise_relu", 0.0, 0.0)))
    given = residual
    if residual_blocked:  # a residual another convolution left blocked: the identity 1x1 conv of it
        identity = np.eye(out_channels, dtype=np.float32).reshape(out_channels, out_channels, 1, 1)
        given = onednn.Convolution(library, identity, None, (1, 1), (1, 1), ((0, 0), (0, 0)), 1)(residual, blocked=True)
    got = add_relu(x, residual=given)
    assert np.max(np.abs(got - np.maximum(plain + residual, 0))) <= TOLERANCE
    np.testing.assert_array_equal(np.asarray(given), residual)  # the residual is read, never written
    relu6 = onednn.Convolution(library, weight, None, stride, dilation, pads, groups,
                               post_ops=(("eltwise_clip", 0.0, 6.0),))
    assert np.max(np.abs(relu6(x) - np.clip(plain, 0, 6))) <= TOLERANCE
    with pytest.raises(onednn.OneDnnError, match="residual"):
        relu6(x, residual=residual)
    with pytest.raises(onednn.OneDnnError, match="the residual has shape"):
        add_relu(x, residual=residual[:, :1])


def test_results_do_not_depend_on_the_thread_count_and_plans_are_kept_per_shape_and_threads(monkeypatch):
    monkeypatch.setattr(onednn_conv, "PLAIN_CONV_WORK", 0)  # else this small conv takes one thread
    conv, x, expected = make_case("3x3 s1 p1")
    one, two = conv(x, threads=1), conv(x, threads=2)
    np.testing.assert_array_equal(one, two)
    assert set(conv.plans) == {(x.shape, 1, True), (x.shape, 2, True)}  # (shape, threads, plain in and out)
    for batch in range(1, MAX_PLANS + 3):
        conv(np.repeat(x[:1], batch, axis=0), threads=1)
    assert len(conv.plans) == MAX_PLANS  # the oldest plans went first
    assert (x.shape, 1, True) not in conv.plans


def test_every_primitive_of_a_one_thread_plan_runs_on_one_thread(monkeypatch):
    """The weight's reorder too: a model asked to keep to one thread keeps to it on its first call."""
    monkeypatch.setattr(onednn_conv, "PLAIN_CONV_WORK", 0)  # blocked: the weight is reordered
    conv, x, expected = make_case("3x3 s1 p1")
    counts = []
    run = Primitive.run
    monkeypatch.setattr(Primitive, "run", lambda self, arguments, threads: (counts.append(threads),
                                                                          run(self, arguments, threads)))
    assert np.max(np.abs(conv(x, threads=1) - expected)) <= TOLERANCE
    assert len(counts) >= 3 and set(counts) == {1}  # the weight's reorder, the input's, the convolution


def test_a_tiny_convolution_runs_on_one_thread_whatever_was_asked():
    conv, x, expected = make_case("1-D, k5 s2")  # 3 x 16 x 20 outputs x 40 taps: 38 K multiply-adds
    assert conv.work(x.shape) == 3 * 16 * 20 * 8 * 5 < onednn_conv.ONE_THREAD_WORK
    assert np.max(np.abs(conv(x, threads=2) - expected)) <= TOLERANCE
    assert set(conv.plans) == {(x.shape, 1, True)}
    depthwise, depthwise_x, _ = make_case("depthwise 3x3 s2")  # grouped: blocked, and 1 thread only below the line
    assert onednn_conv.ONE_THREAD_WORK > depthwise.work(depthwise_x.shape)
    depthwise(depthwise_x, threads=2)
    assert set(depthwise.plans) == {(depthwise_x.shape, 1, True)}
    small, small_x, _ = make_case("3x3 s1 p1")  # not grouped: plain and one thread up to PLAIN_CONV_WORK
    assert onednn_conv.ONE_THREAD_WORK <= small.work(small_x.shape) < onednn_conv.PLAIN_CONV_WORK
    small(small_x, threads=2)
    assert set(small.plans) == {(small_x.shape, 1, True)}
    big_x = np.repeat(small_x, 2, axis=0)
    assert small.work(big_x.shape) >= onednn_conv.PLAIN_CONV_WORK
    small(big_x, threads=2)
    assert (big_x.shape, 2, True) in small.plans


def test_a_small_convolution_between_blocked_neighbours_stays_blocked():
    """Plain GEMM pays only where the input arrives plain and the output leaves plain: beside other oneDNN
    convolutions a small one keeps their blocked layout (a 32x32 ResNet's convs: 1.0 -> 0.43 ms a call)."""
    conv, x, expected = make_case("3x3 s1 p1")
    plain = conv.plan(x.shape, 1)
    assert plain.source == plain.plain_in and plain.result == plain.to_plain.plain
    blocked_plan = conv.plan(x.shape, 1, plain_io=False)
    assert blocked_plan.source != blocked_plan.plain_in and blocked_plan.result != blocked_plan.to_plain.plain
    blocked = conv(x, 1, blocked=True)  # asks for a blocked output: the blocked plan
    assert blocked.layout == blocked_plan.result
    assert np.max(np.abs(np.asarray(blocked) - expected)) <= TOLERANCE


def test_small_plain_convolutions_read_and_write_plain_arrays_and_grouped_ones_stay_blocked():
    """Under PLAIN_CONV_WORK a convolution's plan takes and gives plain NCHW (no reorders around it);
    a depthwise one and a larger one keep the layouts oneDNN picks."""
    small, small_x, expected = make_case("3x3 s1 p1")
    plan = small.plan(small_x.shape, 1)
    assert plan.source == plan.plain_in and plan.result == plan.to_plain.plain
    depthwise, depthwise_x, _ = make_case("depthwise 3x3 s2")
    depthwise_plan = depthwise.plan(depthwise_x.shape, 1)
    assert depthwise_plan.source != depthwise_plan.plain_in
    big_x = np.repeat(small_x, 2, axis=0)
    big_plan = small.plan(big_x.shape, 1)
    assert big_plan.source != big_plan.plain_in
    # A blocked input (a grouped conv's output) is reordered into the small conv's plain input.
    grouped, grouped_x, grouped_expected = make_case("depthwise 3x3 s2")
    weight = (RNG.standard_normal((16, 32, 1, 1)) / 3).astype(np.float32)
    pointwise = onednn.Convolution(onednn.library(), weight, None, (1, 1), (1, 1), ((0, 0), (0, 0)), 1)
    got = pointwise(grouped(grouped_x, blocked=True))
    reference = float64_conv(grouped_expected.astype(np.float32), weight, None, (1, 1), (1, 1), ((0, 0),) * 2, 1)
    assert np.max(np.abs(got - reference)) <= TOLERANCE


def test_blocked_inputs_of_two_layouts_in_turn_are_each_read_right(layouts):
    """A plan remembers the last Blocked input's layout and the reorder from it: a producer of another
    layout (here a plain one) in between gets its own reorder, and the first producer's comes back."""
    from kuiper.onednn.primitives import Layout

    grouped, grouped_x, grouped_expected = make_case("depthwise 3x3 s2")
    weight = (RNG.standard_normal((16, 32, 1, 1)) / 3).astype(np.float32)
    pointwise = onednn.Convolution(onednn.library(), weight, None, (1, 1), (1, 1), ((0, 0), (0, 0)), 1)
    reference = float64_conv(grouped_expected.astype(np.float32), weight, None, (1, 1), (1, 1), ((0, 0),) * 2, 1)
    produced = np.asarray(grouped(grouped_x, blocked=True))
    plain = onednn.Blocked(onednn.library(), produced.shape, Layout.plain(onednn.library(), produced.shape),
                           np.ascontiguousarray(produced).reshape(-1))
    for given in (grouped(grouped_x, blocked=True), grouped(grouped_x, blocked=True), plain,
                  grouped(grouped_x, blocked=True)):
        assert np.max(np.abs(pointwise(given) - reference)) <= TOLERANCE


def test_a_refused_shape_is_asked_once(monkeypatch):
    conv, x, _ = make_case("3x3 s1 p1")
    calls = []

    def refuse(shape, threads, plain_io):
        calls.append(shape)
        raise onednn.OneDnnError("oneDNN convolution: unimplemented")

    monkeypatch.setattr(conv, "_make_plan", refuse)
    for _ in range(3):
        with pytest.raises(onednn.OneDnnError, match="unimplemented"):
            conv(x)
    assert calls == [x.shape]


def rank_case(rank: int):
    """A 4 -> 6 channel conv of kernel 3 in each of ``rank`` dims: (weight, bias, kernel_size text);
    skips where the oneDNN op classes are not registered."""
    from kuiper.numba_kernels import available as numba_available

    if not numba_available():
        pytest.skip("oneDNN convolutions come with the compiled CPU kernels (numba)")
    weight = (RNG.standard_normal((6, 4) + (3,) * rank) / 4).astype(np.float32)
    return weight, RNG.standard_normal(6).astype(np.float32), ",".join(["3"] * rank)


@pytest.mark.parametrize("rank", [1, 3])
def test_conv1d_and_conv3d_models_run_on_onednn(tmp_path, rank):
    from conftest import op_model

    weight, bias, sizes = rank_case(rank)
    stride = ",".join(["2"] * rank)
    pad = ",".join(["1"] * rank)
    model = op_model(tmp_path, f"nn.Conv{rank}d c 1 1 x y bias=True in_channels=4 out_channels=6 "
                     f"kernel_size=({sizes}) stride=({stride}) padding=({pad})", weights={"weight": weight, "bias": bias})
    assert "oneDNN" in model.steps[0].op.kernel_note
    x = RNG.standard_normal((2, 4) + (9,) * rank).astype(np.float32)
    expected = float64_conv(x, weight, bias, (2,) * rank, (1,) * rank, ((1, 1),) * rank, 1)
    assert np.max(np.abs(model(x) - expected)) <= TOLERANCE
    unbatched = model(x[0])  # the reference path, as PyTorch allows
    assert np.max(np.abs(unbatched - expected[0])) <= TOLERANCE


@pytest.mark.parametrize("rank", [1, 3])
def test_conv1d_and_conv3d_run_their_relu_as_a_post_op(tmp_path, rank):
    from conftest import write_model

    import kuiper

    weight, bias, sizes = rank_case(rank)
    text = (f"7767517\n4 3\npnnx.Input in0 0 1 x\n"
            f"nn.Conv{rank}d c 1 1 x h bias=True in_channels=4 out_channels=6 kernel_size=({sizes}) "
            f"@weight=({','.join(map(str, weight.shape))})f32 @bias=(6)f32\n"
            "nn.ReLU r 1 1 h y\npnnx.Output out0 1 0 y\n")
    param = write_model(tmp_path, text, {"c.weight": weight.tobytes(), "c.bias": bias.tobytes()})
    model = kuiper.load(param)
    assert [step.node.type for step in model.steps] == [f"Conv{rank}d"]  # the ReLU went into the conv
    assert "oneDNN" in model.steps[0].op.kernel_note and model.steps[0].op.native.post_ops == (("eltwise_relu", 0.0, 0.0),)
    x = RNG.standard_normal((2, 4) + (7,) * rank).astype(np.float32)
    expected = np.maximum(float64_conv(x, weight, bias, (1,) * rank, (1,) * rank, ((0, 0),) * rank, 1), 0)
    assert np.max(np.abs(model(x) - expected)) <= TOLERANCE
    assert np.max(np.abs(model(x[0]) - expected[0])) <= TOLERANCE  # unbatched: the reference conv, then the ReLU


def test_one_convolution_runs_in_several_threads_at_once():
    from concurrent.futures import ThreadPoolExecutor

    conv, x, expected = make_case("3x3 s1 p1")
    inputs = [x * scale for scale in (1.0, -2.0, 0.5, 3.0) * 4]
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda value: conv(value, threads=1), inputs))
    bias = conv.bias[1].astype(np.float64)[None, :, None, None]
    for value, result in zip(inputs, results):
        scale = value.flat[0] / x.flat[0]
        assert np.max(np.abs(result - ((expected - bias) * scale + bias))) <= 4 * TOLERANCE


def test_memory_objects_are_made_once_per_thread_and_pointed_at_each_calls_buffers(monkeypatch):
    """Later calls reuse the first call's memory objects (new buffers each time, right results); a second
    thread makes its own, so two threads never point one object at their buffers."""
    import threading

    conv, x, expected = make_case("3x3 s1 p1")
    library = conv.library
    made = []
    create = library.memory_create
    monkeypatch.setattr(library, "memory_create", lambda *args: made.append(args) or create(*args))
    conv(x, threads=1)  # the plan's first run makes them
    first = len(made)
    assert first >= 3  # source, weight, bias, output (and the reorders around it)
    for scale in (2.0, -1.0, 0.25):
        assert np.max(np.abs(conv(x * scale, threads=1) - conv(x, threads=1) * scale
                             - conv.bias[1][None, :, None, None] * (1 - scale))) <= 4 * TOLERANCE
    assert len(made) == first
    result = []
    worker = threading.Thread(target=lambda: result.append(conv(x, threads=1)))
    worker.start()
    worker.join()
    # Its own objects, no more than the first thread's: a weight reorder, where the first plan made one, is not
    # redone (this small conv's plan reads the given weight as it lies).
    assert first < len(made) <= 2 * first
    assert np.max(np.abs(result[0] - expected)) <= TOLERANCE


def test_a_primitive_refuses_an_argument_in_another_layout_than_it_was_made_for(monkeypatch):
    from kuiper.onednn.binding import ARG_BIAS, ARG_DST, ARG_SRC, ARG_WEIGHTS

    monkeypatch.setattr(onednn_conv, "PLAIN_CONV_WORK", 0)  # a blocked input layout, unlike plain x
    conv, x, _ = make_case("3x3 s1 p1")
    conv(x, threads=1)
    plan = conv.plan(x.shape, 1)
    assert plan.source != plan.plain_in  # oneDNN chose a blocked input layout
    arguments = {**plan.constants, ARG_SRC: (plan.plain_in, np.ascontiguousarray(x)),
                 ARG_DST: (plan.result, plan.result.empty())}
    assert set(arguments) == {ARG_SRC, ARG_WEIGHTS, ARG_DST, ARG_BIAS}
    with pytest.raises(onednn.OneDnnError, match="argument 1 arrives in another layout"):
        plan.convolution.run(arguments, 1)


def test_a_buffers_address_is_found_for_writable_read_only_and_empty_arrays():
    from kuiper.onednn.primitives import address

    writable = np.arange(6, dtype=np.float32)
    read_only = np.frombuffer(writable.tobytes(), np.float32)
    for array in (writable, read_only, np.empty(0, np.float32)):
        assert address(array) == array.ctypes.data


def test_the_size_budget_counts_the_channels_a_blocked_buffer_rounds_up_to(tmp_path, monkeypatch):
    """A one-channel conv's blocked buffers hold 16 channels: the budget is checked for those."""
    from conftest import op_model

    from kuiper.errors import SizeLimitError
    from kuiper.numba_kernels import available as numba_available

    if not numba_available():
        pytest.skip("oneDNN convolutions come with the compiled CPU kernels (numba)")
    weight = np.ones((1, 1, 3, 3), np.float32)
    model = op_model(tmp_path, "nn.Conv2d c 1 1 x y bias=False in_channels=1 out_channels=1 kernel_size=(3,3) "
                     "padding=(1,1)", weights={"weight": weight})
    x = np.ones((1, 1, 64, 64), np.float32)  # 16 KiB plain; 256 KiB (and the padded input more) blocked
    monkeypatch.setenv("KUIPER_MEMORY_BUDGET", str(1024 * 1024))
    assert model(x).shape == x.shape
    # The op keeps the shapes it works out per input shape, and still checks each call's budget.
    monkeypatch.setenv("KUIPER_MEMORY_BUDGET", str(100 * 1024))
    with pytest.raises(SizeLimitError, match="c"):
        model(x)


def test_a_small_convolution_whose_post_ops_the_gemm_kernel_lacks_takes_the_blocked_kernels():
    """oneDNN's GEMM convolution has no activation before a sum: on plain layouts it would fall to its
    reference loop (hundreds of times slower), so such a conv keeps the blocked layouts."""
    shape, out_channels, kernel, stride, dilation, pads, groups = CASES["3x3 s1 p1"]
    x = RNG.standard_normal(shape).astype(np.float32)
    weight = (RNG.standard_normal((out_channels, shape[1]) + kernel) / 3).astype(np.float32)
    relu = ("eltwise_relu", 0.0, 0.0)
    conv = onednn.Convolution(onednn.library(), weight, None, stride, dilation, pads, groups,
                              post_ops=(relu, ("sum",), relu))
    assert conv.work(x.shape) < onednn_conv.PLAIN_CONV_WORK
    assert not conv.implementation(x.shape, 1).startswith("ref")
    residual = RNG.standard_normal((shape[0], out_channels) + shape[2:]).astype(np.float32)
    expected = np.maximum(np.maximum(float64_conv(x, weight, None, stride, dilation, pads, groups), 0) + residual, 0)
    assert np.max(np.abs(conv(x, residual=residual) - expected)) <= TOLERANCE


@pytest.mark.parametrize("residual_blocked", [False, True], ids=["plain residual", "blocked residual"])
def test_a_residual_after_an_activation_keeps_the_channel_blocked_kernel(residual_blocked, monkeypatch):
    """YOLOv5's bottleneck, x + SiLU(conv(x)): oneDNN's direct nChw16c kernels take a sum post-op only first,
    so the sum is made a binary add with the residual as its operand, and the conv stays on nChw16c (no
    reorder in and out of channels-last around it).  The residual is read, never written."""
    monkeypatch.setattr(onednn_conv, "PLAIN_CONV_WORK", 0)  # the blocked kernels
    x = RNG.standard_normal((1, 32, 12, 12)).astype(np.float32)
    weight = (RNG.standard_normal((32, 32, 3, 3)) / 10).astype(np.float32)
    bias = RNG.standard_normal(32).astype(np.float32)
    library = onednn.library()
    conv = onednn.Convolution(library, weight, bias, (1, 1), (1, 1), ((1, 1), (1, 1)), 1,
                              post_ops=(("eltwise_swish", 1.0, 0.0), ("sum",)))
    plan = conv.plan(x.shape, 1, plain_io=False)
    assert plan.residual_argument is not None
    assert plan.result == Layout.tagged(library, (1, 32, 12, 12), onednn_conv.CHANNEL_BLOCKED_2D)
    assert not reference_or_gemm(plan.convolution.implementation())
    residual = RNG.standard_normal((1, 32, 12, 12)).astype(np.float32)
    given = residual
    if residual_blocked:  # a residual another convolution left blocked: the identity 1x1 conv of it
        identity = np.eye(32, dtype=np.float32).reshape(32, 32, 1, 1)
        given = onednn.Convolution(library, identity, None, (1, 1), (1, 1), ((0, 0), (0, 0)), 1)(residual, blocked=True)
    convolved = float64_conv(x, weight, bias, (1, 1), (1, 1), ((1, 1), (1, 1)), 1)
    expected = convolved / (1 + np.exp(-convolved)) + residual
    got = conv(x, 1, residual=given, blocked=True)
    assert np.max(np.abs(got.plain() - expected)) <= TOLERANCE
    np.testing.assert_array_equal(np.asarray(given), residual)


def test_memory_objects_are_repointed_only_at_buffers_that_changed(monkeypatch):
    """The weight's and bias's memory objects keep pointing at the same arrays; an input array that
    comes back is not re-pointed either, and an in-place change of it is still read."""
    from kuiper.onednn.binding import ARG_BIAS, ARG_DST, ARG_SRC, ARG_WEIGHTS

    conv, x, expected = make_case("3x3 s1 p1")
    plan = conv.plan(x.shape, 1)
    assert plan.source == plan.plain_in and plan.result == plan.to_plain.plain  # small: plain in and out
    source, output = np.ascontiguousarray(x), plan.result.empty()
    arguments = {**plan.constants, ARG_SRC: (plan.source, source), ARG_DST: (plan.result, output)}
    assert set(arguments) == {ARG_SRC, ARG_WEIGHTS, ARG_DST, ARG_BIAS}
    library = conv.library
    pointed = []
    set_handle = library.memory_set_data_handle
    monkeypatch.setattr(library, "memory_set_data_handle", lambda *args: pointed.append(args) or set_handle(*args))
    plan.convolution.run(arguments, 1)
    first = len(pointed)
    assert first >= 4  # source, weight, bias, output (and a scratchpad) the first time
    source *= -1.0  # the same array, new values
    plan.convolution.run(arguments, 1)
    assert len(pointed) == first  # nothing re-pointed
    bias = conv.bias[1].astype(np.float64)[None, :, None, None]
    assert np.max(np.abs(output.reshape(plan.out_shape) - (bias - (expected - bias)))) <= TOLERANCE
    arguments[ARG_DST] = (plan.result, plan.result.empty())  # a fresh output: only it is re-pointed
    plan.convolution.run(arguments, 1)
    assert len(pointed) == first + 1


def test_a_primitive_does_not_keep_a_calls_input_or_output_alive():
    """Memory objects remember what they point at weakly: a model's activations are freed after their
    last use, not kept until the conv's next call."""
    import weakref

    conv, x, _ = make_case("3x3 s1 p1")
    source = x.copy()
    result = conv(source, threads=1)
    probes = [weakref.ref(source), weakref.ref(result)]
    del source, result
    assert [probe() for probe in probes] == [None, None]


# -- a weight that arrives with the call (JAX passes weights as arguments) ------------------


@pytest.mark.parametrize("name", ["3x3 s1 p1", "depthwise 3x3 s2", "grouped, dilated, unequal pads", "1-D, k5 s2"])
def test_a_calls_weight_replaces_the_one_the_convolution_was_made_with(name, layouts):
    shape, out_channels, kernel, stride, dilation, pads, groups = CASES[name]
    weight_shape = (out_channels, shape[1] // groups) + kernel
    conv = onednn.Convolution(onednn.library(), np.zeros(weight_shape, np.float32), None, stride, dilation, pads,
                              groups)
    x = RNG.standard_normal(shape).astype(np.float32)
    for _ in range(2):  # a second weight on the same plan: nothing of the first may stay
        weight = (RNG.standard_normal(weight_shape) / 3).astype(np.float32)
        expected = float64_conv(x, weight, None, stride, dilation, pads, groups)
        assert np.max(np.abs(conv(x, weight=weight) - expected)) <= TOLERANCE
    assert np.all(conv(x) == 0)  # without one, the weight it was made with


def test_a_calls_weight_of_another_shape_or_dtype_is_refused():
    conv = onednn.Convolution(onednn.library(), np.zeros((4, 2, 3, 3), np.float32), None, (1, 1), (1, 1),
                              ((1, 1), (1, 1)), 1)
    x = np.ones((1, 2, 5, 5), np.float32)
    with pytest.raises(onednn.OneDnnError, match=r"float32 of shape \(4, 2, 3, 3\)"):
        conv(x, weight=np.ones((4, 2, 1, 1), np.float32))
    with pytest.raises(onednn.OneDnnError, match="float32"):
        conv(x, weight=np.ones((4, 2, 3, 3), np.float64))


def test_a_calls_bias_is_added_in_the_kernel_as_a_pass_after_it_would_add_it():
    shape, out_channels, kernel, stride, dilation, pads, groups = CASES["3x3 s1 p1"]
    weight_shape = (out_channels, shape[1] // groups) + kernel
    zeros = np.zeros(out_channels, np.float32)
    with_bias = onednn.Convolution(onednn.library(), np.zeros(weight_shape, np.float32), zeros, stride, dilation,
                                   pads, groups)
    without = onednn.Convolution(onednn.library(), np.zeros(weight_shape, np.float32), None, stride, dilation,
                                 pads, groups)
    x = RNG.standard_normal(shape).astype(np.float32)
    for _ in range(2):  # a second bias on the same plan: nothing of the first may stay
        weight = (RNG.standard_normal(weight_shape) / 3).astype(np.float32)
        bias = RNG.standard_normal(out_channels).astype(np.float32)
        added_after = without(x, weight=weight) + bias.reshape(1, -1, 1, 1)
        np.testing.assert_array_equal(with_bias(x, weight=weight, bias=bias), added_after)  # the same float32 sums
    with pytest.raises(onednn.OneDnnError, match="made with a bias"):
        without(x, weight=weight, bias=bias)
    with pytest.raises(onednn.OneDnnError, match=r"float32 of shape \(24,\)"):
        with_bias(x, weight=weight, bias=np.ones(3, np.float32))


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_f_conv_with_the_weight_as_an_input_runs_on_onednn_and_follows_each_calls_weight(tmp_path, rank,
                                                                                        monkeypatch):
    from conftest import op_model

    from kuiper.numba_kernels import available as compiled_available

    if not compiled_available():
        pytest.skip("oneDNN convolutions come with the compiled CPU kernels (numba)")
    calls = []
    run_native, make_sequence = onednn.Convolution.__call__, onednn.Convolution.weight_input_sequence_for
    monkeypatch.setattr(onednn.Convolution, "__call__",
                        lambda self, *a, **k: calls.append(k.get("weight") is not None) or run_native(self, *a, **k))

    def sequence_for(self, *args, **kwargs):  # the call as one sequence, the weight reordered inside it
        made = make_sequence(self, *args, **kwargs)
        if made is None:
            return None
        return lambda *inputs: calls.append("sequence with the call's weight") or made(*inputs)

    monkeypatch.setattr(onednn.Convolution, "weight_input_sequence_for", sequence_for)
    dims = ",".join(["1"] * rank)
    model = op_model(tmp_path, f"F.conv{rank}d c 3 1 x w b y dilation=({dims}) groups=2 padding=({dims}) "
                     f"stride=({','.join(['2'] * rank)}) $input=x $weight=w $bias=b", inputs=("x", "w", "b"))
    x = RNG.standard_normal((2, 4) + (7,) * rank).astype(np.float32)
    for _ in range(2):
        weight = (RNG.standard_normal((6, 2) + (3,) * rank) / 3).astype(np.float32)
        bias = RNG.standard_normal(6).astype(np.float32)
        expected = float64_conv(x, weight, bias, (2,) * rank, (1,) * rank, ((1, 1),) * rank, 2)
        assert np.max(np.abs(model(x, weight, bias) - expected)) <= TOLERANCE
    # oneDNN ran both, each with its call's weight: the second as a sequence where its step is specialized
    assert calls in ([True, True], [True, "sequence with the call's weight"])


def test_a_weight_input_conv_keeps_nan_and_inf_where_ieee_754_puts_them(tmp_path):
    from conftest import op_model

    line = "F.conv2d c 2 1 x w y bias=None dilation=(1,1) groups=1 padding=(1,1) stride=(1,1) $input=x $weight=w"
    model = op_model(tmp_path, line, inputs=("x", "w"))
    x = RNG.standard_normal((1, 16, 8, 8)).astype(np.float32)
    x[0, 3, 2, 2], x[0, 5, 6, 6] = np.nan, np.inf
    weight = np.abs(RNG.standard_normal((16, 16, 3, 3))).astype(np.float32)  # positive: inf stays +inf
    got = model(x, weight)
    assert np.isnan(got[0, :, 1:4, 1:4]).all() and np.isposinf(got[0, :, 5:8, 5:8]).all()
    assert np.isfinite(got[0, :, :, :1]).all()  # columns no special value reaches


@pytest.mark.parametrize("name", ["3x3 s1 p1", "depthwise 3x3 s2", "grouped, dilated, unequal pads",
                                  "7x7 s2 p3, 3 channels (a stem)"])
def test_transposed_views_are_read_by_their_strides(name, layouts, monkeypatch):
    """An NHWC input seen as NCHW and an HWIO weight seen as OIHW (as a JAX program hands them over) give
    the row-major copies' result, and are not copied row-major first."""
    shape, out_channels, kernel, stride, dilation, pads, groups = CASES[name]
    weight_shape = (out_channels, shape[1] // groups) + kernel
    conv = onednn.Convolution(onednn.library(), np.zeros(weight_shape, np.float32), None, stride, dilation, pads,
                              groups)
    x = np.transpose(RNG.standard_normal((shape[0], *shape[2:], shape[1])).astype(np.float32), (0, 3, 1, 2))
    weight = np.transpose((RNG.standard_normal((*kernel, weight_shape[1], out_channels)) / 3).astype(np.float32),
                          (3, 2, 0, 1))
    assert not x.flags.c_contiguous and not weight.flags.c_contiguous
    expected = float64_conv(x, weight, None, stride, dilation, pads, groups)
    copies = []
    contiguous = np.ascontiguousarray
    monkeypatch.setattr(onednn_conv.np, "ascontiguousarray",
                        lambda a, *args, **kw: copies.append(a.shape) or contiguous(a, *args, **kw))
    assert np.max(np.abs(conv(x, weight=weight) - expected)) <= TOLERANCE
    assert copies == []


CHANNEL_BLOCK_CASES = {
    # name: (input shape, out channels, kernel, stride, groups, whether the output maps take nChw16c)
    "1x1, 24 -> 16 channels (a block and a half, padded)": ((2, 24, 12, 12), 16, 1, 1, 1, True),
    "depthwise 3x3": ((1, 32, 12, 12), 32, 3, 1, 32, True),
    "3x3, 3 -> 16 channels (a stem: its input keeps a layout oneDNN picks)": ((1, 3, 20, 20), 16, 3, 1, 1, True),
    "3x3 stride 2 onto 6x6 maps (below CHANNEL_BLOCK_MIN_POSITIONS)": ((1, 32, 12, 12), 32, 3, 2, 1, False),
}


@pytest.mark.parametrize("name", CHANNEL_BLOCK_CASES)
def test_large_maps_take_channels_in_blocks_of_16_and_small_ones_the_layout_onednn_picks(name):
    shape, out_channels, k, s, groups, blocked = CHANNEL_BLOCK_CASES[name]
    library = onednn.library()
    weight = (RNG.standard_normal((out_channels, shape[1] // groups, k, k)) / 3).astype(np.float32)
    bias = RNG.standard_normal(out_channels).astype(np.float32)
    pads = ((k // 2, k // 2),) * 2
    conv = onednn.Convolution(library, weight, bias, (s, s), (1, 1), pads, groups)
    plan = conv.plan(shape, 1, plain_io=False)
    nchw16c = onednn_conv.Layout.tagged(library, plan.out_shape, onednn_conv.CHANNEL_BLOCKED_2D)
    assert (plan.result == nchw16c) == blocked
    assert (plan.source == onednn_conv.Layout.tagged(library, shape, onednn_conv.CHANNEL_BLOCKED_2D)) == (
        blocked and shape[1] >= onednn_conv.CHANNEL_BLOCK)
    x = RNG.standard_normal(shape).astype(np.float32)
    expected = float64_conv(x, weight, bias, (s, s), (1, 1), pads, groups)
    out = conv(x, 1, blocked=True)
    assert np.max(np.abs(np.asarray(out) - expected)) <= TOLERANCE
    # the next conv reads it in its layout, or reorders it into its own (a 6x6 map's conv: oneDNN's pick)
    follow_weight = (RNG.standard_normal((16, out_channels, 3, 3)) / 8).astype(np.float32)
    follow = onednn.Convolution(library, follow_weight, None, (2, 2), (1, 1), ((1, 1), (1, 1)), 1)
    reference = float64_conv(expected.astype(np.float32), follow_weight, None, (2, 2), (1, 1), ((1, 1),) * 2, 1)
    assert np.max(np.abs(follow(out, 1) - reference)) <= 4 * TOLERANCE


def test_a_grouped_conv_whose_channel_blocked_kernel_is_a_reference_one_lets_onednn_pick():
    """Two groups of 12 channels: on nChw16c oneDNN 3.2 has only its reference loop, ~100x slower."""
    library = onednn.library()
    weight = (RNG.standard_normal((24, 12, 3, 3)) / 3).astype(np.float32)
    conv = onednn.Convolution(library, weight, None, (1, 1), (1, 1), ((1, 1), (1, 1)), 2)
    shape = (1, 24, 16, 16)
    nchw16c = onednn_conv.Layout.tagged(library, shape, onednn_conv.CHANNEL_BLOCKED_2D)
    forced = conv._primitive(shape, nchw16c, nchw16c, [1, 1])
    assert forced.implementation().startswith("ref")  # what the fallback is for
    plan = conv.plan(shape, 1, plain_io=False)
    assert not plan.convolution.implementation().startswith(("ref", "gemm")) and plan.source != nchw16c
    x = RNG.standard_normal(shape).astype(np.float32)
    expected = float64_conv(x, weight, None, (1, 1), (1, 1), ((1, 1), (1, 1)), 2)
    assert np.max(np.abs(np.asarray(conv(x, 1, blocked=True)) - expected)) <= TOLERANCE


def test_a_batch_of_one_seen_through_a_transpose_is_read_as_channels_last():
    """A (1, C, H, W) view of a (1, H*W, C) array (PVT-v2's Mix-FFN) keeps its batch stride from before the
    transpose (C floats, the same as W's): the layout handed to oneDNN gives the batch its channels-last
    stride, so the reorder reads a format oneDNN knows (acdb), and the conv's result is the copy's."""
    from kuiper.onednn.primitives import dense_order, in_strides

    tokens = RNG.standard_normal((1, 6 * 5, 32)).astype(np.float32)
    view = np.reshape(np.swapaxes(tokens, 1, 2), (1, 32, 6, 5))
    assert view.strides[0] == view.strides[3]  # the tie that hid the channels-last order
    assert dense_order(view) == (0, 2, 3, 1)
    layouts = {}
    layout, buffer = in_strides(onednn.library(), view, layouts)
    assert list(layouts) == [((1, 32, 6, 5), (32 * 6 * 5, 1, 5 * 32, 32))]  # acdb's strides, in floats
    assert buffer.flags.c_contiguous and np.shares_memory(buffer, tokens)
    conv = onednn.Convolution(onednn.library(), (RNG.standard_normal((32, 1, 3, 3)) / 3).astype(np.float32), None,
                              (1, 1), (1, 1), ((1, 1), (1, 1)), 32)
    np.testing.assert_array_equal(conv(view), conv(np.ascontiguousarray(view)))


def test_the_guard_reads_a_transposed_input_in_memory_order(monkeypatch):
    """The norm that guards a conv's special values reads a transposed view in memory order, not as a
    gather across it (the same sum up to rounding)."""
    pytest.importorskip("numba")
    from kuiper.numba_kernels import conv_native

    view = np.reshape(np.swapaxes(RNG.standard_normal((1, 56 * 56, 64)).astype(np.float32), 1, 2), (1, 64, 56, 56))
    read = []
    vdot = np.vdot
    monkeypatch.setattr(np, "vdot", lambda a, b: read.append(a.flags.c_contiguous) or vdot(a, b))
    norm = conv_native.norm_of(view)
    assert read == [True]
    assert norm == pytest.approx(float(np.sqrt(np.sum(view.astype(np.float64) ** 2))), rel=1e-5)


def test_the_guard_reads_a_reversed_view_forwards(monkeypatch):
    """JAX's flipped kernel of a transposed conv arrives as a view with negative strides: the guard's norm reads
    it forwards in memory order, not as a gather (the same sum up to rounding)."""
    pytest.importorskip("numba")
    from kuiper.numba_kernels import conv_native

    kernel = RNG.standard_normal((64, 32, 3, 3)).astype(np.float32)
    flipped = np.swapaxes(kernel, 0, 1)[:, :, ::-1, ::-1]
    read = []
    vdot = np.vdot
    monkeypatch.setattr(np, "vdot", lambda a, b: read.append(np.shares_memory(a, kernel) and a.flags.c_contiguous)
                        or vdot(a, b))
    norm = conv_native.norm_of(flipped)
    assert read == [True]
    assert norm == pytest.approx(float(np.sqrt(np.sum(kernel.astype(np.float64) ** 2))), rel=1e-5)


def test_a_reversed_view_is_copied_in_memory_order():
    """The copy holds the view's values, as a permuted view of a C-contiguous array whose axes follow the
    original's memory order (in_strides then reads it without another copy)."""
    from kuiper.onednn.primitives import copied_in_memory_order, dense_order

    hwio = RNG.standard_normal((2, 2, 12, 8)).astype(np.float32)
    view = np.transpose(hwio, (2, 3, 0, 1))[:, :, ::-1, ::-1]  # JAX's kernel as (in, out, kh, kw), flipped
    copy = copied_in_memory_order(view)
    np.testing.assert_array_equal(copy, view)
    assert not np.shares_memory(copy, hwio) and dense_order(copy) == (2, 3, 0, 1)
