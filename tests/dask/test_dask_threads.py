"""Threads inside Dask tasks: one per task on any cluster, unless the load options say otherwise."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from threadpoolctl import threadpool_limits

from conftest import model_dir, reference_batches
from test_load_options import ThreadsSeen, blas_threads

import kuiper
from kuiper.dask import predict, resolve_model
from kuiper.dask.model_cache import cached_model

RESNET = model_dir("resnet18_w8") / "model.pnnx.param"


def run_in_a_task(spec, x):
    """On a worker whose BLAS default is 2 threads: the settings while the task's model runs, and after."""
    with threadpool_limits(2, user_api="blas"):  # what a worker started without OMP_NUM_THREADS=1 has
        model = cached_model(spec)
        seen = ThreadsSeen()
        out = model(x, observer=seen, to_numpy=True)
        return out, model.threads, seen.requested, seen.blas, seen.kernels, blas_threads()


@pytest.fixture(scope="module")
def client():
    # A plain LocalCluster, as a user starts one (the task below gives its worker 2 BLAS threads).
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address="127.0.0.1:0") as cluster, distributed.Client(cluster) as dask_client:
        yield dask_client


def test_a_task_runs_its_model_on_one_thread_and_restores_the_workers_setting(client):
    spec, local = resolve_model(RESNET)
    data = reference_batches("resnet18_w8")["b1"]
    out, threads, requested, blas, kernels, after = client.submit(run_in_a_task, spec, data["inputs"][0]).result()
    assert threads == 1 and requested == {1}
    assert blas <= {1} and (blas == {1} or not blas_threads())  # every BLAS library the worker loaded
    assert kernels <= {1}
    assert after == [2] * len(after)  # the worker's own setting, back after the run
    np.testing.assert_array_equal(out, kuiper.load(RESNET, threads=1)(*data["inputs"], to_numpy=True))
    np.testing.assert_allclose(out, data["outputs"][0], atol=1e-4)  # PyTorch's output, saved with the fixture


def test_predict_gives_what_the_model_gives_in_process_with_the_same_threads(client):
    # Bit for bit against a Model call with the same thread count (BLAS may split a GEMM's
    # sums differently with another count), and close to PyTorch's outputs.
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 3, 64, 64)).astype(np.float32)
    for options, threads in (({}, 1), ({"threads": 2}, 2)):
        got = predict(RESNET, x, batch_size=2, **options).compute()
        model = kuiper.load(RESNET, threads=threads)
        np.testing.assert_array_equal(got, np.concatenate([model(x[:2], to_numpy=True), model(x[2:], to_numpy=True)]))
    ref = reference_batches("resnet18_w8")["b3"]  # PyTorch's outputs, saved with the fixture
    np.testing.assert_allclose(predict(RESNET, ref["inputs"][0], batch_size=2).compute(), ref["outputs"][0], atol=1e-4)


def test_threads_in_the_load_options_win_over_the_one_thread_default():
    default, _ = resolve_model(RESNET)
    chosen, _ = resolve_model(RESNET, load_options={"threads": 2})
    assert default.load().threads == 1 and chosen.load().threads == 2
    built = kuiper.load(RESNET, threads=2)
    assert resolve_model(built)[0].load().threads == 2  # a Model's own threads travel with it


def test_the_client_loads_a_model_file_once_for_repeated_calls():
    first = resolve_model(RESNET)[1]
    assert resolve_model(RESNET)[1] is first
