"""A concat of reshaped concats is one ConcatNested op (kuiper/graph/nested_joins.py), and on NumPy each
piece is copied once into its place in the output (kuiper/numba_kernels/concat_nested.py).

YOLO's detect head joins xy, wh and the scores per level, reshapes and joins the levels.  The values
must be the ops' as written, bit for bit: against ``np.concatenate`` by hand, the model built without
the pass, the reference op, and the fixture's PyTorch outputs; a join the pass must not take (another
reader, a model output, a shape given as an input) stays as written.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

import kuiper
from kuiper.errors import ShapeError
from kuiper.graph.nested_joins import join_nested_concats
from kuiper.ops.concat import ConcatNested

from conftest import MODELS, assert_close_to_pytorch, param_text, pnnx_node, reference_batches, write_model

BUILD = sys.modules["kuiper.graph.build"]
RNG = np.random.default_rng(11)


def _load(tmp_path, body, **options):
    return kuiper.load(write_model(tmp_path, param_text(body), name=f"m{abs(hash(body)) % 10**8}"), **options)


def _without_pass(monkeypatch, path):
    with monkeypatch.context() as patch:
        patch.setattr(BUILD, "join_nested_concats", lambda order, outputs: order)
        return kuiper.load(path)


def _types(model) -> list[str]:
    return [step.node.type for step in model.steps]


def _bits_equal(a, b) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


# A head in small: per level, a permuted view's scores joined after two small pieces on the last
# axis, the level reshaped to rows, the levels joined along the rows; plus an operand taken as it is.
HEAD = """
pnnx.Input in0 0 1 p0 #p0=(2,3,9,4,5)f32
pnnx.Input in1 0 1 p1 #p1=(2,3,9,2,3)f32
pnnx.Input in2 0 1 extra #extra=(2,7,9)f32
Tensor.permute t0 1 1 p0 q0 dims=(0,1,3,4,2)
Tensor.permute t1 1 1 p1 q1 dims=(0,1,3,4,2)
torch.split s0 1 3 q0 a0 b0 c0 dim=4 split_size_or_sections=(2,2,5)
torch.split s1 1 3 q1 a1 b1 c1 dim=4 split_size_or_sections=(2,2,5)
pnnx.Expression e0 1 1 a0 x0 expr=mul(@0,2)
pnnx.Expression e1 1 1 b1 x1 expr=add(@0,1)
torch.cat j0 3 1 x0 b0 c0 k0 dim=4
torch.cat j1 3 1 a1 x1 c1 k1 dim=-1
Tensor.reshape r0 1 1 k0 v0 shape=(-1,60,9)
Tensor.reshape r1 1 1 k1 v1 shape=(2,18,9)
torch.cat out 3 1 v0 v1 extra y dim=1
pnnx.Output o 1 0 y
"""


def _head_inputs():
    return [RNG.standard_normal(shape).astype(np.float32) for shape in ((2, 3, 9, 4, 5), (2, 3, 9, 2, 3), (2, 7, 9))]


def _head_by_hand(p0, p1, extra):
    q0, q1 = p0.transpose(0, 1, 3, 4, 2), p1.transpose(0, 1, 3, 4, 2)
    k0 = np.concatenate((q0[..., :2] * np.float32(2), q0[..., 2:4], q0[..., 4:]), axis=4)
    k1 = np.concatenate((q1[..., :2], q1[..., 2:4] + np.float32(1), q1[..., 4:]), axis=-1)
    return np.concatenate((k0.reshape(-1, 60, 9), k1.reshape(2, 18, 9), extra), axis=1)


def test_a_concat_of_reshaped_concats_is_one_op_with_the_values_of_the_ops_as_written(tmp_path, monkeypatch):
    model = _load(tmp_path, HEAD)
    assert _types(model).count("ConcatNested") == 1 and "Concat" not in _types(model)
    inputs = _head_inputs()
    inputs[0][0, 1, 2, 3, 4] = np.nan  # special values are copied, never computed
    inputs[1][1, 2, 8, 1, 2] = -np.inf
    got = model(*inputs)
    assert got.flags.c_contiguous
    assert _bits_equal(got, _head_by_hand(*inputs))
    assert _bits_equal(model(*inputs), got)  # a warm call: the same
    without = _without_pass(monkeypatch, tmp_path / next(tmp_path.glob("*.param")).name)
    assert "ConcatNested" not in _types(without)
    assert _bits_equal(without(*inputs), got)
    assert _bits_equal(_load(tmp_path, HEAD, fuse=False)(*inputs), got)


def test_the_reference_op_computes_what_the_numpy_kernel_computes(tmp_path):
    model = _load(tmp_path, HEAD)
    step = next(step for step in model.steps if step.node.type == "ConcatNested")
    assert type(step.op) is not ConcatNested  # the NumPy kernel runs it
    inputs = _head_inputs()
    values = {}

    class Recorder(kuiper.graph.plan.StepObserver):
        def before_step(self, node, step_inputs):
            if node.type == "ConcatNested":
                values["inputs"] = list(step_inputs)

    got = model(*inputs, observer=Recorder())
    assert _bits_equal(ConcatNested.forward(step.op, *values["inputs"]), got)


@pytest.mark.parametrize("change, stays", [
    ("pnnx.Output o 1 0 y", None),  # the pass takes the head: checked above; here the declines
    ("pnnx.Output o 2 0 y k0", "v0"),  # a level's join is a model output: its reshape is joined as it is
    ("pnnx.Output o 2 0 y v1", "v1"),  # a level's reshape is a model output
])
def test_a_join_read_elsewhere_stays_as_written(tmp_path, change, stays):
    """``stays``: the outer join's operand that must be taken as it is."""
    body = HEAD.replace("pnnx.Output o 1 0 y", change)
    model = _load(tmp_path, body)
    inputs = _head_inputs()
    outputs = model(*inputs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    assert _bits_equal(outputs[0], _head_by_hand(*inputs))
    taken = [step.node for step in model.steps if step.node.type == "ConcatNested"]
    assert len(taken) == 1
    if stays is not None:
        assert stays in taken[0].inputs and list(taken[0].params["pieces"]).count(1) == 2


def test_the_pass_leaves_joins_with_other_readers_or_shapes_as_inputs():
    def cat(name, inputs, output, dim):
        return pnnx_node("torch.cat", name, inputs, [output], {"dim": dim})

    inner = cat("inner", ["a", "b"], "k", 1)
    reshape = pnnx_node("Tensor.reshape", "r", ["k"], ["v"], {"shape": [2, -1]})
    outer = cat("outer", ["v", "c"], "y", 0)
    rewritten = join_nested_concats([inner, reshape, outer], ["y"])
    assert [node.type for node in rewritten] == ["ConcatNested"]
    assert rewritten[0].inputs == ["a", "b", "c"] and rewritten[0].params["ranks"] == [2, -1]
    assert rewritten[0].params["shapes"] == [2, -1] and rewritten[0].params["pieces"] == [2, 1]
    reader = pnnx_node("F.relu", "relu", ["k"], ["z"])  # a second reader of the inner join
    assert join_nested_concats([inner, reshape, reader, outer], ["y", "z"]) == [inner, reshape, reader, outer]
    shaped = pnnx_node("Tensor.reshape", "r", ["k", "s"], ["v"], input_keys=[None, "shape"])  # shape as input
    assert join_nested_concats([inner, shaped, outer], ["y"]) == [inner, shaped, outer]
    direct = cat("outer", ["k", "c"], "y", 0)  # a concat of a concat, no reshape between: one op too
    assert [node.params["ranks"] for node in join_nested_concats([inner, direct], ["y"])] == [[-1, -1]]


def test_a_region_that_is_no_view_of_the_inner_shape_gets_the_inner_join_copied(tmp_path):
    # The levels are joined along the last dim: a level's region out[:, :, 0:2] cannot be viewed as
    # (2, 6), the inner join's shape, so the kernel joins it first and copies it in.
    body = """
    pnnx.Input in0 0 1 a #a=(2,3)f32
    pnnx.Input in1 0 1 b #b=(2,3)f32
    pnnx.Input in2 0 1 c #c=(2,3,2)f32
    torch.cat j 2 1 a b k dim=1
    Tensor.reshape r 1 1 k v shape=(2,3,2)
    torch.cat out 2 1 v c y dim=2
    pnnx.Output o 1 0 y
    """
    a, b = RNG.standard_normal((2, 3)).astype(np.float32), RNG.standard_normal((2, 3)).astype(np.float32)
    c = RNG.standard_normal((2, 3, 2)).astype(np.float32)
    model = _load(tmp_path, body)
    assert _types(model) == ["ConcatNested"]
    want = np.concatenate((np.concatenate((a, b), axis=1).reshape(2, 3, 2), c), axis=2)
    assert _bits_equal(model(a, b, c), want)


def test_mixed_dtypes_empty_pieces_and_bad_shapes_go_the_reference_way(tmp_path):
    # the inputs' shapes and dtypes undeclared, so that the model takes what the test feeds it
    body = """
    pnnx.Input in0 0 1 a
    pnnx.Input in1 0 1 b
    pnnx.Input in2 0 1 c
    torch.cat j 2 1 a b k dim=1
    Tensor.reshape r 1 1 k v shape=(2,-1)
    torch.cat out 2 1 v c y dim=0
    pnnx.Output o 1 0 y
    """
    model = _load(tmp_path, body)
    assert _types(model) == ["ConcatNested"]
    a, c = RNG.standard_normal((2, 3)).astype(np.float32), RNG.standard_normal((2, 6)).astype(np.float32)
    b = RNG.standard_normal((2, 3))
    got = model(a, b, c)
    want = np.concatenate((np.concatenate((a, b), axis=1), c), axis=0)
    assert got.dtype == np.float64 and _bits_equal(got, want)
    empty = np.zeros((0,), np.float32)  # torch.cat skips a 1-D empty tensor whatever the others' rank
    assert _bits_equal(model(a, empty, np.zeros((2, 3), np.float32)),
                       np.concatenate((a, np.zeros((2, 3), np.float32)), axis=0))
    with pytest.raises(ShapeError, match="op 'out'.*cannot concatenate"):
        model(a, b.astype(np.float32), np.zeros((2, 5), np.float32))
    with pytest.raises(ShapeError, match="op 'out'.*cannot concatenate"):
        model(a, np.zeros((3, 3), np.float32), c)


@pytest.mark.parametrize("batch", ["b1", "b3"])
def test_yolo_head_is_one_join_and_computes_what_pytorch_did(batch, monkeypatch):
    path = MODELS / "yolov5_style" / "model.pnnx.param"
    model = kuiper.load(path)
    assert "ConcatNested" in _types(model) and "Concat" not in _types(model)[-4:]
    data = reference_batches("yolov5_style")[batch]
    x, want = data["inputs"][0], data["outputs"][0]
    got = model(x)
    assert_close_to_pytorch(got, want, f"yolov5_style {batch}")
    assert _bits_equal(_without_pass(monkeypatch, path)(x), got)


class _OldNumpyArray(np.ndarray):
    """An array whose reshape takes no ``copy`` argument, as before NumPy 2.1."""

    def reshape(self, shape, **options):
        if options:
            raise TypeError("reshape() got an unexpected keyword argument 'copy'")
        return np.ndarray.reshape(self, shape)


@pytest.mark.parametrize("kind", [np.ndarray, _OldNumpyArray])
def test_a_region_is_viewed_in_the_inner_shape_only_without_a_copy(kind):
    from kuiper.numba_kernels.concat_nested import _view

    out = np.zeros((2, 3, 4), np.float32).view(kind)
    rows = _view(out[:, 0:2], (2, 2, 2, 2))  # a slice along dim 1: its rows split without a copy
    rows[...] = 1
    assert out[:, 0:2].all() and not out[:, 2].any()
    assert _view(out[:, :, 0:2], (2, 6)) is None  # columns 0-1 of each row: no (2, 6) view of them
