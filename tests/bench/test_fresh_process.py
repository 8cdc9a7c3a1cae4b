"""`kuiper bench --memory`: the fresh process per engine, and what it reports about start-up.

No timing is asserted: only that the numbers are there and consistent with each other
(start-up covers load and first run).  Peak RSS is only checked to be there: Linux sums
its RSS counters lazily, so two readings of VmHWM can go down by a few kB.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from kuiper.bench import fresh_process

from conftest import MODELS

ROOT = Path(__file__).resolve().parents[2]

PARAM = MODELS / "conv2d_depthwise" / "model.pnnx.param"  # one nn.Conv2d, 1x4x7x7 -> 1x8x7x7
ROW = re.compile(r"^  (?P<label>kuiper(, KUIPER_NUMBA=0)?)\s+peak RSS\s+(?P<peak>[0-9.]+) MiB over 5 calls \(after imports\s+"
                 r"(?P<after_import>[0-9.]+), the first call\s+(?P<first_call>[0-9.]+) MiB\); load\s+(?P<load>[0-9.]+) ms; first run\s+(?P<first>[0-9.]+) ms; "
                 r"start-up\s+(?P<wall>[0-9.]+) /\s+(?P<cpu>[0-9.]+) ms$")


def _run_child(tmp_path, engine, model_file, env=None):
    """fresh_child.py as fresh_process starts it, on the fixture's input; its JSON line."""
    inputs = tmp_path / "inputs.npz"
    np.savez(inputs, input0=np.ones((1, 4, 7, 7), np.float32))
    launched = time.time()
    command = [sys.executable, "-c", fresh_process._RUN_CHILD, str(fresh_process.CHILD), engine, str(model_file),
               str(inputs), "1", "-", repr(launched)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), launched


def test_the_child_reports_a_start_up_that_covers_load_and_first_run(tmp_path):
    data, launched = _run_child(tmp_path, "kuiper", PARAM)
    assert data["startup_ms"] >= data["load_ms"] + data["first_run_ms"]
    assert data["startup_ms"] <= (time.time() - launched) * 1e3
    assert data["startup_cpu_ms"] > 0
    assert 0 < data["maxrss_after_import_mib"] <= data["maxrss_first_run_mib"] <= data["maxrss_mib"]
    assert data["kuiper_imported"]


# A stand-in for onnxruntime (not installed in CI): a session whose one output is its input doubled.
FAKE_ONNXRUNTIME = """
__version__ = "0.0-test"
class SessionOptions:
    def add_session_config_entry(self, key, value):
        pass
class _Input:
    name = "x"
class InferenceSession:
    def __init__(self, path, options, providers):
        open(path).close()
    def get_inputs(self):
        return [_Input()]
    def run(self, names, feeds):
        return [feeds["x"] * 2]
"""


def test_a_peers_process_does_not_import_kuiper(tmp_path):
    # Its start-up and peak memory would otherwise include kuiper's import.
    (tmp_path / "fake").mkdir()
    (tmp_path / "fake" / "onnxruntime.py").write_text(FAKE_ONNXRUNTIME)
    model_file = tmp_path / "model.onnx"
    model_file.write_text("not read by the stand-in")
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "fake"))
    data, _ = _run_child(tmp_path, "onnxruntime", model_file, env)
    assert data["engine"] == "onnxruntime" and data["load_ms"] >= 0
    assert not data["kuiper_imported"]


def test_kuiper_is_measured_with_and_without_its_compiled_kernels(monkeypatch):
    monkeypatch.delenv("KUIPER_NUMBA", raising=False)
    lines = fresh_process.measure_fresh_processes(PARAM, {}, 1, 1, None)
    rows = [ROW.match(line) for line in lines[1:]]
    assert all(rows), lines
    assert [row["label"] for row in rows] == ["kuiper", "kuiper, KUIPER_NUMBA=0"]
    for row in rows:
        assert float(row["wall"]) >= float(row["load"]) + float(row["first"])
        assert float(row["peak"]) > 0


def test_no_second_kuiper_row_when_the_kernels_are_already_off(monkeypatch):
    monkeypatch.setenv("KUIPER_NUMBA", "0")
    lines = fresh_process.measure_fresh_processes(PARAM, {}, 1, 1, None)
    assert [ROW.match(line)["label"] for line in lines[1:]] == ["kuiper"]
