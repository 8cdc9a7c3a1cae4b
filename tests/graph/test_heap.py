"""kuiper.graph.heap: glibc keeps freed activation memory between calls, unless the process chose.

The page-fault test runs in fresh interpreters (mallopt is process-wide and set once): the
same allocation pattern as an op's temporaries (2 MiB arrays freed so that the heap top is
free) faults ~500 times per round with glibc's adaptive thresholds, and not at all once
``keep_freed_memory`` has run.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import numpy as np
import pytest

from kuiper.graph import heap

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"

PATTERN = """
import resource, sys
import numpy as np
from kuiper.graph.heap import keep_freed_memory
outcome = keep_freed_memory() if sys.argv[1] == "keep" else "not called"
x = np.ones((1, 160, 56, 56), np.float32)
def step():
    y = x * x
    z = np.abs(y)
    w = np.empty((1, 320, 56, 56), np.float32)
    del y
    return float(z.sum() + w.size)
for _ in range(3):
    step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    step()
print(outcome, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 10)
"""


def faults_per_round(mode: str) -> tuple[str, float]:
    env = {k: v for k, v in os.environ.items() if k not in (*heap.GLIBC_SETTINGS_ENV, heap.SWITCH_ENV)}
    out = subprocess.run([sys.executable, "-c", PATTERN, mode], env=env, capture_output=True, text=True, check=True)
    outcome, faults = out.stdout.rsplit(maxsplit=1)
    return outcome, float(faults)


@pytest.mark.skipif(not GLIBC, reason="the thresholds are glibc's")
def test_freed_arrays_stay_mapped_between_rounds():
    outcome, faults = faults_per_round("keep")
    assert outcome == "set" and faults < 20
    _, default_faults = faults_per_round("default")
    assert default_faults > 200  # the premise: glibc's adaptive thresholds give the pages back


@pytest.fixture
def fresh_outcome(monkeypatch):
    monkeypatch.setattr(heap, "_outcome", None)
    for name in (*heap.GLIBC_SETTINGS_ENV, heap.SWITCH_ENV):
        monkeypatch.delenv(name, raising=False)
    calls = []
    monkeypatch.setattr(heap, "_decide_and_set", lambda real=heap._decide_and_set: calls.append(1) or real())
    return calls


def test_switched_off_by_kuipers_variable(fresh_outcome, monkeypatch):
    monkeypatch.setenv(heap.SWITCH_ENV, "0")
    assert heap.keep_freed_memory() == f"off: {heap.SWITCH_ENV}=0"


def test_a_process_that_sets_glibcs_variables_keeps_them(fresh_outcome, monkeypatch):
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
    assert heap.keep_freed_memory() == "off: the process sets MALLOC_TRIM_THRESHOLD_"


def test_decided_once_per_process(fresh_outcome, monkeypatch):
    monkeypatch.setenv(heap.SWITCH_ENV, "0")
    first = heap.keep_freed_memory()
    monkeypatch.delenv(heap.SWITCH_ENV)
    assert heap.keep_freed_memory() == first and len(fresh_outcome) == 1


def test_building_a_numpy_model_keeps_freed_memory(monkeypatch):
    from single_op import run_op

    build_module = sys.modules["kuiper.graph.build"]  # kuiper.graph.build is also the function's name
    calls = []
    monkeypatch.setattr(build_module, "keep_freed_memory", lambda: calls.append(1) or "set")
    np.testing.assert_array_equal(run_op("ReLU", [np.float32([-1.0, 2.0])], {}), [0.0, 2.0])
    assert calls == [1]
