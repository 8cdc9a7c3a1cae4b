"""Shape, slicing, joining/splitting and padding ops on hand-written one-op graphs.

Expected values come from NumPy's own functions (np.transpose, np.array_split,
np.pad ...) or are written out by hand; the exported-model checks against
PyTorch live in tests/fixtures (ops_shape family) and test_models.py.
"""

from __future__ import annotations

import numpy as np
import pytest

import kuiper
from kuiper.errors import InputError, KuiperError, ShapeError, UnsupportedOperatorError

from conftest import pnnx_node, write_model


# ------------------------------------------------------------------ helpers (also used by test_ops_resize/plumbing)


def load_graph(tmp_path, body: str, backend_name: str, weights: dict[str, bytes] | None = None):
    """Load a param file written without its magic and count lines (they are filled in)."""
    lines = [line.split() for line in body.strip().splitlines()]
    operands = set()
    for tokens in lines:
        nin, nout = int(tokens[2]), int(tokens[3])
        operands.update(tokens[4 : 4 + nin + nout])
    text = f"7767517\n{len(lines)} {len(operands)}\n" + "\n".join(" ".join(t) for t in lines) + "\n"
    return kuiper.load(write_model(tmp_path, text, weights), backend=backend_name)


def single_op(tmp_path, backend_name, op_type: str, params: str, *inputs, outputs: int = 1, weights=None):
    """Run one op whose inputs are x0, x1, ... and outputs y0, y1, ...; NumPy results."""
    names = " ".join(f"x{i}" for i in range(len(inputs)))
    outs = " ".join(f"y{j}" for j in range(outputs))
    body = "\n".join(
        [f"pnnx.Input in{i} 0 1 x{i}" for i in range(len(inputs))]
        + [f"{op_type} op {len(inputs)} {outputs} {names} {outs} {params}", f"pnnx.Output out {outputs} 0 {outs}"]
    )
    model = load_graph(tmp_path, body, backend_name, weights)
    result = model(*inputs)
    if outputs == 1:
        return kuiper.to_numpy(result)
    return tuple(kuiper.to_numpy(r) for r in result)


def arange(*shape, dtype=np.float32):
    return np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)


# ------------------------------------------------------------------ reshape family


def test_reshape_infers_the_minus_one_dim(tmp_path, backend_name):
    x = arange(2, 3, 4)
    got = single_op(tmp_path, backend_name, "Tensor.reshape", "shape=(-1,6)", x)
    np.testing.assert_array_equal(got, x.reshape(4, 6))


def test_reshape_takes_its_shape_from_an_expression_list(tmp_path, backend_name):
    x = arange(3, 2, 5)
    body = """
pnnx.Input in0 0 1 x
pnnx.Expression shape 1 1 x s expr=[size(@0,0),-1]
Tensor.reshape op 2 1 x s y $input=x $shape=s
pnnx.Output out 1 0 y
"""
    got = kuiper.to_numpy(load_graph(tmp_path, body, backend_name)(x))
    np.testing.assert_array_equal(got, x.reshape(3, 10))


def test_reshape_takes_its_shape_from_a_list_of_ints_or_numpy_scalars(tmp_path):
    # What an expression may hand over: Python ints, NumPy integers, 0-d arrays.
    from kuiper.backends import get_backend
    from kuiper.model_ir import OpNode
    from kuiper.ops.shape import Reshape

    node = pnnx_node("Tensor.reshape", "r", ["x", "s"], ["y"], input_keys=["input", "shape"])
    op = Reshape(node, get_backend("numpy"))
    x = arange(2, 6)
    for shape in ([3, -1], (np.int64(3), 4), [np.array(3), np.array(-1)], np.array([3, 4])):
        np.testing.assert_array_equal(op.forward(x, shape), x.reshape(3, 4))


