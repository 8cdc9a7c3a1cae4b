"""Threads and processes: 1 -> 2 thread scaling of one model, and Dask throughput against one process (issue 27).

Both are ``track_`` benchmarks that return a ratio measured inside one benchmark call,
the two sides interleaved round by round, so a machine's load (or speed) mostly cancels:

* ``ThreadScaling.track_1_to_2_threads``: median time at ``kuiper.load(threads=1)`` over
  median time at ``threads=2`` (goal: >= 1.8 on 2 free cores);
* ``DaskScaleOut.track_dask_over_one_process``: images/s of ``kuiper.dask.predict`` on a
  local cluster of 2 worker processes x 1 thread, over the best images/s of plain Model
  calls in this process at 1 or 2 threads, on the same batches (goal: >= 0.9).  The
  cluster is started and the model loaded on every worker in ``setup``, and the images
  are already held by the workers, as ``map_files`` or data loaded from storage are.

Small models are the checked-in fixtures; full-size ones skip until
``tools/make_fixtures.py`` has written them (see common.model_param).
"""

from __future__ import annotations

import statistics
import time

import numpy as np

import kuiper

from .common import model_param

MODELS = ["resnet18_w8", "resnet18_full"]
BATCH = 16


def _seconds(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def _images(param, count: int) -> np.ndarray:
    spec = kuiper.load(param).inputs[0]
    return np.random.default_rng(0).standard_normal((count,) + tuple(spec.shape[1:])).astype(np.float32)


class ThreadScaling:
    """One model at threads=1 and threads=2, batch 1 and 8."""

    params = (MODELS, [1, 8])
    param_names = ("model", "batch")
    unit = "x (time at 1 thread / time at 2)"
    number = 1
    repeat = 1
    timeout = 600
    rounds_by_model = {"resnet18_w8": 40, "resnet18_full": 10}

    def setup(self, model, batch):
        param = model_param(model)
        self.models = {threads: kuiper.load(param, threads=threads) for threads in (1, 2)}
        self.x = _images(param, batch)
        for loaded in self.models.values():
            loaded(self.x)  # first runs: kernel compile or cache load
        self.rounds = self.rounds_by_model[model]

    def track_1_to_2_threads(self, model, batch):
        times = {1: [], 2: []}
        for round_index in range(self.rounds):
            order = (1, 2) if round_index % 2 == 0 else (2, 1)
            for threads in order:
                times[threads].append(_seconds(lambda: self.models[threads](self.x)))
        return statistics.median(times[1]) / statistics.median(times[2])


class DaskScaleOut:
    """kuiper.dask.predict on 2 single-thread worker processes against plain calls in one process."""

    params = (MODELS,)
    param_names = ("model",)
    unit = "x (Dask images/s / best single-process images/s)"
    number = 1
    repeat = 1
    timeout = 900
    images_by_model = {"resnet18_w8": 512, "resnet18_full": 128}
    rounds = 2

    def setup(self, model):
        try:
            import dask.array as da
            import distributed

            from kuiper.dask import local_cluster
        except ImportError as exc:
            raise NotImplementedError(f"needs kuiper[dask]: {exc}") from None
        self.param = model_param(model)
        self.images = _images(self.param, self.images_by_model[model])
        self.models = {threads: kuiper.load(self.param, threads=threads) for threads in (1, 2)}
        self.cluster = local_cluster(2, dashboard_address="127.0.0.1:0")
        self.client = distributed.Client(self.cluster)
        self.held = da.from_array(self.images, chunks=(BATCH,) + self.images.shape[1:]).persist()
        distributed.wait(self.held)
        self._dask()  # every worker loads the model (each holds chunks) and runs it once
        for loaded in self.models.values():
            loaded(self.images[:BATCH])

    def teardown(self, model):
        self.client.close()
        self.cluster.close()

    def _dask(self):
        from kuiper.dask import predict

        return predict(self.param, self.held, batch_size=BATCH).compute()

    def _plain(self, threads: int):
        model = self.models[threads]
        return [model(self.images[i:i + BATCH]) for i in range(0, len(self.images), BATCH)]

    def track_dask_over_one_process(self, model):
        seconds = {"dask": [], 1: [], 2: []}
        for _ in range(self.rounds):
            seconds["dask"].append(_seconds(self._dask))
            for threads in (1, 2):
                seconds[threads].append(_seconds(lambda: self._plain(threads)))
        best_plain = min(min(seconds[1]), min(seconds[2]))
        return best_plain / min(seconds["dask"])
