"""ONNX's own conformance suite (onnx.backend.test) run on kuiper, as ONNX runs it for every backend.

Every node case runs, and every model case: ONNX's simple models, its PyTorch-converted and
PyTorch-operator models, and its real models (ResNet-50, DenseNet-121, Inception v1/v2,
ShuffleNet, SqueezeNet, VGG-19, AlexNet, ZFNet-512) in the light form onnx ships, whose expected
outputs ONNX's runner makes with its reference evaluator (in a temporary ONNX_HOME, nothing is
downloaded). The cases in node_exclusions.txt (each with the reason kuiper gives; written by
tools/onnx_backend_exclusions.py) and model_exclusions.txt are expected to fail: one that passes
fails the suite as an unexpected success, so the lists only shrink. Skipped without onnx (the
test extra installs it).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("onnx")
backend_test_module = pytest.importorskip("onnx.backend.test")

import kuiper.onnx.backend as kuiper_backend  # noqa: E402  (needs onnx)

EXCLUSIONS = Path(__file__).with_name("node_exclusions.txt")
MODEL_EXCLUSIONS = Path(__file__).with_name("model_exclusions.txt")


def excluded_cases(path: Path = EXCLUSIONS) -> dict[str, str]:
    cases = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            case, _, reason = line.partition("\t")
            cases[case] = reason
    return cases


_runner = backend_test_module.BackendTest(kuiper_backend.KuiperBackend, __name__)
_runner.include(r"_cpu$")
for _case in (*excluded_cases(), *excluded_cases(MODEL_EXCLUSIONS)):
    _runner.xfail(rf"^{re.escape(_case)}_cpu$")
OnnxBackendNodeModelTest = _runner.test_cases["OnnxBackendNodeModelTest"]
OnnxBackendSimpleModelTest = _runner.test_cases["OnnxBackendSimpleModelTest"]
OnnxBackendPyTorchConvertedModelTest = _runner.test_cases["OnnxBackendPyTorchConvertedModelTest"]
OnnxBackendPyTorchOperatorModelTest = _runner.test_cases["OnnxBackendPyTorchOperatorModelTest"]
OnnxBackendRealModelTest = _runner.test_cases["OnnxBackendRealModelTest"]


@pytest.fixture(autouse=True)
def _onnx_home(tmp_path_factory, monkeypatch):
    """The real-model cases' inputs and reference outputs go to a temporary ONNX_HOME, not ~/.onnx."""
    monkeypatch.setenv("ONNX_HOME", str(tmp_path_factory.getbasetemp() / "onnx_home"))


def test_every_excluded_case_says_why_and_exists():
    for path, suites in ((EXCLUSIONS, [OnnxBackendNodeModelTest]),
                         (MODEL_EXCLUSIONS, [OnnxBackendSimpleModelTest, OnnxBackendPyTorchConvertedModelTest,
                                             OnnxBackendPyTorchOperatorModelTest, OnnxBackendRealModelTest])):
        cases = excluded_cases(path)
        assert all(reason.strip() for reason in cases.values())
        known = {name.removesuffix("_cpu") for suite in suites for name in dir(suite) if name.startswith("test_")}
        assert set(cases) <= known, sorted(set(cases) - known)