@pytest.mark.parametrize("shape", ["(-1,-1)", "(5,-1)", "(7,2)", "(-2,12)"])
def test_reshape_rejects_impossible_shapes(tmp_path, shape):
    with pytest.raises(ShapeError, match="reshape"):
        single_op(tmp_path, "numpy", "Tensor.reshape", f"shape={shape}", arange(2, 3, 4))


def test_view_reshape_as_and_unflatten(tmp_path, backend_name):
    x = arange(2, 3, 4)
    np.testing.assert_array_equal(single_op(tmp_path, backend_name, "Tensor.view", "shape=(4,-1)", x), x.reshape(4, 6))
    other = np.zeros((6, 4), np.float32)
    got = single_op(tmp_path, backend_name, "Tensor.reshape_as", "$input=x0 $other=x1", x, other)
    np.testing.assert_array_equal(got, x.reshape(6, 4))
    got = single_op(tmp_path, backend_name, "Tensor.unflatten", "dim=-1 sizes=(2,-1)", x)
    np.testing.assert_array_equal(got, x.reshape(2, 3, 2, 2))


def test_flatten_with_negative_dims(tmp_path, backend_name):
    x = arange(2, 3, 4, 5)
    got = single_op(tmp_path, backend_name, "torch.flatten", "start_dim=-3 end_dim=-2", x)
    np.testing.assert_array_equal(got, x.reshape(2, 12, 5))


def test_permute_transpose_and_t(tmp_path, backend_name):
    x = arange(2, 3, 4, 5)
    got = single_op(tmp_path, backend_name, "Tensor.permute", "dims=(0,-1,1,-2)", x)
    np.testing.assert_array_equal(got, np.transpose(x, (0, 3, 1, 2)))
    got = single_op(tmp_path, backend_name, "torch.transpose", "dim0=1 dim1=-1", x)
    np.testing.assert_array_equal(got, np.swapaxes(x, 1, 3))
    m = arange(3, 4)
    np.testing.assert_array_equal(single_op(tmp_path, backend_name, "torch.t", "", m), m.T)
    v = arange(5)
    np.testing.assert_array_equal(single_op(tmp_path, backend_name, "torch.t", "", v), v)


def test_t_rejects_rank_3(tmp_path):
    with pytest.raises(ShapeError, match="rank <= 2"):
        single_op(tmp_path, "numpy", "torch.t", "", arange(2, 2, 2))


def test_permute_rejects_wrong_length_and_repeats(tmp_path):
    with pytest.raises(ShapeError):
        single_op(tmp_path, "numpy", "Tensor.permute", "dims=(1,0)", arange(2, 3, 4))
    with pytest.raises(KuiperError, match="repeats"):
        single_op(tmp_path, "numpy", "Tensor.permute", "dims=(0,-3,1)", arange(2, 3, 4))


def test_squeeze_variants(tmp_path, backend_name):
    x = arange(1, 3, 1, 5)
    assert single_op(tmp_path, backend_name, "torch.squeeze", "", x).shape == (3, 5)
    # a listed dim whose size is not 1 is left alone, as in PyTorch
    assert single_op(tmp_path, backend_name, "torch.squeeze", "dim=(1,2)", x).shape == (1, 3, 5)
    assert single_op(tmp_path, backend_name, "torch.squeeze", "dim=-2", x).shape == (1, 3, 5)
    assert single_op(tmp_path, backend_name, "torch.squeeze", "dim=1", x).shape == (1, 3, 1, 5)


@pytest.mark.parametrize("dim, expected", [(0, (1, 2, 3)), (-1, (2, 3, 1)), (-2, (2, 1, 3)), (-3, (1, 2, 3)), (2, (2, 3, 1))])
def test_unsqueeze_negative_dims_count_from_the_new_rank(tmp_path, backend_name, dim, expected):
    got = single_op(tmp_path, backend_name, "torch.unsqueeze", f"dim={dim}", arange(2, 3))
    assert got.shape == expected


