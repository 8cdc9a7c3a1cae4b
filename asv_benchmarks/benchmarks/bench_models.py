"""Whole models: load time, peak memory, and end-to-end inference at batch 1 and 8.

Small models are the checked-in fixtures (always present).  Full-size ones come
from ``python3 tools/make_fixtures.py NAME --keep-peers`` (torch + pnnx, written to
build/fixtures-full/); without them those benchmarks skip and say how to make them.
"""

from __future__ import annotations

from kuiper.bench.inputs import peer_file
from kuiper.bench.peers import PeerUnavailable, onnxruntime_engine
from kuiper.formats.pnnx import load_pnnx

from .common import (
    available_backends,
    device_inputs,
    load_or_skip,
    model_param,
    run_once,
)

BACKENDS = available_backends()
SMALL_MODELS = ["resnet18_w8", "mobilenet_v2", "yolov5_style", "vit_block"]
FULL_MODELS = ["resnet18_full", "mobilenet_v2_full", "yolov5_style_full"]


class Load:
    """kuiper.load: param parse + weight read (copy + CRC-32) + graph build, in a warm process."""

    params = (SMALL_MODELS + FULL_MODELS,)
    param_names = ("model",)
    warmup_time = 0.1

    def setup(self, model):
        self.param = model_param(model)
        load_or_skip(self.param, "numpy")  # skips unsupported models; warms imports and the page cache

    def time_load(self, model):
        load_or_skip(self.param, "numpy")

    def time_read_ir(self, model):
        """Only the file reading part: parse the param text and map the weights."""
        load_pnnx(self.param)


class PeakMemory:
    """Peak RSS of the benchmark process while loading and running at batch 1 (numpy): once, and five times,
    as ``kuiper bench --memory`` measures it (the memory plan's arena is made at the second call; constant
    weights are held once from the first: docs/performance.md, "Weights held once")."""

    params = (SMALL_MODELS + FULL_MODELS,)
    param_names = ("model",)

    def setup(self, model):
        self.param = model_param(model)

    def peakmem_load_and_run(self, model):
        loaded = load_or_skip(self.param, "numpy")
        run_once(loaded, device_inputs(loaded, batch=1))

    def peakmem_load_and_run_five_times(self, model):
        loaded = load_or_skip(self.param, "numpy")
        inputs = device_inputs(loaded, batch=1)
        for _ in range(5):
            run_once(loaded, inputs)


class _EndToEnd:
    number = 1
    warmup_time = 0  # setup already ran the model once

    def setup(self, model, batch, backend):
        self.model = load_or_skip(model_param(model), backend)
        self.inputs = device_inputs(self.model, batch)
        run_once(self.model, self.inputs)

    def time_forward(self, model, batch, backend):
        run_once(self.model, self.inputs)


class SmallModels(_EndToEnd):
    """The checked-in fixtures: same graphs as the real networks at a fraction of the width."""

    params = (SMALL_MODELS, [1, 8], BACKENDS)
    param_names = ("model", "batch", "backend")


class FullModels(_EndToEnd):
    """ResNet-18, MobileNetV2 (224x224) and a YOLOv5s-sized detector (640x640) at full size."""

    params = (FULL_MODELS, [1, 8], BACKENDS)
    param_names = ("model", "batch", "backend")
    repeat = (1, 5, 30.0)  # at most 5 samples or 30 s per parameter set
    rounds = 1
    timeout = 600


class FullModelsAgainstOrt:
    """The headline models at 2 threads, kuiper and ONNX Runtime on the same weights (issue 44's goal: kuiper at
    or below ORT at batch 1 and 8). ORT runs the fixture's ``model.onnx`` (``--keep-peers`` writes it) as
    ``kuiper bench --compare onnxruntime`` sets it up; it skips where onnxruntime is not installed. asv times
    each engine in its own rounds: ``kuiper bench`` interleaves them for the ratios in docs/performance.md."""

    params = (FULL_MODELS, [1, 8], ["kuiper", "onnxruntime"])
    param_names = ("model", "batch", "engine")
    number = 1
    warmup_time = 0
    repeat = (1, 5, 30.0)
    rounds = 1
    timeout = 600
    THREADS = 2

    def setup(self, model, batch, engine):
        param = model_param(model)
        loaded = load_or_skip(param, "numpy", threads=self.THREADS)
        inputs = device_inputs(loaded, batch)
        if engine == "kuiper":
            self.run = lambda: run_once(loaded, inputs)
        else:
            try:
                self.run = onnxruntime_engine(peer_file(param, ".onnx"), inputs, self.THREADS).call
            except PeerUnavailable as exc:
                raise NotImplementedError(str(exc)) from None
        self.run()

    def time_forward(self, model, batch, engine):
        self.run()
