"""Numba's on-disk cache of the compiled kernels lives in a user cache folder, never in the package.

pip removes an installation by its file list; a ``__pycache__`` that numba wrote beside
the kernel modules is left behind and later shadows an editable install (issue 26).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import kuiper
from kuiper.config import cache_dir

pytest.importorskip("numba")

from kuiper.numba_kernels import runtime

PACKAGE = Path(kuiper.__file__).parent


def _files(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(path): (path.stat().st_size, path.stat().st_mtime_ns) for path in folder.rglob("*") if path.is_file()}


def test_a_compiled_kernel_caches_into_kuiper_cache_dir_and_writes_nothing_into_the_package(tmp_path):
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("NUMBA_CACHE_DIR", "KUIPER_NUMBA", "KUIPER_DISABLE_PLUGIN_AUTOLOAD")}
    environment.update(KUIPER_CACHE_DIR=str(tmp_path / "cache"), PYTHONDONTWRITEBYTECODE="1")
    # A fresh process: numba picks a kernel's cache folder when the kernel module is imported.
    script = textwrap.dedent("""
        import numpy as np
        import kuiper
        from kuiper.backends import get_backend

        x = np.float32([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
        y = get_backend("numpy").softmax_in_place(x.copy(), -1)  # the compiled row loop
        e = np.exp(np.float64([1.0, 2.0, 3.0]) - 3.0)
        assert np.allclose(y, [e / e.sum(), [1 / 3] * 3], rtol=1e-6), y
    """)
    before = _files(PACKAGE)
    subprocess.run([sys.executable, "-c", script], env=environment, check=True, cwd=tmp_path, timeout=300)
    cached = sorted(path.suffix for path in (tmp_path / "cache" / "numba").rglob("*") if path.is_file())
    assert ".nbi" in cached and ".nbc" in cached, cached  # numba's index and compiled code
    assert _files(PACKAGE) == before


def test_the_cache_folder_follows_numba_cache_dir_then_kuiper_cache_dir_then_the_user_cache(tmp_path, monkeypatch):
    try:
        monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba-own"))
        monkeypatch.setenv("KUIPER_CACHE_DIR", str(tmp_path / "kuiper"))
        runtime.cache_location.cache_clear()
        kernels = runtime.kernels_folder(PACKAGE / "numba_kernels")
        assert runtime.cache_location() == (str(tmp_path / "numba-own" / kernels), True)
        monkeypatch.delenv("NUMBA_CACHE_DIR")
        runtime.cache_location.cache_clear()
        assert runtime.cache_location() == (str(tmp_path / "kuiper" / "numba" / kernels), True)
        monkeypatch.delenv("KUIPER_CACHE_DIR")
        assert "kuiper" in cache_dir().parts and PACKAGE not in cache_dir().parents
        (tmp_path / "a-file").write_text("")
        monkeypatch.setenv("KUIPER_CACHE_DIR", str(tmp_path / "a-file"))
        runtime.cache_location.cache_clear()
        assert runtime.cache_location() == (str(tmp_path / "a-file" / "numba" / kernels), False)  # nothing cached
    finally:
        monkeypatch.undo()
        runtime.cache_location.cache_clear()


def test_the_cache_folder_changes_with_any_kernel_source(tmp_path):
    """A kernel inlines other files' functions: an edit of any source must not load stale code."""
    (tmp_path / "a_kernels.py").write_text("def exp(x):\n    return x\n")
    (tmp_path / "b_kernels.py").write_text("from .a_kernels import exp\n")
    before = runtime.kernels_folder(tmp_path)
    assert before == runtime.kernels_folder(tmp_path) and before.startswith("kernels-")
    (tmp_path / "a_kernels.py").write_text("def exp(x):\n    return x * 1.0\n")
    assert runtime.kernels_folder(tmp_path) != before


def test_decorating_kuiper_kernels_leaves_numbas_own_setting_for_the_users_functions():
    numba = runtime._numba()
    before = numba.config.CACHE_DIR
    runtime.kernel()(lambda: None)
    assert numba.config.CACHE_DIR == before
