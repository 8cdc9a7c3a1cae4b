"""A child forked after oneDNN's OpenMP threads ran must not hang: it runs its models on one thread and says so."""

from __future__ import annotations

import multiprocessing
import sys

import numpy as np
import pytest

from kuiper import onednn
from kuiper.onednn import fork_guard

from conftest import op_model

pytestmark = pytest.mark.skipif(not onednn.available(), reason=onednn.describe())

RNG = np.random.default_rng(2)
WEIGHT = (RNG.standard_normal((32, 16, 3, 3)) / 12).astype(np.float32)
X = RNG.standard_normal((1, 16, 40, 40)).astype(np.float32)  # 5.9 M multiply-adds: blocked, on every thread


@pytest.fixture
def fresh_flags(monkeypatch):
    for name, value in (("_pool_started", False), ("_forked_after_start", False), ("_told", False)):
        monkeypatch.setattr(fork_guard, name, value)


def test_a_child_forked_before_any_region_keeps_its_threads(fresh_flags):
    fork_guard._after_fork_in_child()
    assert fork_guard.thread_cap(4) == 4


def test_a_child_forked_after_a_region_of_several_threads_runs_on_one_and_warns_once(fresh_flags):
    fork_guard.note_threads(1)
    fork_guard._after_fork_in_child()
    assert fork_guard.thread_cap(2) == 2  # one thread never starts the pool
    fork_guard.note_threads(2)
    fork_guard._after_fork_in_child()
    with pytest.warns(RuntimeWarning, match="'spawn' or 'forkserver'"):
        assert fork_guard.thread_cap(2) == 1
    assert fork_guard.thread_cap(8) == 1 and fork_guard.thread_cap(1) == 1


def _run_in_child(model, queue):
    queue.put(model(X, to_numpy=True))


def output_in_forked_child(model):
    """``model(X)`` in a child forked from this process (GNU OpenMP without the guard: it waits forever)."""
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_run_in_child, args=(model, queue))
    child.start()
    try:
        return queue.get(timeout=120)
    finally:
        child.join(10)
        if child.is_alive():
            child.kill()


@pytest.mark.skipif(sys.platform != "linux", reason="fork is the start method only where GNU OpenMP is")
def test_a_model_runs_in_a_child_forked_after_it_ran_on_two_threads(tmp_path):
    model = op_model(tmp_path, "nn.Conv2d conv 1 1 x y bias=False in_channels=16 out_channels=32 kernel_size=(3,3) "
                     "padding=(1,1)", weights={"weight": WEIGHT})
    model.threads = 2
    expected = model(X, to_numpy=True)
    got = output_in_forked_child(model)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)


@pytest.mark.skipif(sys.platform != "linux", reason="fork is the start method only where GNU OpenMP is")
def test_the_compiled_kernels_run_in_a_child_forked_after_they_ran_on_two_threads(tmp_path, monkeypatch):
    pytest.importorskip("numba")
    from kuiper.numba_kernels import runtime

    monkeypatch.setattr(runtime, "PARALLEL_WORK", 0)  # every launch parallel, in the parent and the child
    model = op_model(tmp_path, "nn.GELU act 1 1 x y")
    model.threads = 2
    expected = model(X, to_numpy=True)
    got = output_in_forked_child(model)
    np.testing.assert_array_equal(got, expected)  # each element has one thread and one order of operations
