"""How a Model shows itself: a one-line repr, summary() tables, symbolic batch dims, run() by output name."""

from __future__ import annotations

import re

import numpy as np
import pytest

import kuiper
from kuiper.errors import InputError, ShapeError

from conftest import MODELS, reference_batches, write_model

FIXTURE_NAMES = sorted(p.name for p in MODELS.iterdir() if (p / "model.pnnx.param").exists())
RESNET = MODELS / "resnet18_w8" / "model.pnnx.param"


def declared_weight_count(param_path) -> int:
    """Every ``@name=(d0,d1,...)`` weight the param text declares, counted from the text alone."""
    total = 0
    for dims in re.findall(r"@\w+=\(([\d,]*)\)", param_path.read_text()):
        total += int(np.prod([int(d) for d in dims.split(",") if d]))
    return total


# ------------------------------------------------------------------ repr


def test_repr_is_one_short_line_naming_format_file_tensors_backend_and_node_count():
    model = kuiper.load(RESNET)
    text = repr(model)
    assert "\n" not in text and len(text) < 300
    assert text == ("<kuiper.Model pnnx 'model.pnnx.param' inputs=[0: (?, 3, 64, 64) float32] "
                    f"outputs=[49: (1, 1000) float32] backend=numpy nodes={len(model.steps)}>")


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_repr_of_every_fixture_stays_under_300_characters(name):
    assert len(repr(kuiper.load(MODELS / name / "model.pnnx.param"))) < 300


def test_repr_counts_the_tensors_it_cannot_list(tmp_path):
    count = 40
    names = [f"a_rather_long_input_name_number_{i:03d}" for i in range(count)]
    lines = [f"pnnx.Input in{i} 0 1 {name} #{name}=(1,3)f32" for i, name in enumerate(names)]
    lines += [f"nn.ReLU r{i} 1 1 {name} y{i}" for i, name in enumerate(names)]
    lines += [f"pnnx.Output out{i} 1 0 y{i}" for i in range(count)]
    text = f"7767517\n{len(lines)} {2 * count}\n" + "\n".join(lines) + "\n"
    model = kuiper.load(write_model(tmp_path, text, name="x" * 120))
    shown = repr(model)
    assert len(shown) < 300 and "+" in shown and "more" in shown and f"nodes={count}>" in shown


# ------------------------------------------------------------------ summary


def test_summary_has_a_row_per_executed_node_and_the_declared_parameter_total():
    model = kuiper.load(RESNET)
    summary = model.summary()
    assert [row.name for row in summary.rows] == [step.node.name for step in model.steps]
    assert summary.total_parameters == declared_weight_count(RESNET) == model.parameter_count
    assert summary.total_parameter_bytes == 4 * summary.total_parameters  # float32 weights
    fc = summary.rows[-1]
    assert (fc.name, fc.type, fc.output_shapes, fc.parameters) == ("fc", "Linear", ((1, 1000),), 64 * 1000 + 1000)


def test_summary_prints_as_a_table_with_totals():
    model = kuiper.load(RESNET, providers=False)  # every conv a row of its own
    text = str(model.summary())
    lines = text.splitlines()
    assert lines[0] == "model.pnnx.param on backend numpy"
    assert lines[2].split() == ["#", "node", "type", "output", "shape", "parameters"]
    # Step 23 of 24: each conv took the ReLU or residual add after it as its epilogue.
    assert any(line.split()[:3] == ["23", "fc", "Linear"] and line.endswith("65,000") for line in lines)
    assert lines[-1] == f"{len(model.steps)} nodes, {model.parameter_count:,} parameters (942 KiB)"
    assert repr(model.summary()) == text  # what a REPL shows


def test_summary_with_inputs_shows_the_shapes_of_that_run():
    model = kuiper.load(RESNET, providers=False)  # a row per op (the providers make the convs one sequence)
    summary = model.summary(np.zeros((2, 3, 64, 64), np.float32))
    assert summary.rows[0].output_shapes == ((2, 8, 32, 32),)
    assert summary.rows[-1].output_shapes == ((2, 1000),)
    rows = kuiper.load(RESNET).summary(np.zeros((2, 3, 64, 64), np.float32)).rows
    assert rows[0].type.startswith("Partition (") and rows[0].output_shapes == ((2, 64, 1, 1),)  # to the avg pool


