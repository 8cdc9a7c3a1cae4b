"""oneDNN convolutions as specialized steps: after a model's first call its runs of convs run as one
sequence of primitive calls (``OneDnnSequence.specialized``, conv_sequence.py) and single convs as one-conv
sequences (``OneDnnPath.specialized``, ``PointwiseDepthwise.specialized``), behind the guards each call
runs.  They must give exactly what the ops' forwards give, also where a guard sends an input back to
them (NaN, infinities, sums that overflow, another batch), when several threads call the model at once,
and a warm call allocates nothing but what leaves the sequence."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import kuiper
from kuiper import onednn
from kuiper.numba_kernels import conv_sequence
from kuiper.numba_kernels.conv_depthwise_pair import PointwiseDepthwise

from conftest import MODELS, reference_batches

pytestmark = pytest.mark.skipif(not onednn.available(), reason=onednn.describe())

FIXTURES = ["mobilenet_v2", "resnet18_w8", "yolov5_style"]


def _load(name):
    return kuiper.load(MODELS / name / "model.pnnx.param", backend="numpy", threads=2)


def _forwards_only(model, x):
    model.plan._specialized_at = None  # the plan's specializing run calls every op's own forward
    return model(x)


def _first_input(name):
    return sorted(reference_batches(name).items())[0][1]["inputs"][0]


STEP_KINDS = ("OneDnnPath", "PointwiseDepthwise", "OneDnnSequence")


def _prepared_steps(model) -> dict[str, int]:
    """How many steps run each kind of sequence."""
    counts: dict[str, int] = {}
    for entry in model.plan.entries:
        kind = getattr(entry[0], "__qualname__", "").split(".")[0]
        qualname = getattr(entry[0], "__qualname__", "")
        if qualname.endswith(("specialized.<locals>.step", "_sequence_step.<locals>.step")) and kind in STEP_KINDS:
            counts[kind] = counts.get(kind, 0) + 1
    return counts


def test_runs_of_convs_are_sequences_and_conv_steps_are_one_conv_sequences():
    counts = {}
    for name in FIXTURES:
        model = _load(name)
        model(_first_input(name))
        for kind, count in _prepared_steps(model).items():
            counts[kind] = counts.get(kind, 0) + count
    assert counts.get("OneDnnSequence", 0) >= 3 and counts.get("OneDnnPath", 0) >= 5, counts
    sequences = [step for step in _load("mobilenet_v2").steps if isinstance(step.op, conv_sequence.OneDnnSequence)]
    assert len(sequences) == 1 and len(sequences[0].op.members) >= 10  # the pairs are members too
    assert any(isinstance(unit.op, PointwiseDepthwise) for unit in sequences[0].op.members)
    # ResNet's blocks read their input twice (the convs and the residual sum): one run after the max pool
    sequences = [step for step in _load("resnet18_w8").steps if isinstance(step.op, conv_sequence.OneDnnSequence)]
    assert len(sequences) == 1 and len(sequences[0].op.members) >= 15


def test_a_value_read_outside_ends_a_run(tmp_path):
    """Each run's values but its last are read only inside it: a value read by a later op outside ends the
    run there (so no planned buffer is ever handed out)."""
    for name in FIXTURES:
        model = _load(name)
        readers: dict[str, int] = {}
        for step in model.steps:
            for operand in step.node.inputs:
                readers[operand] = readers.get(operand, 0) + 1
        for step in model.steps:
            if not isinstance(step.op, conv_sequence.OneDnnSequence):
                continue
            inside: dict[str, int] = {}
            for unit in step.op.members:
                for operand in unit.node.inputs:
                    inside[operand] = inside.get(operand, 0) + 1
            made = [unit.node.outputs[0] for unit in step.op.members]
            assert step.node.outputs == made[-1:]
            assert all(operand not in readers for operand in made[:-1])  # no step outside reads them


@pytest.mark.parametrize("name", FIXTURES)
@pytest.mark.parametrize("special", ["nan", "inf", "overflow"])
def test_inputs_the_guards_refuse_take_the_forwards(name, special):
    fast, plain = _load(name), _load(name)
    x = _first_input(name)
    np.testing.assert_array_equal(fast(x), _forwards_only(plain, x))
    assert _prepared_steps(fast)
    odd = x.copy()
    if special == "nan":
        odd.reshape(-1)[:: 97] = np.nan
    elif special == "inf":
        odd.reshape(-1)[:: 89] = np.inf
    else:  # finite, but sums of such values overflow float32
        odd *= np.float32(3e37)
    got, want = fast(odd), _forwards_only(plain, odd)
    np.testing.assert_array_equal(got, want)  # NaN where NaN, inf where inf
    np.testing.assert_array_equal(fast(x), _forwards_only(plain, x))  # and back


def test_a_model_with_prepared_conv_calls_runs_in_several_threads_at_once():
    model = _load("mobilenet_v2")
    x = _first_input("mobilenet_v2")
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal(x.shape).astype(np.float32) for _ in range(4)]
    model(x)
    wanted = [model(value) for value in inputs]
    got: dict = {}

    def run(index):
        for _ in range(5):
            got[index] = model(inputs[index])

    threads = [threading.Thread(target=run, args=(index,)) for index in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for index, want in enumerate(wanted):
        np.testing.assert_array_equal(got[index], want)


def test_a_warm_call_allocates_only_what_leaves_its_sequences():
    """Between the convs of a run, activations live in buffers planned once (onednn/sequence.py): a warm call
    allocates each sequence's output and what the steps outside the sequences make, not the members'."""
    import tracemalloc

    model = _load("mobilenet_v2")
    x = _first_input("mobilenet_v2")
    made: dict = {}

    class Outputs:
        def before_step(self, node, inputs):
            pass

        def after_step(self, node, inputs, outputs):
            made[node.name] = sum(getattr(getattr(value, "buffer", value), "nbytes", 0) for value in outputs)

    model(x)
    model(x, observer=Outputs())
    model(x)  # the call that records the memory plan (kuiper/graph/memory_plan.py); the next one is steady
    members = sum(len(step.op.members) for step in model.steps if isinstance(step.op, conv_sequence.OneDnnSequence))
    assert members >= 10
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        model(x)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # every step's output at once, plus Python objects: a member's activation of 4 KB or more would show
    assert peak - before < sum(made.values()) + 4096, (peak - before, made)


def test_inputs_on_either_side_of_the_threshold_run_as_the_ops_would():
    """A run's guard is one threshold on its input's norm (the largest for which every member's own guard
    passes): just under it the sequence runs, just over it the members run op by op, and both give what
    the members' forwards give."""
    model = _load("resnet18_w8")
    (step,) = [step for step in model.plan.steps if isinstance(step.op, conv_sequence.OneDnnSequence)]
    seen = {}

    class Inputs:
        def before_step(self, node, inputs):
            seen[node.name] = inputs[0]

        def after_step(self, node, inputs, outputs):
            pass

    x = _first_input("resnet18_w8")
    model(x)
    model(x, observer=Inputs())
    given = seen[step.node.name]  # the model's input: the stem conv and its max pool are members
    fast = step.op.specialized([given])
    threshold = fast.threshold
    assert 1.0 < threshold < 1e15  # ReLU blocks: the bounds grow layer by layer
    assert len(step.op.members) >= 17  # the stem conv, its max pool and every block's convs
    norm = conv_sequence.norm_of(given)
    calls = []
    sequence_call = onednn.Sequence.__call__

    def counting(self, *arrays):
        calls.append(self)
        return sequence_call(self, *arrays)

    for factor, runs_the_sequence in ((0.99, True), (1.01, False)):
        scaled = given * np.float32(factor * threshold / norm)
        calls.clear()
        onednn.Sequence.__call__ = counting
        try:
            got = fast(scaled)
        finally:
            onednn.Sequence.__call__ = sequence_call
        assert bool(calls) == runs_the_sequence
        want = step.op.run_members(scaled)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))



