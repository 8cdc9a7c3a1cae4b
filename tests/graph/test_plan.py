"""The execution plan (kuiper/graph/plan.py): the flat step loop a Model runs each call with.

It must compute what the steps compute (ops of one, two and more inputs, several
outputs), release each intermediate after its last reader, name the op in every
failure, and run the same steps with an observer as without.
"""

from __future__ import annotations

import warnings
import weakref

import numpy as np
import pytest

import kuiper
from kuiper.errors import KuiperError, ShapeError
from kuiper.graph import OpExecutionError, StepObserver

from conftest import write_model

# x -> relu a; chunk a into b, c; b + c = d; cat(d, b, c) = e; tanh e = y
GRAPH = """7767517
7 7
pnnx.Input i 0 1 x #x=(2,4)f32
nn.ReLU relu 1 1 x a
torch.chunk split 1 2 a b c chunks=2 dim=1
pnnx.Expression add 2 1 b c d expr=add(@0,@1)
torch.cat join 3 1 d b c e dim=1
nn.Tanh tanh 1 1 e y
pnnx.Output o 1 0 y
"""


def graph_model(tmp_path):
    return kuiper.load(write_model(tmp_path, GRAPH), fuse=False)


def expected(x):
    a = np.maximum(np.asarray(x, np.float64), 0)
    b, c = a[:, :2], a[:, 2:]
    return np.tanh(np.concatenate([b + c, b, c], axis=1))


def test_steps_of_one_two_and_three_inputs_and_two_outputs_compute_the_graph(tmp_path):
    model = graph_model(tmp_path)
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    assert [step.node.name for step in model.steps] == ["relu", "split", "add", "join", "tanh"]
    np.testing.assert_allclose(model(x), expected(x), atol=1e-6)
    np.testing.assert_allclose(model(x * 2), expected(x * 2), atol=1e-6)  # no state kept between calls


def test_each_intermediate_is_released_after_its_last_reader(tmp_path):
    model = graph_model(tmp_path)
    alive_when = {}  # step name -> {value name: alive?} as that step starts
    produced = {}  # value name -> weak reference to the array

    for step in model.steps:
        forward = step.op.forward

        def recording(*args, forward=forward, node=step.node):
            alive_when[node.name] = {name: ref() is not None for name, ref in produced.items()}
            result = forward(*args)
            values = result if isinstance(result, (tuple, list)) else (result,)
            for name, value in zip(node.outputs, values):
                produced[name] = weakref.ref(value)
            return result

        step.op.forward = recording  # wrapped after the build: the plan still calls it
    output = model(np.ones((2, 4), np.float32))
    # b and c are views of a, so a lives as long as they do; d, b and c die after join, their last reader.
    assert alive_when["join"] == {"a": True, "b": True, "c": True, "d": True}
    assert alive_when["tanh"] == {"a": False, "b": False, "c": False, "d": False, "e": True}
    assert produced["y"]() is output


def test_an_observer_sees_the_same_steps_and_values_as_a_plain_run(tmp_path):
    model = graph_model(tmp_path)
    x = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)

    class Recorder(StepObserver):
        def __init__(self):
            self.steps = []

        def after_step(self, node, inputs, outputs):
            self.steps.append((node.name, len(inputs), [tuple(v.shape) for v in outputs]))

    recorder = Recorder()
    observed = model(x, observer=recorder)
    np.testing.assert_array_equal(observed, model(x))
    assert recorder.steps == [("relu", 1, [(2, 4)]), ("split", 1, [(2, 2), (2, 2)]), ("add", 2, [(2, 2)]),
                              ("join", 3, [(2, 6)]), ("tanh", 1, [(2, 6)])]


@pytest.mark.parametrize("observed", [False, True])
def test_a_failure_inside_an_op_names_the_op_and_its_input_shapes(tmp_path, observed):
    model = graph_model(tmp_path)

    def broken(*inputs):
        raise ValueError("bad values")

    model.steps[3].op.forward = broken
    observer = StepObserver() if observed else None
    with pytest.raises(OpExecutionError, match=r"'join'.* failed on inputs \[\(2, 2\) float32, \(2, 2\) float32, "
                                               r"\(2, 2\) float32\]: ValueError: bad values"):
        model(np.ones((2, 4), np.float32), observer=observer)


@pytest.mark.parametrize("observed", [False, True])
def test_a_kuiper_error_from_an_op_gets_the_op_named_once(tmp_path, observed):
    model = graph_model(tmp_path)

    def unnamed(x, y):
        raise ShapeError("shapes do not match")

    def named(x, y):
        raise ShapeError("op 'add': shapes do not match")

    observer = StepObserver() if observed else None
    model.steps[2].op.forward = unnamed
    with pytest.raises(ShapeError, match=r"^op 'add' .*: shapes do not match$"):
        model(np.ones((2, 4), np.float32), observer=observer)
    model.steps[2].op.forward = named
    with pytest.raises(ShapeError, match=r"^op 'add': shapes do not match$") as caught:
        model(np.ones((2, 4), np.float32), observer=observer)
    assert caught.value.__cause__ is None  # raised as it came, not chained to itself


@pytest.mark.parametrize("observed", [False, True])
def test_a_multi_output_op_returning_the_wrong_count_is_an_error_naming_it(tmp_path, observed):
    model = graph_model(tmp_path)
    model.steps[1].op.forward = lambda a: a  # one value for two outputs
    with pytest.raises(OpExecutionError, match=r"'split'.* returned 1 value\(s\) for 2 outputs"):
        model(np.ones((2, 4), np.float32), observer=StepObserver() if observed else None)


def test_every_op_failure_is_a_kuiper_error(tmp_path):
    model = graph_model(tmp_path)
    model.steps[0].op.forward = lambda x: 1 / 0
    with pytest.raises(KuiperError, match="'relu'.*ZeroDivisionError"):
        model(np.ones((2, 4), np.float32))


def test_a_call_gives_no_floating_point_warnings_and_leaves_numpy_settings_as_they_were(tmp_path):
    # PyTorch warns neither on x/0 nor on inf or NaN: a model call turns NumPy's warnings off once
    # for all its ops (Backend.floating_point_warnings_off), and back when it returns or raises.
    text = """7767517
4 4
pnnx.Input i 0 2 x y #x=(2,3)f32 #y=(2,3)f32
pnnx.Expression divide 2 1 x y q expr=div(@0,@1)
pnnx.Expression log 1 1 q z expr=log(@0)
pnnx.Output o 1 0 z
"""
    model = kuiper.load(write_model(tmp_path, text), fuse=False)
    x = np.array([[1.0, 0.0, -1.0], [2.0, 3.0, 0.0]], np.float32)
    y = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 4.0]], np.float32)
    with np.errstate(all="raise"):
        before = np.geterr()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            z = model(x, y)
        assert np.geterr() == before

        # The whole call runs with them off (an op's own NumPy code included), not just the compiled math.
        class Settings(StepObserver):
            seen: list = []

            def before_step(self, node, inputs):
                self.seen.append(np.geterr())

        model(x, y, observer=Settings())
        assert Settings.seen and all(set(seen.values()) == {"ignore"} for seen in Settings.seen)
        assert np.geterr() == before
    with np.errstate(all="ignore"):
        want = np.log(x.astype(np.float64) / y)
    np.testing.assert_array_equal(np.isnan(z), np.isnan(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(z[finite], want[finite], rtol=1e-6)
    np.testing.assert_array_equal(z[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])
