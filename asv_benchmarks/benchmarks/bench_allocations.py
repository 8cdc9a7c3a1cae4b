"""What a warm call allocates beyond the arrays it returns (issue 44: a call a device can replay allocates
nothing new): the memory plan (kuiper/graph/memory_plan.py) on and off, as tools/measure_warm_allocations.py
prints it.  The checked-in fixtures always run; the full-size ones need ``tools/make_fixtures.py``."""

from __future__ import annotations

import os
import tracemalloc

import kuiper

from .common import device_inputs, model_param

MODELS = ["yolov5_style", "unet", "transformer_encoder", "resnet18_full", "mobilenet_v2_full", "yolov5_style_full"]


class WarmCallAllocations:
    """KiB of traced memory (NumPy's arrays, Python's objects) a warm call holds at its peak beyond its outputs."""

    params = (MODELS, [True, False])
    param_names = ("model", "memory_plan")
    unit = "KiB"
    timeout = 600

    def setup(self, name, planned):
        previous = os.environ.get("KUIPER_MEMORY_PLAN")
        os.environ["KUIPER_MEMORY_PLAN"] = "1" if planned else "0"  # read when the model is built
        try:
            self.model = kuiper.load(model_param(name), backend="numpy", threads=1)
        finally:
            if previous is None:
                os.environ.pop("KUIPER_MEMORY_PLAN")
            else:
                os.environ["KUIPER_MEMORY_PLAN"] = previous
        self.inputs = device_inputs(self.model, 4 if "_full" not in name else 1)
        for _ in range(4):  # the first call specializes, the second records the plan
            self.model(*self.inputs)

    def track_beyond_outputs(self, name, planned):
        tracemalloc.start()
        try:
            before, _ = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            result = self.model(*self.inputs)
            peak = tracemalloc.get_traced_memory()[1] - before
        finally:
            tracemalloc.stop()
        returned = result if isinstance(result, tuple) else (result,)
        return (peak - sum(value.nbytes for value in returned)) / 1024
