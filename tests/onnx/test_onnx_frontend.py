"""The ONNX frontend on small hand-made models: the ways a model can arrive, and hostile files.

Hostile input gets what PNNX files get: a KuiperError naming the file, the node and what was wrong,
raised before anything large is allocated; external data cannot leave the model's folder.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

import kuiper
from kuiper.errors import KuiperError, ModelFormatError, OperatorParamError, SizeLimitError, UnsupportedOperatorError

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import kuiper.onnx.backend as backend  # noqa: E402  (needs onnx)


def _model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _tensor(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def _add_bias_model(bias: np.ndarray):
    """y = x + bias, the bias an initializer."""
    node = helper.make_node("Add", ["x", "bias"], ["y"], name="add_bias")
    return _model([node], [_tensor("x", [2, 3])], [_tensor("y", [2, 3])], [numpy_helper.from_array(bias, "bias")])


def test_an_initializer_is_a_weight_and_a_free_dim_stays_free():
    bias = np.arange(3, dtype=np.float32)
    node = helper.make_node("Relu", ["x"], ["r"])
    add = helper.make_node("Add", ["r", "bias"], ["y"])
    model = _model([node, add], [_tensor("x", ["n", 3])], [_tensor("y", ["n", 3])],
                   [numpy_helper.from_array(bias, "bias")])
    built = kuiper.load(model.SerializeToString())
    assert built.inputs[0].shape == (None, 3)
    x = np.array([[-1, 2, -3], [4, -5, 6], [0, 1, 0]], dtype=np.float32)
    np.testing.assert_array_equal(built(x, to_numpy=True), np.maximum(x, 0) + bias)


def test_external_data_inside_the_folder_is_read(tmp_path):
    bias = np.array([1, 2, 3], dtype=np.float32)
    model = _add_bias_model(bias)
    onnx.save_model(model, tmp_path / "m.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=0)
    x = np.ones((2, 3), dtype=np.float32)
    np.testing.assert_array_equal(kuiper.load(tmp_path / "m.onnx")(x, to_numpy=True), x + bias)


@pytest.mark.parametrize("location", ["../outside.bin", "/etc/passwd", "sub/../../outside.bin"])
def test_external_data_cannot_leave_the_models_folder(tmp_path, location):
    (tmp_path / "outside.bin").write_bytes(np.zeros(3, dtype=np.float32).tobytes())
    folder = tmp_path / "model"
    folder.mkdir()
    model = _add_bias_model(np.zeros(3, dtype=np.float32))
    tensor = model.graph.initializer[0]
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    tensor.external_data.add(key="location", value=location)
    onnx.save_model(model, folder / "m.onnx")
    with pytest.raises(ModelFormatError, match="initializer 'bias'") as error:
        kuiper.load(folder / "m.onnx")
    assert "folder" in str(error.value) or "relative" in str(error.value)


def test_raw_data_of_the_wrong_length_is_refused():
    model = _add_bias_model(np.zeros(3, dtype=np.float32))
    model.graph.initializer[0].raw_data = b"\0" * 8
    with pytest.raises(ModelFormatError, match="initializer 'bias'.*8 bytes, expected 12"):
        kuiper.load(model.SerializeToString())


def test_a_huge_declared_tensor_is_refused_before_it_is_allocated():
    model = _add_bias_model(np.zeros(3, dtype=np.float32))
    tensor = model.graph.initializer[0]
    tensor.ClearField("raw_data")
    tensor.ClearField("dims")
    tensor.dims.extend([1 << 20, 1 << 20])  # 4 TiB of float32, and no data at all
    with pytest.raises(SizeLimitError, match="initializer 'bias'"):
        kuiper.load(model.SerializeToString())


def test_a_file_over_the_size_budget_is_refused_before_it_is_read(tmp_path, monkeypatch):
    path = tmp_path / "m.onnx"
    onnx.save_model(_add_bias_model(np.zeros(3, dtype=np.float32)), path)
    monkeypatch.setenv("KUIPER_MEMORY_BUDGET", "16")
    with pytest.raises(SizeLimitError, match="m.onnx"):
        kuiper.load(path)


def test_bytes_that_are_no_model_are_refused():
    with pytest.raises(ModelFormatError, match="not an ONNX model"):
        kuiper.load(b"\x08\x07\xff\xff\xff garbage", format="onnx")


def test_an_op_without_translation_is_named_with_its_nodes():
    node = helper.make_node("StringNormalizer", ["x"], ["y"], name="normalize_text")
    model = _model([node], [_tensor("x", [2])], [_tensor("y", [2])])
    with pytest.raises(UnsupportedOperatorError, match="StringNormalizer: it computes on strings.*normalize_text"):
        kuiper.load(model)


def test_a_bad_attribute_names_the_node():
    node = helper.make_node("Transpose", ["x"], ["y"], name="swap", perm=[0, 0])
    model = _model([node], [_tensor("x", [2, 3])], [_tensor("y", [3, 2])])
    with pytest.raises(OperatorParamError, match=r"node 0 'swap' \(Transpose\): perm \[0, 0\]"):
        kuiper.load(model)


def test_a_shape_from_a_graph_input_must_be_known_at_load_time():
    node = helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")
    model = _model([node], [_tensor("x", [2, 3]), _tensor("shape", [2], TensorProto.INT64)], [_tensor("y", [3, 2])])
    with pytest.raises(OperatorParamError, match="graph input 'shape'.*known_inputs"):
        kuiper.load(model)
    built = kuiper.load(model, known_inputs={"shape": np.array([3, 2])})
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(built(x, to_numpy=True), x.reshape(3, 2))


def test_values_known_at_load_time_are_computed_by_kuipers_own_ops():
    """Shape -> Gather -> Concat -> Reshape, as exporters write a flatten: the shape is known when loading."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Constant", [], ["i"], value=numpy_helper.from_array(np.array([0], dtype=np.int64))),
        helper.make_node("Gather", ["s", "i"], ["batch"]),
        helper.make_node("Constant", [], ["rest"], value=numpy_helper.from_array(np.array([-1], dtype=np.int64))),
        helper.make_node("Concat", ["batch", "rest"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
    ]
    model = _model(nodes, [_tensor("x", [2, 3, 4])], [_tensor("y", [2, 12])])
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(kuiper.load(model)(x, to_numpy=True), x.reshape(2, 12))


def test_without_the_onnx_package_the_error_says_how_to_install_it(monkeypatch):
    model = _add_bias_model(np.zeros(3, dtype=np.float32)).SerializeToString()
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx now raises ImportError
    with pytest.raises(KuiperError, match=r"'onnx' package.*pip install \"kuiper\[onnx\]\""):
        kuiper.load(model)


def test_the_backend_runs_a_model_with_a_shape_input_fed_at_run_time():
    node = helper.make_node("Reshape", ["x", "shape"], ["y"])
    model = _model([node], [_tensor("x", [2, 3]), _tensor("shape", [2], TensorProto.INT64)], [_tensor("y", [3, 2])])
    prepared = backend.prepare(model)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for target in ([3, 2], [1, 6]):
        (y,) = prepared.run([x, np.array(target)])
        np.testing.assert_array_equal(y, x.reshape(target))


def test_a_shape_computed_from_a_graph_input_names_that_input():
    nodes = [
        helper.make_node("Constant", [], ["one"], value=numpy_helper.from_array(np.array([1, 0], dtype=np.int64))),
        helper.make_node("Add", ["half", "one"], ["target"]),
        helper.make_node("Reshape", ["x", "target"], ["y"], name="reshape"),
    ]
    model = _model(nodes, [_tensor("x", [2, 3]), _tensor("half", [2], TensorProto.INT64)], [_tensor("y", [3, 2])])
    with pytest.raises(OperatorParamError, match="computed from the graph input 'half'.*known_inputs"):
        kuiper.load(model)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    built = kuiper.load(model, known_inputs={"half": np.array([2, 2])})
    np.testing.assert_array_equal(built(x, to_numpy=True), x.reshape(3, 2))


def test_a_loop_stacks_its_scan_outputs_and_carries_its_values():
    """for i in range(3): total += x * i, and each step's x * i is stacked: against NumPy."""
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["i_float"], to=TensorProto.FLOAT),
         helper.make_node("Mul", ["x", "i_float"], ["scaled"]),
         helper.make_node("Add", ["total_in", "scaled"], ["total_out"]),
         helper.make_node("Identity", ["condition_in"], ["condition_out"]),
         helper.make_node("Identity", ["scaled"], ["step"])],
        "body",
        [_tensor("i", [], TensorProto.INT64), _tensor("condition_in", [], TensorProto.BOOL), _tensor("total_in", [2])],
        [_tensor("condition_out", [], TensorProto.BOOL), _tensor("total_out", [2]), _tensor("step", [2])])
    loop = helper.make_node("Loop", ["trips", "", "start"], ["total", "steps"], body=body)
    trips = numpy_helper.from_array(np.array(3, dtype=np.int64), "trips")
    model = _model([loop], [_tensor("x", [2]), _tensor("start", [2])], [_tensor("total", [2]), _tensor("steps", [3, 2])],
                   [trips])
    x, start = np.array([1.5, -2.0], dtype=np.float32), np.array([10, 20], dtype=np.float32)
    total, steps = kuiper.load(model)(x, start, to_numpy=True)
    expected = np.stack([x * i for i in range(3)])
    np.testing.assert_array_equal(steps, expected)
    np.testing.assert_array_equal(total, start + expected.sum(axis=0))


