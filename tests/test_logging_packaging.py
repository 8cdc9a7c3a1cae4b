"""Library messages through the "kuiper" logger (the slow first run's note); py.typed and LICENSE ship."""

from __future__ import annotations

import configparser
import logging
import threading
import time
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

import kuiper
from kuiper.graph import model as model_module

from conftest import write_model

ROOT = Path(__file__).resolve().parents[1]
RELU = "7767517\n3 2\npnnx.Input i 0 1 x #x=(1,3)f32\nnn.ReLU r 1 1 x y\npnnx.Output o 1 0 y\n"


class Slow(kuiper.StepObserver):
    def __init__(self, seconds: float):
        self.seconds = seconds

    def before_step(self, node, inputs):
        time.sleep(self.seconds)


@pytest.fixture
def note_not_given_yet(monkeypatch):
    monkeypatch.setattr(model_module, "_first_run_noted", threading.Event())
    monkeypatch.setattr(model_module, "FIRST_RUN_NOTE_AFTER_S", 0.05)


def notes(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "kuiper.graph.model" and r.levelno == logging.INFO]


def test_a_slow_first_run_logs_one_note_about_compiling_kernels(tmp_path, caplog, note_not_given_yet):
    caplog.set_level(logging.INFO, logger="kuiper")
    model = kuiper.load(write_model(tmp_path, RELU))
    x = np.zeros((1, 3), np.float32)
    model(x, observer=Slow(0.5))
    (note,) = notes(caplog)
    assert note.startswith(f"{model.source}: the first run is still going after") and "compiles its kernels" in note
    other = kuiper.load(write_model(tmp_path, RELU, name="other"))
    other(x, observer=Slow(0.5))
    model(x, observer=Slow(0.5))
    assert len(notes(caplog)) == 1  # once per process


def test_a_quick_first_run_logs_nothing(tmp_path, caplog, note_not_given_yet, monkeypatch):
    caplog.set_level(logging.DEBUG, logger="kuiper")
    monkeypatch.setattr(model_module, "FIRST_RUN_NOTE_AFTER_S", 5.0)
    kuiper.load(write_model(tmp_path, RELU))(np.zeros((1, 3), np.float32))
    time.sleep(0.1)
    assert notes(caplog) == []


def test_loading_logs_at_debug_through_the_kuiper_logger(tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="kuiper")
    path = write_model(tmp_path, RELU)
    kuiper.load(path)
    (record,) = [r for r in caplog.records if r.name == "kuiper" and r.levelno == logging.DEBUG]
    assert record.getMessage().startswith(f"loaded {path} (pnnx): 1 nodes on backend numpy in ")


def test_the_kuiper_logger_stays_silent_unless_the_application_configures_logging():
    assert any(isinstance(handler, logging.NullHandler) for handler in logging.getLogger("kuiper").handlers)


def test_the_package_is_marked_typed_and_ships_the_marker():
    assert resources.files("kuiper").joinpath("py.typed").is_file()
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    assert "py.typed" in config["options.package_data"]["kuiper"]


def test_the_license_file_is_the_apache_2_license_setup_cfg_names():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    assert config["metadata"]["license"] == "Apache-2.0"
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
