"""kuiper.thread_limits and the kernels' launches: each run's thread settings are applied, then restored."""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from kuiper import thread_limits
from kuiper.numba_kernels import runtime

from test_load_options import blas_threads


@pytest.mark.parametrize("cap", [1, 2])
def test_limited_sets_the_cap_and_restores_what_was_there(cap):
    with threadpool_limits(3, user_api="blas"):
        outside = blas_threads()
        with thread_limits.limited(cap):
            assert thread_limits.requested() == cap
            assert blas_threads() == [cap] * len(outside)
        assert thread_limits.requested() is None and blas_threads() == outside


def test_limited_restores_after_an_error():
    before = blas_threads()
    with pytest.raises(RuntimeError), thread_limits.limited(1):
        raise RuntimeError("a failing run")
    assert thread_limits.requested() is None and blas_threads() == before


@pytest.mark.parametrize("cap", [None, 2])
def test_a_separate_blas_cap_holds_blas_to_it_and_the_kernels_to_the_cap(cap):
    with threadpool_limits(3, user_api="blas"):
        outside = blas_threads()
        with thread_limits.limited(cap, blas=1):
            assert thread_limits.requested() == cap
            assert blas_threads() == [1] * len(outside)
        assert thread_limits.requested() is None and blas_threads() == outside


def test_no_cap_touches_nothing():
    with threadpool_limits(3, user_api="blas"):
        outside = blas_threads()
        with thread_limits.limited(None):
            assert thread_limits.requested() is None and blas_threads() == outside


needs_numba = pytest.mark.skipif(not runtime.available(), reason="numba is not installed here")


@needs_numba
@pytest.mark.parametrize("cap", [1, 2])
def test_a_kernel_launch_uses_the_cap_and_gives_numba_its_count_back(cap):
    numba = pytest.importorskip("numba")
    numba.set_num_threads(1)
    with thread_limits.limited(cap), runtime.launch_threads():
        assert numba.get_num_threads() == min(cap, numba.config.NUMBA_NUM_THREADS)
    assert numba.get_num_threads() == 1  # the caller's own setting


@needs_numba
def test_the_parallel_and_serial_kernels_agree_whatever_the_cap(monkeypatch):
    # Work 0 makes every call parallel when more than one thread is allowed.
    from kuiper.numba_kernels.norm import softmax_last_axis

    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 257)).astype(np.float32)
    expected = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    expected /= expected.sum(axis=1, keepdims=True)
    monkeypatch.setattr(runtime, "PARALLEL_WORK", 0)
    results = []
    for cap in (1, 2):
        with thread_limits.limited(cap):
            got = x.copy()
            assert softmax_last_axis(got)
        results.append(got)
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_allclose(results[0], expected, rtol=1e-5, atol=1e-7)


def test_blas_libraries_are_found_again_after_an_import(monkeypatch):
    """A BLAS loaded after the first capped run (numba imports SciPy, which brings an OpenBLAS of its own)
    is capped from the next run: the search runs again when a module was imported, and only then."""
    import sys
    import types

    from kuiper import thread_limits

    searches = []

    class Controller:
        def select(self, user_api):
            searches.append(user_api)
            return types.SimpleNamespace(lib_controllers=[f"library {len(searches)}"])

    monkeypatch.setattr(thread_limits, "ThreadpoolController", Controller)
    monkeypatch.setattr(thread_limits, "_found_blas", (-1, ()))
    assert thread_limits._blas_libraries() == ("library 1",)
    assert thread_limits._blas_libraries() == ("library 1",)  # nothing imported: no new search
    monkeypatch.setitem(sys.modules, "kuiper_test_newly_imported", types.ModuleType("kuiper_test_newly_imported"))
    assert thread_limits._blas_libraries() == ("library 2",)
    assert searches == ["blas", "blas"]