def _counting_loop(grow: bool):
    """A Loop whose body declares no shape for its loop value v; each step stacks v, then v + 1 (or, with
    ``grow``, v + 1 broadcast against a column: a shape that changes every step)."""
    untyped = helper.make_tensor_value_info("v_in", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Identity", ["condition_in"], ["condition_out"]),
             helper.make_node("Identity", ["v_in"], ["step"]),
             helper.make_node("Add", ["v_in", "one"], ["v_next"])]
    if grow:
        nodes.append(helper.make_node("Mul", ["v_next", "column"], ["v_out"]))
    else:
        nodes.append(helper.make_node("Identity", ["v_next"], ["v_out"]))
    body = helper.make_graph(
        nodes, "body", [_tensor("i", [], TensorProto.INT64), _tensor("condition_in", [], TensorProto.BOOL), untyped],
        [_tensor("condition_out", [], TensorProto.BOOL),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("step", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(np.float32(1), "one"),
                     numpy_helper.from_array(np.ones((2, 1), np.float32), "column")])
    loop = helper.make_node("Loop", ["trips", "", "start"], ["last", "steps"], body=body)
    return _model([loop], [_tensor("start", [2])], [helper.make_tensor_value_info("last", TensorProto.FLOAT, None),
                                                      helper.make_tensor_value_info("steps", TensorProto.FLOAT, None)],
                  [numpy_helper.from_array(np.array(3, dtype=np.int64), "trips")])


def test_a_loop_value_that_keeps_its_shape_gives_its_scan_output_a_shape():
    start = np.float32([0.5, -1.0])
    last, steps = kuiper.load(_counting_loop(grow=False))(start, to_numpy=True)
    np.testing.assert_array_equal(steps, np.stack([start, start + 1, start + 2]))
    np.testing.assert_array_equal(last, start + 3)


def test_a_loop_value_that_changes_shape_leaves_its_scan_output_unknown():
    with pytest.raises(OperatorParamError, match="has no static shape, which its stack needs"):
        kuiper.load(_counting_loop(grow=True))


def test_a_sub_graph_reads_a_shape_the_outer_graph_computes_at_load_time():
    """Scan's body reshapes each row with a shape the outer graph builds from Shape(x): known at load time."""
    body = helper.make_graph(
        [helper.make_node("Reshape", ["row", "row_shape"], ["column"])], "body",
        [_tensor("row", [4])], [_tensor("column", [4, 1])])
    nodes = [helper.make_node("Shape", ["x"], ["width"], start=1),
             helper.make_node("Concat", ["width", "one"], ["row_shape"], axis=0),
             helper.make_node("Scan", ["x"], ["columns"], body=body, num_scan_inputs=1)]
    model = _model(nodes, [_tensor("x", [3, 4])], [_tensor("columns", [3, 4, 1])],
                   [numpy_helper.from_array(np.array([1], np.int64), "one")])
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(kuiper.load(model)(x, to_numpy=True), x[:, :, None])


@pytest.mark.parametrize("mode, want", [
    ("TF", [[2, 1, 2], [1, 0, 1]]),
    ("IDF", [[0.5, 2, 3], [0.5, 0, 3]]),
    ("TFIDF", [[1, 2, 6], [0.5, 0, 3]]),
])
def test_tf_idf_vectorizer_counts_skipping_n_grams_by_hand(mode, want):
    """Pool: 1-grams 1 and 3, the 2-gram (1, 2); one skip allowed. Row 0 has 1 twice, 3 once, (1, 2) twice
    side by side; row 1 has 1 once and (1, 2) once with one item between."""
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], min_gram_length=1, max_gram_length=2,
                            max_skip_count=1, mode=mode, ngram_counts=[0, 2], ngram_indexes=[0, 1, 2],
                            pool_int64s=[1, 3, 1, 2], weights=[0.5, 2.0, 3.0])
    model = _model([node], [_tensor("x", [2, 5], TensorProto.INT64)], [_tensor("y", [2, 3])], opset=9)
    x = np.array([[1, 2, 1, 2, 3], [1, 5, 2, 0, 0]], np.int64)
    np.testing.assert_allclose(kuiper.load(model)(x, to_numpy=True), np.array(want, np.float32))