def test_expand_keeps_minus_one_dims_and_adds_leading_dims(tmp_path, backend_name):
    x = arange(2, 1, 3)
    got = single_op(tmp_path, backend_name, "Tensor.expand", "sizes=(4,-1,5,-1)", x)
    np.testing.assert_array_equal(got, np.broadcast_to(x, (4, 2, 5, 3)))
    other = np.zeros((2, 4, 3), np.float32)
    got = single_op(tmp_path, backend_name, "Tensor.expand_as", "$input=x0 $other=x1", x, other)
    np.testing.assert_array_equal(got, np.broadcast_to(x, (2, 4, 3)))


@pytest.mark.parametrize("sizes", ["(2,3,4)", "(-1,2,-1,3)"])
def test_expand_rejects_non_broadcastable_sizes(tmp_path, sizes):
    with pytest.raises(ShapeError):
        single_op(tmp_path, "numpy", "Tensor.expand", f"sizes={sizes}", arange(2, 1, 3))


def test_expand_and_repeat_take_sizes_from_an_expression(tmp_path, backend_name):
    x = arange(3, 1, 2)
    body = """
pnnx.Input in0 0 1 x
pnnx.Expression sizes 1 1 x s expr=[size(@0,0),4,-1]
Tensor.expand expand 2 1 x s a $input=x $sizes=s
pnnx.Expression reps 1 1 x r expr=[1,size(@0,0),2]
Tensor.repeat repeat 2 1 x r b $input=x $sizes=r
pnnx.Output out 2 0 a b
"""
    a, b = load_graph(tmp_path, body, backend_name)(x)
    np.testing.assert_array_equal(kuiper.to_numpy(a), np.broadcast_to(x, (3, 4, 2)))
    np.testing.assert_array_equal(kuiper.to_numpy(b), np.tile(x, (1, 3, 2)))


def test_repeat_tile_and_repeat_interleave(tmp_path, backend_name):
    x = arange(2, 3)
    np.testing.assert_array_equal(single_op(tmp_path, backend_name, "Tensor.repeat", "sizes=(2,1,3)", x),
                                  np.tile(x[None], (2, 1, 3)))
    # torch.tile pads a short dims list with leading 1s
    np.testing.assert_array_equal(single_op(tmp_path, backend_name, "torch.tile", "dims=(2)", x), np.tile(x, (1, 2)))
    got = single_op(tmp_path, backend_name, "torch.repeat_interleave", "dim=-1 repeats=2", x)
    np.testing.assert_array_equal(got, [[0, 0, 1, 1, 2, 2], [3, 3, 4, 4, 5, 5]])
    got = single_op(tmp_path, backend_name, "torch.repeat_interleave", "repeats=2", x)
    np.testing.assert_array_equal(got, [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5])


def test_repeat_interleave_with_a_tensor_of_repeats_is_unsupported(tmp_path):
    with pytest.raises(UnsupportedOperatorError, match="repeats"):
        single_op(tmp_path, "numpy", "torch.repeat_interleave", "dim=0 repeats=(1,2)", arange(2, 3))


def test_flip_and_roll(tmp_path, backend_name):
    x = arange(2, 3, 4)
    np.testing.assert_array_equal(single_op(tmp_path, backend_name, "torch.flip", "dims=(1,-1)", x), x[:, ::-1, ::-1])
    got = single_op(tmp_path, backend_name, "torch.roll", "dims=(1,-1) shifts=(1,-2)", x)
    np.testing.assert_array_equal(got, np.roll(np.roll(x, 1, axis=1), -2, axis=2))
    got = single_op(tmp_path, backend_name, "torch.roll", "dims=None shifts=(3)", x)
    np.testing.assert_array_equal(got, np.roll(x.ravel(), 3).reshape(x.shape))


# ------------------------------------------------------------------ joining and splitting


