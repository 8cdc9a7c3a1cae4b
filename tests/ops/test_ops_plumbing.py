"""Tuples and lists, pnnx.SliceIndexes, dtype casts and embedding lookups."""

from __future__ import annotations

import numpy as np
import pytest

import kuiper
from kuiper.errors import InputError, KuiperError, UnsupportedOperatorError

from conftest import pnnx_node
from test_ops_shape import load_graph, single_op


@pytest.mark.parametrize("graph, returned", [
    pytest.param("""
pnnx.Input in0 0 1 a
pnnx.Input in1 0 1 b
prim::TupleConstruct t 2 1 a b t
pnnx.Output out 1 0 t
""", ("a", "b"), id="tuple_construct_returns_the_model_outputs_in_order"),
    pytest.param("""
pnnx.Input in0 0 1 a
pnnx.Input in1 0 1 b
prim::ListConstruct list 2 1 a b l
prim::ListUnpack unpack 1 2 l c d
pnnx.Output out 2 0 d c
""", ("b", "a"), id="list_unpack_gives_the_constructed_items"),
])
def test_tuples_and_lists_pass_their_items_through(tmp_path, backend_name, graph, returned):
    inputs = {"a": np.arange(3, dtype=np.float32), "b": np.arange(4, dtype=np.float32)}
    first, second = load_graph(tmp_path, graph, backend_name)(inputs["a"], inputs["b"])
    np.testing.assert_array_equal(kuiper.to_numpy(first), inputs[returned[0]])
    np.testing.assert_array_equal(kuiper.to_numpy(second), inputs[returned[1]])


def test_nested_tuples_are_flattened_depth_first(tmp_path, backend_name):
    # (a, (b, (a, b))) -> a, b, a, b: the order PyTorch and PNNX number a model's outputs in
    a = np.zeros(2, np.float32)
    b = np.ones(3, np.float32)
    model = load_graph(tmp_path, """
pnnx.Input in0 0 1 a
pnnx.Input in1 0 1 b
prim::TupleConstruct inner 2 1 a b t1
prim::TupleConstruct middle 2 1 b t1 t2
prim::TupleConstruct outer 2 1 a t2 t3
pnnx.Output out 1 0 t3
""", backend_name)
    outputs = model(a, b)
    assert [kuiper.to_numpy(o).shape for o in outputs] == [(2,), (3,), (2,), (3,)]


def test_unpack_checks_the_element_count(tmp_path):
    model = load_graph(tmp_path, """
pnnx.Input in0 0 1 a
prim::TupleConstruct t 2 1 a a t
prim::TupleUnpack unpack 1 3 t x y z
pnnx.Output out 3 0 x y z
""", "numpy")
    with pytest.raises(KuiperError, match="unpacks 2"):
        model(np.zeros(2, np.float32))


def test_slice_indexes_mixes_constants_and_inputs(tmp_path):
    from kuiper.backends import get_backend
    from kuiper.model_ir import OpNode
    from kuiper.ops.plumbing import SliceIndexes

    node = pnnx_node("pnnx.SliceIndexes", "s", ["p", "q"], ["l"], params={"indexes": [0, "@1", -1, "@0"]})
    op = SliceIndexes(node, get_backend("numpy"))
    assert op.forward(7, np.int64(3)) == [0, 3, -1, 7]
    bad = pnnx_node("pnnx.SliceIndexes", "s", ["p"], ["l"], params={"indexes": [0, "@1"]})
    with pytest.raises(KuiperError, match="@1"):
        SliceIndexes(bad, get_backend("numpy"))


def test_to_long_truncates_toward_zero(tmp_path, backend_name):
    x = np.array([-2.7, -0.5, 0.0, 0.5, 1.9, 3.0], np.float32)
    got = single_op(tmp_path, backend_name, "Tensor.to", "copy=False dtype=torch.long $input=x0", x)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, [-2, 0, 0, 0, 1, 3])
    got = single_op(tmp_path, backend_name, "Tensor.to", "copy=False dtype=torch.int $input=x0", x)
    assert got.dtype == np.int32


@pytest.mark.parametrize("dtype, numpy_dtype", [
    ("torch.float", np.float32), ("torch.double", np.float64), ("torch.half", np.float16),
    ("torch.float64", np.float64), ("torch.uint8", np.uint8),
])
def test_to_dtype_names(tmp_path, backend_name, dtype, numpy_dtype):
    x = np.array([0.0, 1.0, 2.0], np.float32)
    got = single_op(tmp_path, backend_name, "Tensor.to", f"copy=True dtype={dtype}", x)
    assert got.dtype == numpy_dtype
    np.testing.assert_array_equal(got.astype(np.float32), x)


def test_to_bool_means_non_zero(tmp_path, backend_name):
    x = np.array([0.0, -0.0, 0.25, -3.0], np.float32)
    got = single_op(tmp_path, backend_name, "Tensor.to", "copy=False dtype=torch.bool", x)
    np.testing.assert_array_equal(got, [False, False, True, True])


def test_to_an_unsupported_dtype_fails_at_load(tmp_path):
    with pytest.raises(UnsupportedOperatorError, match="dtype"):
        single_op(tmp_path, "numpy", "Tensor.to", "copy=False dtype=torch.bfloat16", np.zeros(2, np.float32))


def test_type_as_and_cast_methods(tmp_path, backend_name):
    x = np.array([1.5, -1.5], np.float32)
    other = np.zeros(3, np.int64)
    got = single_op(tmp_path, backend_name, "Tensor.type_as", "$input=x0 $other=x1", x, other)
    assert got.dtype == np.int64 and got.tolist() == [1, -1]
    got = single_op(tmp_path, backend_name, "Tensor.double", "", x)
    assert got.dtype == np.float64
    got = single_op(tmp_path, backend_name, "Tensor.long", "", x)
    assert got.tolist() == [1, -1]


EMBEDDING_TABLE = np.arange(20, dtype=np.float32).reshape(5, 4)


def embedding_model(tmp_path, backend_name, extra=""):
    return load_graph(tmp_path, f"""
pnnx.Input in0 0 1 i
nn.Embedding embedding 1 1 i y embedding_dim=4 num_embeddings=5 sparse=False {extra} @weight=(5,4)f32 $input=i
pnnx.Output out 1 0 y
""", backend_name, weights={"embedding.weight": EMBEDDING_TABLE.tobytes()})


def test_embedding_looks_up_rows_for_any_index_shape(tmp_path, backend_name):
    index = np.array([[4, 0, 0], [2, 1, 3]], np.int64)
    got = kuiper.to_numpy(embedding_model(tmp_path, backend_name)(index))
    assert got.shape == (2, 3, 4)
    np.testing.assert_array_equal(got, EMBEDDING_TABLE[index])


@pytest.mark.parametrize("index", [np.array([[5]], np.int64), np.array([[-1]], np.int64),
                                   np.array([[1.0]], np.float32)])
def test_embedding_rejects_bad_indices(tmp_path, index):
    with pytest.raises(InputError):
        embedding_model(tmp_path, "numpy")(index)


def test_embedding_max_norm_is_unsupported(tmp_path):
    with pytest.raises(UnsupportedOperatorError, match="max_norm"):
        embedding_model(tmp_path, "numpy", extra="max_norm=1.0")


def test_functional_embedding_takes_the_table_as_an_input(tmp_path, backend_name):
    index = np.array([[1, 3]], np.int64)
    got = single_op(tmp_path, backend_name, "F.embedding", "sparse=False $input=x0 $weight=x1", index, EMBEDDING_TABLE)
    np.testing.assert_array_equal(got, EMBEDDING_TABLE[index])
