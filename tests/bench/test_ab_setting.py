"""tools/ab_setting.py: the setting it parses, that both values take turns over the calls it times,
and that the module's own value is back afterwards."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import ab_setting  # noqa: E402  (a script in tools/, not a package)

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "models" / "act_functional"


@pytest.fixture
def setting_module(monkeypatch):
    module = types.ModuleType("ab_setting_probe")
    module.VALUE = 1
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return module


def test_a_setting_is_a_module_global_and_a_python_literal(setting_module):
    assert ab_setting.parse_setting("ab_setting_probe.VALUE=262144") == (setting_module, "VALUE", 262144)
    assert ab_setting.parse_setting("ab_setting_probe.VALUE='fast'")[2] == "fast"


@pytest.mark.parametrize("text, says", [
    ("VALUE", "expected module.path.NAME=value"),
    ("ab_setting_probe.VALUE=", "expected module.path.NAME=value"),
    ("ab_setting_probe.MISSING=3", "has no MISSING"),
    ("ab_setting_probe.VALUE=os.getcwd()", "is not a Python literal"),
])
def test_a_bad_setting_is_refused_with_what_was_expected(setting_module, text, says):
    with pytest.raises(SystemExit, match=says):
        ab_setting.parse_setting(text)


def test_both_values_take_turns_and_the_module_keeps_its_own(monkeypatch, setting_module):
    seen = []

    class Model:
        def __call__(self, *inputs):
            seen.append(setting_module.VALUE)

    monkeypatch.setattr(ab_setting.kuiper, "load", lambda path, threads: Model())
    line = ab_setting.compare(str(FIXTURE), setting_module, "VALUE", 2, threads=1, seconds=0.05, turn=3)
    assert setting_module.VALUE == 1
    assert seen[:4] == [1, 1, 2, 2]  # each side warmed up
    timed = seen[4:]
    assert len(timed) >= 6 and timed[:6] == [1, 1, 1, 2, 2, 2]
    assert timed.count(1) == timed.count(2)
    assert line.startswith("act_functional") and "B/A" in line
