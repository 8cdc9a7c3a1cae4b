"""Backend choice precedence: argument > KUIPER_BACKEND > kuiper.toml / [tool.kuiper] > numpy."""

import pytest

from kuiper.config import choose_backend
from kuiper.errors import ConfigError


@pytest.fixture(autouse=True)
def no_env(monkeypatch):
    monkeypatch.delenv("KUIPER_BACKEND", raising=False)


def test_default_is_numpy(tmp_path):
    choice = choose_backend(None, start=tmp_path)
    assert (choice.name, choice.source) == ("numpy", "default")


def test_kuiper_toml_in_a_parent_folder(tmp_path):
    (tmp_path / "kuiper.toml").write_text('backend = "cupy"\n')
    (tmp_path / "sub").mkdir()
    choice = choose_backend(None, start=tmp_path / "sub")
    assert choice.name == "cupy" and choice.source.endswith("kuiper.toml")


def test_pyproject_tool_table(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n[tool.kuiper]\nbackend = "mybackend"\n')
    assert choose_backend(None, start=tmp_path).name == "mybackend"


def test_pyproject_without_kuiper_table_is_ignored(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert choose_backend(None, start=tmp_path).name == "numpy"


def test_environment_beats_config_file(tmp_path, monkeypatch):
    (tmp_path / "kuiper.toml").write_text('backend = "cupy"\n')
    monkeypatch.setenv("KUIPER_BACKEND", "numpy")
    choice = choose_backend(None, start=tmp_path)
    assert choice.name == "numpy" and "KUIPER_BACKEND" in choice.source


def test_argument_beats_environment(monkeypatch):
    monkeypatch.setenv("KUIPER_BACKEND", "cupy")
    assert choose_backend("numpy").source == "argument"


def test_invalid_config_file_is_a_config_error(tmp_path):
    (tmp_path / "kuiper.toml").write_text("backend = [1, 2\n")
    with pytest.raises(ConfigError, match="kuiper.toml: cannot read"):
        choose_backend(None, start=tmp_path)
    (tmp_path / "kuiper.toml").write_text("backend = 3\n")
    with pytest.raises(ConfigError, match="'backend' must be a backend name string"):
        choose_backend(None, start=tmp_path)