@pytest.mark.parametrize("dim", [0, 1, -1, -2])
def test_cat_and_stack_on_any_dim(tmp_path, backend_name, dim):
    a, b, c = arange(2, 3), arange(2, 3) + 10, arange(2, 3) + 20
    got = single_op(tmp_path, backend_name, "torch.cat", f"dim={dim}", a, b, c)
    np.testing.assert_array_equal(got, np.concatenate([a, b, c], axis=dim))
    got = single_op(tmp_path, backend_name, "torch.stack", f"dim={dim}", a, b, c)
    np.testing.assert_array_equal(got, np.stack([a, b, c], axis=dim))


def test_cat_rejects_mismatched_shapes(tmp_path):
    with pytest.raises(ShapeError, match="concatenate"):
        single_op(tmp_path, "numpy", "torch.cat", "dim=1", arange(2, 3), arange(3, 3))


def test_split_by_size_leaves_a_short_last_piece(tmp_path, backend_name):
    x = arange(2, 5)
    pieces = single_op(tmp_path, backend_name, "torch.split", "dim=-1 split_size_or_sections=2", x, outputs=3)
    for got, want in zip(pieces, [x[:, 0:2], x[:, 2:4], x[:, 4:5]]):
        np.testing.assert_array_equal(got, want)


def test_split_by_sections_allows_empty_pieces(tmp_path, backend_name):
    x = arange(2, 5)
    pieces = single_op(tmp_path, backend_name, "torch.split", "dim=1 split_size_or_sections=(1,0,4,0)", x, outputs=4)
    assert [p.shape for p in pieces] == [(2, 1), (2, 0), (2, 4), (2, 0)]
    np.testing.assert_array_equal(pieces[2], x[:, 1:])


def test_split_checks_the_sizes_add_up_and_the_piece_count(tmp_path):
    with pytest.raises(ShapeError, match="add up"):
        single_op(tmp_path, "numpy", "torch.split", "dim=1 split_size_or_sections=(1,2)", arange(2, 5), outputs=2)
    with pytest.raises(ShapeError, match="piece"):
        single_op(tmp_path, "numpy", "torch.split", "dim=1 split_size_or_sections=2", arange(2, 5), outputs=2)


def test_chunk_can_give_fewer_pieces_than_asked(tmp_path, backend_name):
    # PyTorch: chunk(6 elements, 4) -> pieces of ceil(6/4) = 2, so only 3 of them
    x = arange(6)
    pieces = single_op(tmp_path, backend_name, "torch.chunk", "chunks=4 dim=0", x, outputs=3)
    assert [p.tolist() for p in pieces] == [[0, 1], [2, 3], [4, 5]]
    pieces = single_op(tmp_path, backend_name, "torch.chunk", "chunks=3 dim=-1", arange(2, 5), outputs=3)
    assert [p.shape[1] for p in pieces] == [2, 2, 1]


@pytest.mark.parametrize("params, split", [
    ("sections=3", 3),
    ("sections=4", 4),
    ("indices=(1,4)", [1, 4]),
    ("indices=(-2,9)", [-2, 9]),  # negative counts from the end, past the end clamps
    ("indices=(4,2)", [4, 2]),  # decreasing gives an empty piece
])
def test_tensor_split_matches_numpy_array_split(tmp_path, backend_name, params, split):
    x = arange(3, 7)
    want = np.array_split(x, split, axis=1)
    got = single_op(tmp_path, backend_name, "torch.tensor_split", f"dim=1 {params}", x, outputs=len(want))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_unbind(tmp_path, backend_name):
    x = arange(2, 3, 4)
    pieces = single_op(tmp_path, backend_name, "torch.unbind", "dim=-2", x, outputs=3)
    for i, piece in enumerate(pieces):
        np.testing.assert_array_equal(piece, x[:, i])
    with pytest.raises(ShapeError):
        single_op(tmp_path, "numpy", "torch.unbind", "dim=0", x, outputs=3)


# ------------------------------------------------------------------ slicing and indexing


