"""Finding oneDNN: switched off, not found, and the OpenMP wait policy it leaves to the user."""

from __future__ import annotations

import pytest

from kuiper import onednn
from kuiper.errors import ConfigError
from kuiper.onednn import binding


@pytest.fixture
def fresh_lookup(monkeypatch):
    """Look the library up again in this test, and restore the process's finding after it."""
    binding.loaded.cache_clear()
    yield monkeypatch
    monkeypatch.undo()
    binding.loaded.cache_clear()


def test_switched_off_says_so(fresh_lookup):
    fresh_lookup.setenv(binding.DISABLE_ENV, "0")
    assert onednn.library() is None and not onednn.available()
    assert onednn.describe() == "oneDNN kernels: off (switched off by KUIPER_ONEDNN=0)"


def test_a_switch_that_is_neither_on_nor_off_is_a_config_error(fresh_lookup):
    fresh_lookup.setenv(binding.DISABLE_ENV, "sometimes")
    with pytest.raises(ConfigError, match="KUIPER_ONEDNN='sometimes'"):
        onednn.library()


def test_a_missing_library_names_where_it_looked_and_how_to_install(fresh_lookup, tmp_path):
    missing = tmp_path / "libdnnl.so.3"
    fresh_lookup.setenv(binding.LIBRARY_ENV, str(missing))
    assert onednn.library() is None
    text = onednn.describe()
    assert text.startswith("oneDNN kernels: off (oneDNN not found")
    assert "pip install onednn-cpu-gomp" in text and str(missing) in text


def test_a_library_that_is_not_onednn_is_refused(fresh_lookup):
    fresh_lookup.setenv(binding.LIBRARY_ENV, "libc.so.6")  # loads, but has no dnnl_* functions
    assert onednn.library() is None
    assert "libc.so.6" in onednn.describe()


@pytest.mark.skipif(not onednn.available(), reason=onednn.describe())
def test_found_it_reports_version_and_path():
    text = onednn.describe()
    assert text.startswith("oneDNN kernels: on (oneDNN 3.") and onednn.library().path in text
