"""tools/gpu_validate.py, the parts that need no GPU: the full-size params it carries still load,
the random weights it writes for them give finite outputs, and its error measure."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

import kuiper
from kuiper.formats.pnnx_param import parse_param

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import gpu_validate  # noqa: E402  (a script in tools/, not a package)

NAMES = [name for name, _, _ in gpu_validate.SPEED_MODELS]


@pytest.mark.parametrize("name", NAMES)
def test_each_speed_model_has_its_param_with_float32_weights(name):
    param = gpu_validate.TOOLS / "gpu_models" / name / "model.pnnx.param"
    parsed = parse_param(param.read_text(), str(param))
    declared = [decl for attrs in parsed.weights.values() for decl in attrs.values()]
    assert declared and all(decl.dtype in gpu_validate._PNNX_DTYPES for decl in declared)


@pytest.mark.parametrize("name, classes", [("resnet18_full", 1000), ("mobilenet_v2_full", 1000)])
def test_random_weights_give_a_model_with_finite_outputs(tmp_path, name, classes):
    param = gpu_validate.random_weights(gpu_validate.TOOLS / "gpu_models" / name / "model.pnnx.param", tmp_path)
    x = np.random.default_rng(0).standard_normal((2, 3, 224, 224), dtype=np.float32)
    out = kuiper.load(param)(x, to_numpy=True)
    assert out.shape == (2, classes) and np.isfinite(out).all() and 0.01 < np.abs(out).max() < 1e4


def test_relative_error():
    error = gpu_validate._relative_error
    assert error(np.array([np.inf, np.nan, 1.0]), np.array([np.inf, np.nan, 1.0])) == 0
    assert math.isnan(error(np.array([np.nan]), np.array([1.0])))  # a NaN where a number is expected fails
    assert error(np.float32(3), np.float64(3)) == 0  # 0-d outputs
    assert error(np.array([101.0]), np.array([100.0])) == pytest.approx(0.01)  # of the largest |reference|
    assert error(np.array([0.5]), np.array([0.25])) == pytest.approx(0.25)  # at least 1
    assert error(np.zeros(2), np.zeros(3)) == math.inf  # shapes differ
    assert error(np.array([1 + 1j]), np.array([1 + 2j])) == pytest.approx(1 / math.sqrt(5))


def test_a_nan_error_is_the_worst():
    assert math.isnan(gpu_validate._worst([0.0, math.nan, 1e-3]))
    assert gpu_validate._worst([0.0, 2e-5, 1e-7]) == 2e-5


def test_the_host_time_observer_sums_per_op_type():
    # A model's run on NumPy, observed as on the GPU (the observer itself needs no GPU).
    observer = gpu_validate._HostTime()
    param = gpu_validate.TOOLS.parent / "tests" / "fixtures" / "models" / "resnet18_w8" / "model.pnnx.param"
    model = kuiper.load(param, providers=False)  # every convolution a step of its own, as the GPU runs it
    model(np.zeros((1, 3, 64, 64), np.float32), observer=observer)
    assert sum(steps for steps, _ in observer.by_type.values()) == len(model.steps)
    assert observer.by_type["Conv2d"][0] >= 17 and all(seconds >= 0 for _, seconds in observer.by_type.values())