def test_inputs_of_other_kinds_get_sequences_of_their_own():
    """A batch of another size (a stream's last chunk) gets its own sequence on its second call, up to
    MAX_KINDS kinds; every call gives what the forwards give."""
    fast, plain = _load("mobilenet_v2"), _load("mobilenet_v2")
    (step,) = [step for step in fast.steps if isinstance(step.op, conv_sequence.OneDnnSequence)]
    rng = np.random.default_rng(5)
    x = _first_input("mobilenet_v2")
    batches = [rng.standard_normal((size,) + x.shape[1:]).astype(np.float32) for size in (1, 3, 1, 3, 2, 3, 2)]
    ran = []
    sequence_call = onednn.Sequence.__call__

    def counting(self, *arrays):
        ran.append(arrays[0].shape[0])
        return sequence_call(self, *arrays)

    onednn.Sequence.__call__ = counting
    try:
        for batch in batches:
            np.testing.assert_array_equal(fast(batch), _forwards_only(plain, batch))
    finally:
        onednn.Sequence.__call__ = sequence_call
    # Each kind's first call runs the members (and makes their plans); its later calls the sequence.
    assert ran == [1, 3, 3, 2], ran
    assert len(step.op._kinds) == 2


def test_inputs_a_kinds_step_refuses_run_op_by_op_instead_of_asking_again():
    """A second kind's step once fell back to the kind lookup, which found that step again: an input whose
    kind key matched but which the step's own guard refused (a float32 dtype equal to NumPy's but another
    object, as an unpickled array carries) recursed until Python's limit.  The sequence's step is called
    here as the plan calls it, so the model's own feed handling (which gives feeds NumPy's dtype) is not
    in between."""
    import pickle

    model = _load("resnet18_w8")
    x = _first_input("resnet18_w8")
    model(x)
    (index,) = [i for i, step in enumerate(model.plan.steps) if isinstance(step.op, conv_sequence.OneDnnSequence)]
    step = model.plan.entries[index][0]
    pair = np.ascontiguousarray(np.concatenate([x, x]))
    want = np.asarray(step(pair))
    for _ in range(4):
        unpickled = pickle.loads(pickle.dumps(pair))
        assert unpickled.dtype is not np.dtype(np.float32)
        np.testing.assert_array_equal(np.asarray(step(unpickled)), want)


def test_unpickled_feeds_run_the_sequence_as_any_other():
    """An unpickled array (what a Dask worker is sent) carries a float32 dtype equal to NumPy's but not the
    same object; the model takes it in NumPy's own, so the kernels' identity guards hold."""
    import pickle

    model = _load("resnet18_w8")
    x = _first_input("resnet18_w8")
    want = model(x)
    for _ in range(4):
        unpickled = pickle.loads(pickle.dumps(x))
        assert unpickled.dtype is not np.dtype(np.float32)
        np.testing.assert_array_equal(model(unpickled), want)
    sequences = [step for step in model.plan.entries if "step" in getattr(step[0], "__qualname__", "")]
    assert sequences and not model.plan.steps[0].op._kinds  # no second kind: the feed was the first kind