def test_summary_counts_the_weights_of_fused_members(tmp_path):
    text = ("7767517\n4 3\npnnx.Input i 0 1 x #x=(1,2,3)f32\nnn.PReLU p 1 1 x y num_parameters=2 @weight=(2)f32\n"
            "nn.Tanh t 1 1 y z\npnnx.Output o 1 0 z\n")
    model = kuiper.load(write_model(tmp_path, text, {"p.weight": np.float32([0.1, 0.2]).tobytes()}))
    summary = model.summary()
    assert summary.total_parameters == 2 == model.parameter_count


# ------------------------------------------------------------------ symbolic batch


@pytest.mark.parametrize("name", ["resnet18_w8", "dynamic_reshape_expr", "two_in_two_out"])
def test_inputs_leave_the_batch_dim_free_and_any_batch_runs(name):
    model = kuiper.load(MODELS / name / "model.pnnx.param")
    assert all(spec.shape[0] is None for spec in model.inputs)
    for data in reference_batches(name).values():  # the export batch and batch 3
        outputs = model(*data["inputs"], to_numpy=True)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        assert [o.shape for o in outputs] == [w.shape for w in data["outputs"]]


def test_the_other_dims_are_still_checked():
    model = kuiper.load(RESNET)
    with pytest.raises(ShapeError, match=r"expects shape \(\?, 3, 64, 64\).*dim 2 must be 64"):
        model(np.zeros((2, 3, 32, 64), np.float32))


# ------------------------------------------------------------------ run(output_names, feeds)

TWO_OUT = MODELS / "two_in_two_out" / "model.pnnx.param"


def two_out_feeds(model):
    data = reference_batches("two_in_two_out")["b1"]
    return {spec.name: array for spec, array in zip(model.inputs, data["inputs"])}, data["outputs"]


def test_run_with_output_names_returns_those_outputs_in_that_order():
    model = kuiper.load(TWO_OUT)
    feeds, want = two_out_feeds(model)
    first, second = (spec.name for spec in model.outputs)
    got = model.run([second, first], feeds, to_numpy=True)
    assert isinstance(got, list) and len(got) == 2
    np.testing.assert_allclose(got[0], want[1], atol=1e-5)
    np.testing.assert_allclose(got[1], want[0], atol=1e-5)
    only = model.run([second], feeds, to_numpy=True)
    assert len(only) == 1 and np.array_equal(only[0], got[0])


def test_run_with_none_returns_every_output_as_a_list():
    model = kuiper.load(TWO_OUT)
    feeds, want = two_out_feeds(model)
    got = model.run(None, feeds, to_numpy=True)
    assert [g.shape for g in got] == [w.shape for w in want]


def test_run_with_an_unknown_output_name_names_it_and_the_known_ones():
    model = kuiper.load(TWO_OUT)
    feeds, _ = two_out_feeds(model)
    names = [spec.name for spec in model.outputs]
    with pytest.raises(InputError, match=re.escape(f"unknown output name(s) ['nope']; the model's outputs are {names}")):
        model.run(["nope"], feeds)


@pytest.mark.parametrize("names", ["out", [0], 5])
def test_run_with_output_names_that_are_not_a_list_of_strings_is_an_input_error(names):
    model = kuiper.load(TWO_OUT)
    feeds, _ = two_out_feeds(model)
    with pytest.raises(InputError, match=r"run\(output_names, feeds\) takes a list of output names"):
        model.run(names, feeds)


def test_an_array_two_ops_hold_is_counted_once():
    """An ONNX initializer can be a Constant and, folded, a Conv's weight: the same numbers, once."""
    import numpy as np

    from kuiper.model_ir import ModelIR, OpNode

    weight, bias = np.zeros((4, 3), np.float32), np.zeros(4, np.float32)
    ops = [OpNode("Constant", "w", [], ["w"], attrs={"data": weight}),
           OpNode("Linear", "fc", ["x"], ["y"], attrs={"weight": weight, "bias": bias})]
    assert ModelIR(ops=ops, operands={}, inputs=["x"], outputs=["y"]).parameter_count() == 12 + 4
