"""Every exported fixture model matches the PyTorch outputs saved beside it, on every available backend.

Fixtures are made by tools/make_fixtures.py (torch + pnnx); these tests need neither.
Tolerance: max abs error <= 1e-4, except outputs whose magnitude exceeds 10, which are
held to 1e-5 relative to their largest magnitude (float32 summation order differs
between PyTorch and kuiper; the relative bound is stricter than the issue's 1e-3).
"""

import numpy as np
import pytest

import kuiper

from conftest import MODELS, assert_close_to_pytorch, float64_outputs, reference_batches

FIXTURE_NAMES = sorted(p.name for p in MODELS.iterdir() if (p / "model.pnnx.param").exists())


@pytest.mark.parametrize("name", FIXTURE_NAMES)
@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
def test_fixture_matches_pytorch(name, fuse, backend_name):
    model = kuiper.load(MODELS / name / "model.pnnx.param", backend=backend_name, fuse=fuse)
    exact = float64_outputs(name)
    for batch, data in reference_batches(name).items():
        outputs = model(*data["inputs"])
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        assert len(outputs) == len(data["outputs"])
        for index, (got, want) in enumerate(zip(outputs, data["outputs"])):
            exact_output = exact[batch][index] if batch in exact else None
            assert_close_to_pytorch(got, want, f"{name} {batch} output {index}", exact_output)


def test_resnet18_is_among_the_fixtures():
    assert "resnet18_w8" in FIXTURE_NAMES


def test_run_by_name_returns_outputs_by_name():
    model = kuiper.load(MODELS / "flatten_linear" / "model.pnnx.param")
    data = reference_batches("flatten_linear")["b1"]
    results = model.run({model.inputs[0].name: data["inputs"][0]})
    assert list(results) == [spec.name for spec in model.outputs]
    assert_close_to_pytorch(results[model.outputs[0].name], data["outputs"][0], "run()")


def test_model_describes_its_inputs_and_outputs():
    model = kuiper.load(MODELS / "resnet18_w8" / "model.pnnx.param")
    (spec,) = model.inputs
    assert spec.shape == (None, 3, 64, 64) and spec.dtype == "float32"  # exported at batch 1; any batch runs
    assert model.outputs[0].shape == (1, 1000)  # as declared, at the export batch
    assert model.parameter_count > 100_000


def test_intermediate_arrays_are_released_after_their_last_use():
    model = kuiper.load(MODELS / "resnet18_w8" / "model.pnnx.param", fuse=False)
    freed = {slot for step in model.steps for slot in step.free_slots}
    outputs = set(model.output_slots)
    intermediates = {slot for step in model.steps for slot in step.output_slots} - outputs
    assert intermediates <= freed  # everything but the outputs is dropped once consumed


def test_tuple_outputs_are_flattened_into_named_outputs_with_shapes():
    model = kuiper.load(MODELS / "two_in_two_out" / "model.pnnx.param")
    data = reference_batches("two_in_two_out")["b1"]
    assert len(model.outputs) == len(data["outputs"]) == 2
    assert [spec.shape for spec in model.outputs] == [tuple(a.shape) for a in data["outputs"]]
    assert all(step.node.type != "prim::TupleConstruct" for step in model.steps)  # nothing left to run


def test_float64_references_decide_only_beyond_the_tolerance():
    want = np.array([48.0], np.float32)
    exact = np.array([48.0002])  # PyTorch's float32 is 2e-4 from the exact answer
    assert_close_to_pytorch(np.array([48.0003], np.float32), want, "within the tolerance of 4.8e-4")
    assert_close_to_pytorch(np.array([48.0006], np.float32), want, "beyond it, 4e-4 from exact", exact)
    with pytest.raises(AssertionError, match="more than 4 times PyTorch's float32"):
        assert_close_to_pytorch(np.array([48.002], np.float32), want, "1.8e-3 from exact", exact)
    with pytest.raises(AssertionError, match="max abs error"):
        assert_close_to_pytorch(np.array([48.0006], np.float32), want, "no float64 reference")


def test_the_float64_references_belong_to_their_fixtures():
    # Each float64 output lies within float32 rounding of the saved float32 one: same model, same inputs.
    for name in FIXTURE_NAMES:
        for batch, outputs in float64_outputs(name).items():
            for index, exact in enumerate(outputs):
                want = reference_batches(name)[batch]["outputs"][index]
                assert exact.dtype == np.float64 and exact.shape == want.shape
                assert np.abs(exact - want).max() <= 1e-5 * max(1.0, np.abs(exact).max()), (name, batch, index)
