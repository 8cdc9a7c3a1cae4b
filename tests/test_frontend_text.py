"""Model text given directly: which frontend reads it, and paths are never taken for text."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import kuiper

from kuiper.errors import ModelFormatError
from kuiper.frontends import load_ir, text_frontend
from kuiper.graph import build
from kuiper.hlo.files import looks_like_hlo_text

ADD_ONE = """HloModule add_one
ENTRY main {
  x = f32[3] parameter(0)
  one = f32[] constant(1)
  ones = f32[3] broadcast(one), dimensions={}
  ROOT y = f32[3] add(x, ones)
}
"""


@pytest.mark.parametrize("text", [
    ADD_ONE,
    "// RUN: hlo-opt %s\n// CHECK: add\n" + ADD_ONE,  # XLA's lit files start with comments
    "/* a block\n comment */ " + ADD_ONE,
    "ENTRY main {\n ROOT c = f32[] constant(1)\n}",  # no HloModule line
    "%fused (p: f32[]) -> f32[] {\n ROOT p = f32[] parameter(0)\n}",
])
def test_hlo_text_is_recognised(text):
    assert looks_like_hlo_text(text)


@pytest.mark.parametrize("value", [
    "model.hlo.txt", "/tmp/nested/program.hlo", "7767517\n3 3\npnnx.Input in 0 1 x\n", "", "   ", b"HloModule m", None,
])
def test_paths_and_other_formats_are_not_hlo_text(value):
    assert not looks_like_hlo_text(value)


def test_text_with_leading_comments_loads_and_runs():
    ir = load_ir("// RUN: hlo-opt %s\n" + ADD_ONE)
    model = build(ir, backend="numpy")
    np.testing.assert_array_equal(model(np.array([1, 2, 3], np.float32)), [2, 3, 4])


def test_an_existing_file_is_read_as_a_path_even_if_its_name_looks_like_text(tmp_path, monkeypatch):
    # A file literally named "ENTRY {" must be read as a file, not parsed as the text "ENTRY {".
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ENTRY {").write_text(ADD_ONE)
    assert text_frontend("ENTRY {") is None


def test_a_missing_path_names_the_path():
    with pytest.raises(ModelFormatError, match="no_such_model.hlo.txt"):
        load_ir("no_such_model.hlo.txt")


def test_kuiper_load_takes_hlo_text_and_the_model_pickles_as_that_call():
    model = kuiper.load("// from a lit file\n" + ADD_ONE)
    x = np.array([1, 2, 3], np.float32)
    np.testing.assert_array_equal(model(x), [2, 3, 4])
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(again(x), [2, 3, 4])


def test_load_hlo_is_load_with_the_hlo_format(tmp_path):
    path = tmp_path / "program.txt"  # no .hlo suffix: format="hlo" decides
    path.write_text(ADD_ONE)
    x = np.array([0, 1, 2], np.float32)
    np.testing.assert_array_equal(kuiper.load_hlo(path)(x), [1, 2, 3])
    np.testing.assert_array_equal(kuiper.load_hlo(ADD_ONE)(x), [1, 2, 3])
    with pytest.raises(ModelFormatError, match="missing.hlo.txt"):
        kuiper.load_hlo(tmp_path / "missing.hlo.txt")
