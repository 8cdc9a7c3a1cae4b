"""`kuiper bench --memory`: the fresh process per engine, and what it reports about start-up.

No timing is asserted: only that the numbers are there and consistent with each other
(start-up covers load and first run).  Peak RSS is only checked to be there: Linux sums
its RSS counters lazily, so two readings of VmHWM can go down by a few kB.
"""

from __future__ import annotations

import json
import re
import time

from kuiper.bench import fresh_process

from conftest import MODELS

PARAM = MODELS / "conv2d_depthwise" / "model.pnnx.param"  # one nn.Conv2d, 1x4x7x7 -> 1x8x7x7
ROW = re.compile(r"^  (?P<label>kuiper(, no numba)?)\s+peak RSS\s+(?P<peak>[0-9.]+) MiB \(after imports\s+"
                 r"(?P<after_import>[0-9.]+) MiB\); load\s+(?P<load>[0-9.]+) ms; first run\s+(?P<first>[0-9.]+) ms; "
                 r"start-up\s+(?P<wall>[0-9.]+) /\s+(?P<cpu>[0-9.]+) ms$")


def test_the_child_reports_a_start_up_that_covers_load_and_first_run(capsys):
    launched = time.time()
    assert fresh_process.child_main(["kuiper", str(PARAM), "-", "1", "1", "-", repr(launched)]) == 0
    data = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert data["startup_ms"] >= data["load_ms"] + data["first_run_ms"]
    assert data["startup_ms"] <= (time.time() - launched) * 1e3
    assert data["startup_cpu_ms"] > 0
    assert data["maxrss_mib"] > 0 and data["maxrss_after_import_mib"] > 0


def test_kuiper_is_measured_with_and_without_its_compiled_kernels(monkeypatch):
    monkeypatch.delenv("KUIPER_NUMBA", raising=False)
    lines = fresh_process.measure_fresh_processes(PARAM, {}, 1, 1, None)
    rows = [ROW.match(line) for line in lines[1:]]
    assert all(rows), lines
    assert [row["label"] for row in rows] == ["kuiper", "kuiper, no numba"]
    for row in rows:
        assert float(row["wall"]) >= float(row["load"]) + float(row["first"])
        assert float(row["peak"]) > 0


def test_no_second_kuiper_row_when_the_kernels_are_already_off(monkeypatch):
    monkeypatch.setenv("KUIPER_NUMBA", "0")
    lines = fresh_process.measure_fresh_processes(PARAM, {}, 1, 1, None)
    assert [ROW.match(line)["label"] for line in lines[1:]] == ["kuiper"]