@pytest.mark.parametrize("mels, dft_length, rate, low, high",
                         [(8, 64, 8000, 0.0, 4000.0), (20, 16, 16000, 100.0, 7000.0)])
def test_mel_weight_matrix_matches_onnxs_reference(mels, dft_length, rate, low, high):
    """Against onnx.reference; the second case has filters whose left point is their center (few bins, many mels)."""
    reference = pytest.importorskip("onnx.reference")
    names = ["mels", "dft_length", "rate", "low", "high"]
    node = helper.make_node("MelWeightMatrix", names, ["w"])
    inputs = [_tensor(n, [], TensorProto.INT64) for n in names[:3]]
    inputs += [_tensor(n, [], TensorProto.FLOAT) for n in names[3:]]
    model = _model([node], inputs, [_tensor("w", None)], opset=17)
    feeds = [np.int64(mels), np.int64(dft_length), np.int64(rate), np.float32(low), np.float32(high)]
    want = reference.ReferenceEvaluator(model).run(None, dict(zip(names, feeds)))[0]
    got = kuiper.load(model, known_inputs={"mels": feeds[0], "dft_length": feeds[1]})(*feeds[2:], to_numpy=True)
    np.testing.assert_array_equal(got, want)
    assert np.count_nonzero(want) >= mels // 2  # filters, not a matrix of zeros