def test_slice_lists_with_steps_negative_starts_and_selects(tmp_path, backend_name):
    x = arange(2, 3, 6, 7)
    params = ("dims=(1,2,3) starts=(0,1,-3) ends=(0,2147483647,-1) steps=(0,2,1) "
              "selects=(-1,2147483647,2147483647)")
    got = single_op(tmp_path, backend_name, "Tensor.slice", params, x)
    np.testing.assert_array_equal(got, x[:, -1, 1::2, -3:-1])


def test_slice_single_dim(tmp_path, backend_name):
    x = arange(2, 9)
    got = single_op(tmp_path, backend_name, "Tensor.slice", "dim=-1 start=-7 end=2147483647 step=3", x)
    np.testing.assert_array_equal(got, x[:, -7::3])
    got = single_op(tmp_path, backend_name, "Tensor.slice", "dim=1 start=5 end=2 step=1", x)
    assert got.shape == (2, 0)


def test_slice_with_ends_from_slice_indexes_and_an_expression(tmp_path, backend_name):
    x = arange(3, 5, 6)
    body = """
pnnx.Input in0 0 1 x
pnnx.Expression e 1 1 x n expr=add(size(@0,0),1)
pnnx.SliceIndexes ends 1 1 n ends indexes=(@0,-1)
Tensor.slice a 2 1 x ends a dims=(1,2) selects=(2147483647,2147483647) starts=(0,1) steps=(1,2) $input=x $ends=ends
Tensor.slice b 2 1 x n b dim=2 start=0 step=1 $input=x $end=n
pnnx.Output out 2 0 a b
"""
    a, b = load_graph(tmp_path, body, backend_name)(x)
    np.testing.assert_array_equal(kuiper.to_numpy(a), x[:, :4, 1:-1:2])
    np.testing.assert_array_equal(kuiper.to_numpy(b), x[:, :, :4])


def test_slice_rejects_a_zero_step(tmp_path):
    with pytest.raises(KuiperError, match="step"):
        single_op(tmp_path, "numpy", "Tensor.slice", "dim=1 start=0 end=3 step=0", arange(2, 4))


def test_select_and_narrow(tmp_path, backend_name):
    x = arange(2, 3, 4)
    np.testing.assert_array_equal(single_op(tmp_path, backend_name, "Tensor.select", "dim=-1 index=-2", x), x[..., -2])
    np.testing.assert_array_equal(single_op(tmp_path, backend_name, "torch.narrow", "dim=2 start=-3 length=2", x),
                                  x[:, :, 1:3])
    with pytest.raises(ShapeError, match="out of range"):
        single_op(tmp_path, "numpy", "Tensor.select", "dim=1 index=3", x)
    with pytest.raises(ShapeError, match="narrow"):
        single_op(tmp_path, "numpy", "torch.narrow", "dim=2 start=3 length=2", x)


def test_select_with_an_index_input(tmp_path, backend_name):
    x = arange(3, 4, 2)
    body = """
pnnx.Input in0 0 1 x
pnnx.Expression e 1 1 x i expr=sub(size(@0,0),1)
Tensor.select op 2 1 x i y dim=1 $input=x $index=i
pnnx.Output out 1 0 y
"""
    np.testing.assert_array_equal(kuiper.to_numpy(load_graph(tmp_path, body, backend_name)(x)), x[:, 2])


def test_index_from_the_raw_expr_param_on_a_middle_dim(tmp_path, backend_name):
    x = arange(2, 4, 3)
    got = single_op(tmp_path, backend_name, "Tensor.index", "expr=[None,[3,0,-1,0]]", x)
    np.testing.assert_array_equal(got, x[:, [3, 0, -1, 0]])
    got = single_op(tmp_path, backend_name, "Tensor.index", "expr=[None,None,[True,False,True]]", x)
    np.testing.assert_array_equal(got, x[:, :, [0, 2]])


