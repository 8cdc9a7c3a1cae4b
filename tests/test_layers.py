"""The package's layers point one way (issue 23): import-linter's contracts, no import cycle, few lazy imports.

The contracts live in .importlinter (face -> frontends and languages -> graph -> ops ->
backends -> ir -> ground). tools/import_audit.py also sees imports inside functions, which
import-linter counts like any other import but which can hide a cycle from Python itself.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import import_audit  # noqa: E402  (a script in tools/, not a package)

# Imports of kuiper's own modules inside functions: each says why (start-up time of
# `kuiper --help`, numba's import kept out of `import kuiper`). The limit.
MAX_FUNCTION_LEVEL_IMPORTS = 20


def test_import_linter_contracts_hold():
    lint_imports = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    if lint_imports is None:
        pytest.skip("import-linter is not installed (it is in the test extra)")
    result = subprocess.run([lint_imports, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_import_cycle_among_kuiper_modules_counting_imports_inside_functions():
    assert import_audit.cycles(import_audit.imports(import_audit.module_files(ROOT))) == []


def test_few_imports_inside_functions():
    edges = import_audit.imports(import_audit.module_files(ROOT))
    inside = [f"{importer}:{line} -> {imported}" for importer, imported, line, inside in edges if inside]
    assert len(inside) <= MAX_FUNCTION_LEVEL_IMPORTS, "\n".join(inside)


def test_the_audit_finds_a_cycle_hidden_in_a_function(tmp_path):
    package = tmp_path / "kuiper"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from . import b\n")
    (package / "b.py").write_text("def late():\n    from . import a\n")
    edges = import_audit.imports(import_audit.module_files(tmp_path))
    assert import_audit.cycles(edges) == [["kuiper.a", "kuiper.b"]]
    assert [edge for edge in edges if edge[3]] == [("kuiper.b", "kuiper.a", 2, True)]
