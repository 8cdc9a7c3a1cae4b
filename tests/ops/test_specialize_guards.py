"""The guards of specialized forwards (kuiper/ops/specialize.py): the direct function runs for inputs of the
sample's classes and dtypes (and shapes, for ``same_shapes``), the fallback for any other, whatever the
number of inputs (one, two and three are written out, more take the general loop)."""

from __future__ import annotations

import numpy as np
import pytest

from kuiper.ops.specialize import guarded, same_shapes


class _Recorder:
    def __init__(self):
        self.direct, self.fallback = [], []

    def on_direct(self, *xs):
        self.direct.append(xs)
        return "direct"

    def on_fallback(self, *xs):
        self.fallback.append(xs)
        return "fallback"


def _samples(count):
    return [np.zeros((2, 3), np.float32) + k for k in range(count)]


def _others(sample):
    """Inputs unlike ``sample`` in one respect each: another dtype, shape, class (a NumPy scalar, a subclass)."""
    return {"dtype": sample.astype(np.float64), "shape": np.zeros((3, 2), np.float32),
            "class": np.float32(1.0), "subclass": np.ma.masked_array(sample)}


@pytest.mark.parametrize("count", [1, 2, 3, 4])
def test_same_shapes_runs_the_direct_function_only_on_inputs_like_the_samples(count):
    samples = _samples(count)
    recorder = _Recorder()
    fast = same_shapes(samples, recorder.on_direct, recorder.on_fallback)
    assert fast(*samples) == "direct" and fast(*[s.copy() for s in samples]) == "direct"
    for position in range(count):
        for what, other in _others(samples[position]).items():
            inputs = list(samples)
            inputs[position] = other
            assert fast(*inputs) == "fallback", (count, position, what)
    assert len(recorder.direct) == 2 and len(recorder.fallback) == 4 * count


@pytest.mark.parametrize("count", [1, 2, 3, 4])
def test_guarded_runs_the_direct_function_on_inputs_of_the_samples_classes_dtypes_and_size_limit(count):
    samples = _samples(count)
    recorder = _Recorder()
    fast = guarded(recorder.on_direct, samples, recorder.on_fallback, max_size=7)
    assert fast(*samples) == "direct"
    wider = [np.zeros((3, 2), np.float32)] * count  # another shape, the same size: guarded does not look at shapes
    assert fast(*wider) == "direct"
    for position in range(count):
        for what, other in {**_others(samples[position]), "size": np.zeros(7, np.float32)}.items():
            if what == "shape":
                continue
            inputs = list(samples)
            inputs[position] = other
            assert fast(*inputs) == "fallback", (count, position, what)