def test_index_with_an_index_list_bound_to_expr():
    # pnnx writes x[:, i] (i a tensor) as pnnx.Expression expr=[None,@0] feeding $expr; the op
    # receives that list.  (Run directly: whether the expression engine builds such a list is
    # kuiper.pnnx_expr's business.)
    from kuiper.backends import get_backend
    from kuiper.model_ir import OpNode
    from kuiper.ops.slicing import Index

    x = arange(2, 4, 3)
    index = np.array([[2, 0], [1, 1]], dtype=np.int64)
    node = pnnx_node("Tensor.index", "op", ["x", "key"], ["y"], input_keys=["input", "expr"])
    got = Index(node, get_backend("numpy")).forward(x, [None, index])
    np.testing.assert_array_equal(got, x[:, index])
    assert got.shape == (2, 2, 2, 3)


def test_index_rejects_expressions_it_cannot_read(tmp_path):
    with pytest.raises(KuiperError, match="expr"):
        single_op(tmp_path, "numpy", "Tensor.index", "expr=[None,[1,x]]", arange(2, 3))


def test_gather_with_an_index_smaller_than_the_input(tmp_path, backend_name):
    x = arange(2, 3, 4)
    index = np.array([[[2, 0], [1, 1]], [[0, 0], [2, 1]]], dtype=np.int64)  # (2, 2, 2): smaller in dims 1 and 2
    got = single_op(tmp_path, backend_name, "torch.gather", "dim=-1 $input=x0 $index=x1", x, index)
    np.testing.assert_array_equal(got, np.take_along_axis(x[:, :2, :], index, axis=2))
    got = single_op(tmp_path, backend_name, "torch.gather", "dim=1 $input=x0 $index=x1", x, index)
    np.testing.assert_array_equal(got, np.take_along_axis(x[:, :, :2], index, axis=1))


@pytest.mark.parametrize("bad", [-1, 3])
def test_gather_and_index_select_reject_out_of_range_indices(tmp_path, bad):
    # NumPy would wrap -1 silently; PyTorch raises, so must we
    index = np.array([[[0, bad]]], dtype=np.int64)
    with pytest.raises(InputError, match="outside"):
        single_op(tmp_path, "numpy", "torch.gather", "dim=1 $input=x0 $index=x1", arange(1, 3, 2), index)
    with pytest.raises(InputError, match="outside"):
        single_op(tmp_path, "numpy", "torch.index_select", "dim=1 $input=x0 $index=x1", arange(1, 3, 2),
                  np.array([0, bad], dtype=np.int64))


def test_index_select(tmp_path, backend_name):
    x = arange(2, 3, 4)
    index = np.array([3, 0, 3], dtype=np.int64)
    got = single_op(tmp_path, backend_name, "torch.index_select", "dim=-1 $input=x0 $index=x1", x, index)
    np.testing.assert_array_equal(got, x[:, :, [3, 0, 3]])


# ------------------------------------------------------------------ padding


def test_constant_pad_is_last_dim_first_with_value(tmp_path, backend_name):
    x = arange(1, 2, 3)
    got = single_op(tmp_path, backend_name, "F.pad", "mode=constant pad=(1,2,0,1) value=0.5", x)
    np.testing.assert_array_equal(got, np.pad(x, ((0, 0), (0, 1), (1, 2)), constant_values=0.5))
    got = single_op(tmp_path, backend_name, "F.pad", "mode=constant pad=(1,1) value=None", x)
    np.testing.assert_array_equal(got, np.pad(x, ((0, 0), (0, 0), (1, 1))))


