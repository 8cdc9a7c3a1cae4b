"""Concatenation on oneDNN: exact joins of plain and blocked tensors, and a C3-style block that stays blocked."""

from __future__ import annotations

import numpy as np
import pytest

import kuiper
from kuiper import onednn

from conftest import write_model

pytestmark = pytest.mark.skipif(not onednn.available(), reason=onednn.describe())

RNG = np.random.default_rng(3)


def _blocked(x):
    """x in oneDNN's blocked layout: the output of an identity depthwise 1x1 convolution asked to stay
    blocked (a depthwise one, because small plain convolutions run on plain layouts)."""
    channels = x.shape[1]
    identity = np.ones((channels, 1, 1, 1), np.float32)
    return onednn.Convolution(onednn.library(), identity, None, (1, 1), (1, 1), ((0, 0), (0, 0)), channels)(
        x, blocked=True)


@pytest.mark.parametrize("kinds", [("plain", "plain"), ("blocked", "plain"), ("blocked", "blocked")])
def test_joins_are_exact_whatever_the_layouts(kinds):
    a = RNG.standard_normal((2, 16, 5, 7)).astype(np.float32)
    b = RNG.standard_normal((2, 24, 5, 7)).astype(np.float32)
    inputs = [_blocked(t) if kind == "blocked" else t for t, kind in zip((a, b), kinds)]
    join = onednn.Concatenation(onednn.library(), 1)
    np.testing.assert_array_equal(join(inputs), np.concatenate([a, b], axis=1))
    kept = join(inputs, blocked=True)
    assert isinstance(kept, onednn.Blocked) and kept.shape == (2, 40, 5, 7)
    np.testing.assert_array_equal(np.asarray(kept), np.concatenate([a, b], axis=1))


@pytest.mark.parametrize("order", ["plain first", "blocked first"])
def test_a_plain_input_beside_a_channel_blocked_one_joins_in_the_blocked_layout(order):
    """YOLO's neck: an upsampled plain map joined with a conv's nChw16c output.  In two layouts oneDNN has
    only its reference join (30-70 ms at batch 8); the plain input is reordered into nChw16c first, and the
    join is oneDNN's fast one, in the same numbers; as a sequence's member too."""
    from kuiper.onednn.sequence import SequenceBuilder

    a = RNG.standard_normal((2, 32, 12, 12)).astype(np.float32)
    b = RNG.standard_normal((2, 16, 12, 12)).astype(np.float32)
    blocked = _blocked(b)
    assert blocked.layout == onednn.primitives.Layout.tagged(onednn.library(), b.shape, "aBcd16b")
    inputs = [a, blocked] if order == "plain first" else [blocked, a]
    want = np.concatenate([a, b] if order == "plain first" else [b, a], axis=1)
    join = onednn.Concatenation(onednn.library(), 1)
    np.testing.assert_array_equal(join(inputs, 2), want)
    (plan,) = join.plans
    assert not plan.concat.implementation().startswith("ref"), plan.concat.implementation()
    builder = SequenceBuilder(onednn.library())
    values = [(builder.input(), getattr(t, "layout", None), t.shape) for t in inputs]
    out, _ = join.emit(builder, values, 2)
    (flat,) = builder.build([out])(*[getattr(t, "buffer", t) for t in inputs])
    np.testing.assert_array_equal(flat.reshape(want.shape), want)


def test_the_copy_to_plain_is_made_once_per_plan_not_per_call(monkeypatch):
    from kuiper.onednn import blocked as blocked_module

    a = RNG.standard_normal((1, 16, 4, 4)).astype(np.float32)
    inputs = [_blocked(a), _blocked(a)]
    made = []
    make = blocked_module.reorder
    monkeypatch.setattr(blocked_module, "reorder", lambda *args: made.append(args) or make(*args))
    join = onednn.Concatenation(onednn.library(), 1)
    for _ in range(3):
        np.testing.assert_array_equal(join(inputs), np.concatenate([a, a], axis=1))
    assert len(made) == 1  # the plan's reorder from the blocked result, made on the first call only