@pytest.mark.parametrize("mode", ["up", "down", "nearest"])
@pytest.mark.parametrize("saturate", [0, 1])
def test_casts_to_float8_e8m0_round_as_onnx_defines(mode, saturate):
    """Against onnx.numpy_helper.to_float8e8m0 (ONNX's definition, on the float32's bits): powers of two,
    values between them (a quarter, a half and three quarters of the way), the largest and tiny values."""
    values = np.float32([1.0, 1.25, 1.5, 1.75, 3.0, 0.375, 2.0 ** 127, 3.0e38, 1e-39, 0.0, np.inf, np.nan])
    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT8E8M0, round_mode=mode, saturate=saturate)
    model = _model([node], [_tensor("x", [len(values)])], [_tensor("y", [len(values)], TensorProto.FLOAT8E8M0)],
                   opset=25)
    got = kuiper.load(model)(values, to_numpy=True)
    want = numpy_helper.to_float8e8m0(values, saturate=bool(saturate), round_mode=mode)
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("aggregate", [0, 1, 2, 3])
def test_tree_ensemble_of_two_trees_matches_onnxs_reference(aggregate):
    """Tree A: x0 <= 0.5 ? (x1 < 0 ? leaf 1 : leaf 2) : leaf 0. Tree B: x1 > 1 (a NaN counts as true) ?
    leaf 3 : leaf 4. Leaves go to targets 0, 1, 0, 1, 2; average, sum, min and max of them."""
    reference = pytest.importorskip("onnx.reference")
    node = helper.make_node(
        "TreeEnsemble", ["x"], ["y"], domain="ai.onnx.ml", aggregate_function=aggregate, n_targets=3,
        tree_roots=[0, 2], nodes_modes=numpy_helper.from_array(np.uint8([0, 1, 3])),
        nodes_featureids=[0, 1, 1], nodes_splits=numpy_helper.from_array(np.float32([0.5, 0.0, 1.0])),
        nodes_truenodeids=[1, 1, 3], nodes_trueleafs=[0, 1, 1], nodes_falsenodeids=[0, 2, 4],
        nodes_falseleafs=[1, 1, 1], nodes_missing_value_tracks_true=[0, 0, 1],
        leaf_targetids=[0, 1, 0, 1, 2], leaf_weights=numpy_helper.from_array(np.float32([1.5, -2.0, 4.0, 8.0, 16.0])))
    graph = helper.make_graph([node], "g", [_tensor("x", [5, 2])], [_tensor("y", [5, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("ai.onnx.ml", 5)])
    x = np.float32([[0.0, -1.0], [0.0, 2.0], [1.0, 0.5], [0.5, np.nan], [2.0, 3.0]])
    want = reference.ReferenceEvaluator(model).run(None, {"x": x})[0]
    np.testing.assert_allclose(kuiper.load(model)(x, to_numpy=True), want, rtol=1e-6)


@pytest.mark.parametrize("reverse", [0, 1])
def test_a_scan_before_opset_9_runs_each_batch_entry(reverse):
    """Opset 8: a batch dim first everywhere; the body sums rows of one entry (running sums stacked)."""
    body = helper.make_graph([helper.make_node("Add", ["total_in", "row"], ["total_out"]),
                              helper.make_node("Identity", ["total_out"], ["running"])], "body",
                             [_tensor("total_in", [2]), _tensor("row", [2])],
                             [_tensor("total_out", [2]), _tensor("running", [2])])
    scan = helper.make_node("Scan", ["", "start", "x"], ["total", "runs"], body=body, num_scan_inputs=1,
                            directions=[reverse])
    model = _model([scan], [_tensor("start", [2, 2]), _tensor("x", [2, 3, 2])],
                   [_tensor("total", [2, 2]), _tensor("runs", [2, 3, 2])], opset=8)
    start = np.float32([[0, 100], [10, 20]])
    x = np.arange(12, dtype=np.float32).reshape(2, 3, 2)
    total, runs = kuiper.load(model)(start, x, to_numpy=True)
    ordered = x[:, ::-1] if reverse else x
    np.testing.assert_array_equal(runs, start[:, None] + np.cumsum(ordered, axis=1))
    np.testing.assert_array_equal(total, start + x.sum(axis=1))


def test_reshapes_built_from_the_shape_of_a_tensor_with_a_free_batch():
    """What exporters write for a free batch: GroupNorm's reshape to [0, 2, -1] and back to Shape(x), and
    ViT's target Concat(Shape(x)[0:2], [-1]); each leaves one dim unknown at load, found at run time."""
    nodes = [helper.make_node("Reshape", ["x", "groups"], ["grouped"]),
             helper.make_node("Relu", ["grouped"], ["activated"]),
             helper.make_node("Shape", ["x"], ["x_shape"]),
             helper.make_node("Reshape", ["activated", "x_shape"], ["back"]),
             helper.make_node("Slice", ["x_shape", "zero", "two"], ["leading"]),
             helper.make_node("Concat", ["leading", "minus_one"], ["flat_shape"], axis=0),
             helper.make_node("Reshape", ["back", "flat_shape"], ["y"])]
    constants = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
                 (("groups", [0, 2, -1]), ("zero", [0]), ("two", [2]), ("minus_one", [-1]))]
    model = _model(nodes, [_tensor("x", ["n", 4, 2, 3])], [_tensor("y", ["n", 4, 6])], constants)
    loaded = kuiper.load(model)
    for batch in (1, 3):
        x = np.random.default_rng(batch).standard_normal((batch, 4, 2, 3)).astype(np.float32)
        np.testing.assert_array_equal(loaded(x, to_numpy=True), np.maximum(x, 0).reshape(batch, 4, 6))


def test_two_free_dims_in_a_run_time_reshape_target_are_refused_by_name():
    nodes = [helper.make_node("Shape", ["x"], ["x_shape"]), helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Reshape", ["r", "x_shape"], ["y"])]
    model = _model(nodes, [_tensor("x", ["n", "m"])], [_tensor("y", ["n", "m"])])
    with pytest.raises(OperatorParamError, match="more than one dim unknown at load"):
        kuiper.load(model)


def test_a_vit_style_graph_with_a_free_batch():
    """torch's cls.expand(batch, -1, -1) (Where(Equal(shape, -1), 1, shape)), a LayerNorm and a Gather on a
    tensor whose batch is free, and a Reshape to [batch, 3, 2, width / 2]: against NumPy at two batches."""
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
             helper.make_node("Unsqueeze", ["batch", "axes0"], ["batch1"]),
             helper.make_node("Concat", ["batch1", "minus_one", "minus_one"], ["wanted"], axis=0),
             helper.make_node("Equal", ["wanted", "minus_ones"], ["unset"]),
             helper.make_node("Where", ["unset", "ones", "wanted"], ["sizes"]),
             helper.make_node("Expand", ["cls", "sizes"], ["tokens"]),
             helper.make_node("Concat", ["tokens", "x"], ["joined"], axis=1),
             helper.make_node("LayerNormalization", ["joined", "gamma"], ["normed"], axis=-1, epsilon=1e-5),
             helper.make_node("Gather", ["normed", "zero"], ["first"], axis=1),
             helper.make_node("Gather", ["shape", "two"], ["width"], axis=0),
             helper.make_node("Div", ["width", "two"], ["half"]),
             helper.make_node("Unsqueeze", ["half", "axes0"], ["half1"]),
             helper.make_node("Concat", ["batch1", "three", "two1", "half1"], ["split_shape"], axis=0),
             helper.make_node("Reshape", ["x", "split_shape"], ["split"])]
    constants = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
                 (("zero", 0), ("two", 2), ("axes0", [0]), ("minus_one", [-1]), ("minus_ones", [-1, -1, -1]),
                  ("ones", [1, 1, 1]), ("three", [3]), ("two1", [2]))]
    cls = np.float32([[[0.5, -1.0, 2.0, 0.0]]])
    constants += [numpy_helper.from_array(cls, "cls"), numpy_helper.from_array(np.ones(4, np.float32), "gamma")]
    model = _model(nodes, [_tensor("x", ["n", 3, 4])], [_tensor("first", ["n", 4]), _tensor("split", ["n", 3, 2, 2])],
                   constants, opset=17)
    loaded = kuiper.load(model)
    for batch in (1, 3):
        x = np.random.default_rng(batch).standard_normal((batch, 3, 4)).astype(np.float32)
        first, split = loaded(x, to_numpy=True)
        centered = cls[0, 0] - cls[0, 0].mean()
        want = centered / np.sqrt((centered ** 2).mean() + 1e-5)
        np.testing.assert_allclose(first, np.broadcast_to(want, (batch, 4)), rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(split, x.reshape(batch, 3, 2, 2))


def test_split_needs_only_the_split_dim_known():
    node = helper.make_node("Split", ["x", "sizes"], ["a", "b"], axis=1)
    model = _model([node], [_tensor("x", ["n", 5])], [_tensor("a", ["n", 2]), _tensor("b", ["n", 3])],
                   [numpy_helper.from_array(np.array([2, 3], np.int64), "sizes")], opset=13)
    x = np.arange(15, dtype=np.float32).reshape(3, 5)
    a, b = kuiper.load(model)(x, to_numpy=True)
    np.testing.assert_array_equal(a, x[:, :2])
    np.testing.assert_array_equal(b, x[:, 2:])


def test_a_slice_that_moves_with_the_loop_iteration():
    """for i in range(5): total += sum(x[i:i + 2]); the last window is cut short by the end of x."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["condition_in"], ["condition_out"]),
         helper.make_node("Unsqueeze", ["i", "axes"], ["start"]),
         helper.make_node("Add", ["start", "two"], ["end"]),
         helper.make_node("Slice", ["x", "start", "end"], ["window"]),
         helper.make_node("ReduceSum", ["window", "axes"], ["window_sum"], keepdims=1),
         helper.make_node("Add", ["total_in", "window_sum"], ["total_out"])],
        "body", [_tensor("i", [], TensorProto.INT64), _tensor("condition_in", [], TensorProto.BOOL),
                 _tensor("total_in", [1])],
        [_tensor("condition_out", [], TensorProto.BOOL), _tensor("total_out", [1])])
    loop = helper.make_node("Loop", ["trips", "", "start_total"], ["total"], body=body)
    constants = [numpy_helper.from_array(np.array(5, np.int64), "trips"),
                 numpy_helper.from_array(np.array([0], np.int64), "axes"),
                 numpy_helper.from_array(np.array([2], np.int64), "two")]
    model = _model([loop], [_tensor("x", [5]), _tensor("start_total", [1])], [_tensor("total", [1])], constants)
    x = np.float32([1, 2, 3, 4, 5])
    total = kuiper.load(model)(x, np.float32([0.5]), to_numpy=True)
    np.testing.assert_array_equal(total, [0.5 + sum(x[i:i + 2].sum() for i in range(5))])


@pytest.mark.parametrize(("flag", "want_shape"), [(True, (3, 2)), (False, (6,))])
def test_an_if_decided_at_load_time_takes_its_branch_and_its_shapes_stay_known(flag, want_shape):
    # The first If makes the target shape of a Reshape inside the second If's branch: a shape kuiper needs
    # at load time, which a branch lowered on its own (as a run-time If's are) does not know.
    def shape_branch(name, shape):
        made = helper.make_node("Constant", [], [f"{name}_shape"], value=numpy_helper.from_array(
            np.asarray(shape, dtype=np.int64)))
        return helper.make_graph([made], name, [], [_tensor(f"{name}_shape", [len(shape)], TensorProto.INT64)])

    def reshape_branch(name):
        made = helper.make_node("Reshape", ["x", "shape"], [f"{name}_y"])
        return helper.make_graph([made], name, [], [_tensor(f"{name}_y", None)])

    nodes = [
        helper.make_node("Constant", [], ["flag"], value=numpy_helper.from_array(np.asarray(flag))),
        helper.make_node("If", ["flag"], ["shape"], then_branch=shape_branch("wide", [3, 2]),
                         else_branch=shape_branch("flat", [6])),
        helper.make_node("Constant", [], ["always"], value=numpy_helper.from_array(np.asarray(True))),
        helper.make_node("If", ["always"], ["y"], then_branch=reshape_branch("taken"),
                         else_branch=reshape_branch("skipped")),
    ]
    model = _model(nodes, [_tensor("x", [2, 3])], [_tensor("y", None)])
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = kuiper.load(model)(x, to_numpy=True)
    np.testing.assert_array_equal(got, x.reshape(want_shape))