def test_negative_pads_crop(tmp_path, backend_name):
    x = arange(1, 4, 5)
    got = single_op(tmp_path, backend_name, "F.pad", "mode=constant pad=(-1,2,1,-2) value=None", x)
    np.testing.assert_array_equal(got, np.pad(x[:, :2, 1:], ((0, 0), (1, 0), (0, 2))))
    # ATen's reflect mirrors about the ORIGINAL edge and may reach into the cropped part
    # (4 > the 4 elements left after cropping 2, but < the original 6) ...
    got = single_op(tmp_path, backend_name, "F.pad", "mode=reflect pad=(-2,4) value=None", arange(1, 1, 6))
    np.testing.assert_array_equal(got, [[[2, 3, 4, 5, 4, 3, 2, 1]]])
    got = single_op(tmp_path, backend_name, "F.pad", "mode=replicate pad=(3,-1) value=None", arange(1, 1, 2))
    np.testing.assert_array_equal(got, [[[0, 0, 0, 0]]])
    # ... while circular wraps the cropped tensor: x[1:] = 1..5, then 1, 2 (not 0, 1)
    got = single_op(tmp_path, backend_name, "F.pad", "mode=circular pad=(-1,2) value=None", arange(1, 1, 6))
    np.testing.assert_array_equal(got, [[[1, 2, 3, 4, 5, 1, 2]]])


@pytest.mark.parametrize("mode, numpy_mode", [("reflect", "reflect"), ("replicate", "edge"), ("circular", "wrap")])
def test_pad_modes_match_numpy(tmp_path, backend_name, mode, numpy_mode):
    x = arange(2, 3, 4, 5)
    got = single_op(tmp_path, backend_name, "F.pad", f"mode={mode} pad=(1,3,2,0) value=None", x)
    np.testing.assert_array_equal(got, np.pad(x, ((0, 0), (0, 0), (2, 0), (1, 3)), mode=numpy_mode))


def test_pad_modules_read_padding_and_value(tmp_path, backend_name):
    x = arange(1, 2, 3, 4)
    got = single_op(tmp_path, backend_name, "nn.ZeroPad2d", "padding=(1,0,2,1)", x)
    np.testing.assert_array_equal(got, np.pad(x, ((0, 0), (0, 0), (2, 1), (1, 0))))
    got = single_op(tmp_path, backend_name, "nn.ConstantPad2d", "padding=1 value=-2.0", x)
    np.testing.assert_array_equal(got, np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-2.0))
    got = single_op(tmp_path, backend_name, "nn.ReplicationPad1d", "padding=(2,1)", x[0])
    np.testing.assert_array_equal(got, np.pad(x[0], ((0, 0), (0, 0), (2, 1)), mode="edge"))


def test_reflect_pad_must_be_smaller_than_the_dim(tmp_path):
    with pytest.raises(ShapeError, match="reflect"):
        single_op(tmp_path, "numpy", "F.pad", "mode=reflect pad=(3,0) value=None", arange(1, 2, 3))


def test_unknown_pad_mode_fails_at_load(tmp_path):
    with pytest.raises(UnsupportedOperatorError, match="mode"):
        single_op(tmp_path, "numpy", "F.pad", "mode=symmetric pad=(1,1) value=None", arange(1, 2, 3))


def test_tensor_index_with_a_tensor_on_a_middle_dim(tmp_path):
    # Exactly what pnnx 20261020 writes for `x[:, i] * 2` with i an int64 tensor input.
    text = (
        "7767517\n6 5\n"
        "pnnx.Input pnnx_input_0 0 1 0 #0=(2,5,3)f32\n"
        "pnnx.Input pnnx_input_1 0 1 1 #1=(3)i64\n"
        "pnnx.Expression pnnx_expr_1 1 1 1 2 expr=[None,@0] #1=(3)i64\n"
        "Tensor.index Tensor.index_0 2 1 0 2 3 $input=0 $expr=2 #0=(2,5,3)f32 #3=(2,3,3)f32\n"
        "pnnx.Expression pnnx_expr_0 1 1 3 4 expr=mul(@0,2) #3=(2,3,3)f32 #4=(2,3,3)f32\n"
        "pnnx.Output pnnx_output_0 1 0 4 #4=(2,3,3)f32\n"
    )
    model = kuiper.load(write_model(tmp_path, text))
    x = np.arange(30, dtype=np.float32).reshape(2, 5, 3)
    index = np.array([4, 0, 2], np.int64)
    np.testing.assert_array_equal(model(x, index), x[:, index] * 2)
