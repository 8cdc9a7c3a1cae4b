"""ONNX's own conformance suite (onnx.backend.test, the node cases) run on kuiper, as ONNX runs it for every backend.

Every node case runs. The cases in node_exclusions.txt (each with the reason kuiper gives; written by
tools/onnx_backend_exclusions.py) are expected to fail: one that passes fails the suite as an
unexpected success, so the list only shrinks. Skipped without onnx (the test extra installs it).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("onnx")
backend_test_module = pytest.importorskip("onnx.backend.test")

import kuiper.onnx.backend as kuiper_backend  # noqa: E402  (needs onnx)

EXCLUSIONS = Path(__file__).with_name("node_exclusions.txt")


def excluded_cases() -> dict[str, str]:
    cases = {}
    for line in EXCLUSIONS.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            case, _, reason = line.partition("\t")
            cases[case] = reason
    return cases


_runner = backend_test_module.BackendTest(kuiper_backend.KuiperBackend, __name__)
_runner.include(r"_cpu$")
for _case in excluded_cases():
    _runner.xfail(rf"^{re.escape(_case)}_cpu$")
# The node cases only: ONNX's real-model cases download their data, which CI cannot.
OnnxBackendNodeModelTest = _runner.test_cases["OnnxBackendNodeModelTest"]


def test_every_excluded_case_says_why_and_exists():
    cases = excluded_cases()
    assert all(reason.strip() for reason in cases.values())
    known = {name.removesuffix("_cpu") for name in dir(OnnxBackendNodeModelTest) if name.startswith("test_")}
    assert set(cases) <= known, sorted(set(cases) - known)