# x -> c1 (1x1) -> c2 (3x3) \
#   -> c3 (1x1) ------------ cat -> c4 (1x1) -> output
C3_BLOCK = """7767517
7 6
pnnx.Input in0 0 1 x
nn.Conv2d c1 1 1 x a bias=False kernel_size=(1,1) in_channels=8 out_channels=16 @weight=(16,8,1,1)f32
nn.Conv2d c2 1 1 a b bias=False kernel_size=(3,3) in_channels=16 out_channels=16 padding=(1,1) @weight=(16,16,3,3)f32
nn.Conv2d c3 1 1 x c bias=False kernel_size=(1,1) in_channels=8 out_channels=8 @weight=(8,8,1,1)f32
torch.cat cat 2 1 b c d dim=1
nn.Conv2d c4 1 1 d e bias=False kernel_size=(1,1) in_channels=24 out_channels=8 @weight=(8,24,1,1)f32
pnnx.Output out 1 0 e
"""
WEIGHTS = {name: (RNG.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype(np.float32)
           for name, shape in (("c1", (16, 8, 1, 1)), ("c2", (16, 16, 3, 3)), ("c3", (8, 8, 1, 1)), ("c4", (8, 24, 1, 1)))}


def _conv(x, weight, pad=0):
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    kh, kw = weight.shape[2:]
    height, width = x.shape[2] - kh + 1, x.shape[3] - kw + 1
    return sum(np.einsum("oc,nchw->nohw", weight[:, :, i, j].astype(np.float64), x[:, :, i:i + height, j:j + width])
               for i in range(kh) for j in range(kw))


def test_a_c3_block_joins_its_branches_in_onednn_layout(tmp_path):
    from kuiper.numba_kernels import available as numba_available

    if not numba_available():
        pytest.skip("oneDNN ops come with the compiled CPU kernels (numba)")
    # Without providers: c1 -> c2 is a small conv chain, which would run as one compiled call in plain layout.
    model = kuiper.load(write_model(tmp_path, C3_BLOCK, {f"{k}.weight": v.tobytes() for k, v in WEIGHTS.items()}),
                        providers=False)
    layouts = {step.node.name: step.op.output_layout for step in model.steps}
    assert layouts == {"c1": "onednn", "c2": "onednn", "c3": "onednn", "cat": "onednn", "c4": None}
    x = RNG.standard_normal((2, 8, 9, 11)).astype(np.float32)
    x64 = x.astype(np.float64)
    joined = np.concatenate([_conv(_conv(x64, WEIGHTS["c1"]), WEIGHTS["c2"], pad=1), _conv(x64, WEIGHTS["c3"])], axis=1)
    expected = _conv(joined, WEIGHTS["c4"])
    got = model(x)
    assert isinstance(got, np.ndarray) and np.max(np.abs(got - expected)) <= 2e-5


def test_a_c3_block_runs_as_one_sequence_with_its_join(tmp_path, monkeypatch):
    """Where the convs are oneDNN's (not the small compiled chain), the block is one run of oneDNN layers
    (conv_sequence.py), the join a member: the same numbers as op by op, call after call."""
    from kuiper.numba_kernels import available as numba_available

    if not numba_available():
        pytest.skip("oneDNN ops come with the compiled CPU kernels (numba)")
    from kuiper.numba_kernels import conv_chain

    monkeypatch.setattr(conv_chain.ConvChainProvider, "claim", lambda self, units, context: [])  # c1, c2 on oneDNN
    param = write_model(tmp_path, C3_BLOCK, {f"{k}.weight": v.tobytes() for k, v in WEIGHTS.items()})
    model, op_by_op = kuiper.load(param), kuiper.load(param, providers=False)
    (step,) = model.steps
    assert [unit.node.name for unit in step.op.members] == ["c1", "c2", "c3", "cat", "c4"]
    x = RNG.standard_normal((2, 8, 9, 11)).astype(np.float32)
    want = op_by_op(x)
    for _ in range(3):
        np.testing.assert_array_equal(model(x), want)
    cat = step.op.members[3].op
    assert cat.bound_through([(2, 16, 9, 11), (2, 8, 9, 11)], [3.0, 4.0]) == 5.0  # the joined norm


def test_a_model_with_onednn_ops_runs_blas_on_one_thread_and_others_keep_the_default(tmp_path, monkeypatch):
    """oneDNN's pool owns the cores: OpenBLAS's spinning worker would take the one its next op needs."""
    from threadpoolctl import threadpool_info

    from kuiper.numba_kernels import available as numba_available

    if not numba_available():
        pytest.skip("oneDNN ops come with the compiled CPU kernels (numba)")
    weights = {f"{k}.weight": v.tobytes() for k, v in WEIGHTS.items()}
    seen = []

    class BlasThreads:
        def before_step(self, node, inputs):
            seen.append({pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"})

        def after_step(self, node, inputs, outputs):
            pass

    x = RNG.standard_normal((1, 8, 6, 6)).astype(np.float32)
    on = kuiper.load(write_model(tmp_path, C3_BLOCK, weights), threads=2)
    assert on.blas_threads == 1
    on(x)  # the first call imports numba, which imports SciPy's OpenBLAS where SciPy is installed: capped from here on
    on(x, observer=BlasThreads())
    assert seen and all(counts == {1} for counts in seen)
    monkeypatch.setattr(onednn, "library", lambda: None)
    off = kuiper.load(write_model(tmp_path, C3_BLOCK, weights, name="off"), threads=2)
    assert off.blas_threads is None


def test_plain_inputs_to_a_plain_reader_take_the_reference_join(tmp_path, monkeypatch):
    """Only joins that involve oneDNN's layout go to oneDNN: plain ones stay one np.concatenate."""
    from conftest import op_model

    from kuiper.numba_kernels import available as numba_available

    if not numba_available():
        pytest.skip("oneDNN ops come with the compiled CPU kernels (numba)")
    model = op_model(tmp_path, "torch.cat cat 2 1 a b y dim=1", inputs=("a", "b"))
    assert model.steps[0].op.native is not None
    calls = []
    monkeypatch.setattr(onednn.Concatenation, "__call__", lambda *args, **kwargs: calls.append(args))
    a = RNG.standard_normal((1, 3, 4, 4)).astype(np.float32)
    b = RNG.standard_normal((1, 5, 4, 4)).astype(np.float32)
    np.testing.assert_array_equal(model(a, b), np.concatenate([a, b], axis=1))
    assert not calls
    monkeypatch.undo()
    plain = onednn.Concatenation(onednn.library(), 1)([a, b])
    assert isinstance(plain, np.ndarray)
    np.testing.assert_array_equal(plain, np.concatenate([a, b], axis=1))
