"""oneDNN convolutions as specialized steps (``OneDnnPath.specialized``, ``PointwiseDepthwise.specialized``):
after a model's first call its conv steps run prepared oneDNN calls behind the guards each call runs,
and must give exactly what the ops' forwards give, also where a guard sends an input back to them
(NaN, infinities, sums that overflow, another batch) and when several threads call the model at once."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import kuiper
from kuiper import onednn

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


def _prepared_steps(model) -> dict[str, int]:
    """How many steps run each kind of prepared conv call."""
    counts: dict[str, int] = {}
    for entry, step in zip(model.plan.entries, model.plan.steps):
        qualname = getattr(entry[0], "__qualname__", "")
        if qualname in ("OneDnnPath.specialized.<locals>.step", "PointwiseDepthwise.specialized.<locals>.step"):
            counts[qualname.split(".")[0]] = counts.get(qualname.split(".")[0], 0) + 1
    return counts


def test_conv_steps_run_prepared_calls():
    counts = {}
    for name in FIXTURES:
        model = _load(name)
        x = _first_input(name)
        model(x)
        for kind, count in _prepared_steps(model).items():
            counts[kind] = counts.get(kind, 0) + count
    assert counts.get("OneDnnPath", 0) >= 30 and counts.get("PointwiseDepthwise", 0) >= 10, counts


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
