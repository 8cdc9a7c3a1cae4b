"""Every ```python block in README.md and docs/*.md runs as written.

Each block runs as a script of its own (``python block.py``) in an empty folder, so it must
bring its own imports and data (the shipped ``kuiper.demo`` model and digits), and a block
that starts worker processes needs its ``if __name__ == "__main__":`` guard, as a reader's
script would.  A block that needs what CI lacks says so in an HTML comment on the line
before its fence, ``<!-- requires: gpu, dask_cuda -->``, and is skipped with that reason
where the requirement is missing: ``gpu`` is kuiper's cupy backend being available, any
other word a module that must import.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

import kuiper

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^(?P<indent> *)```(?P<language>[\w+-]*)\s*$")
REQUIRES = re.compile(r"^\s*<!--\s*requires:\s*(?P<names>[\w., ]+?)\s*-->\s*$")
TIMEOUT_S = 180  # the Dask block starts a local cluster: seconds on an idle machine, more on a busy one


@dataclass(frozen=True)
class Block:
    document: Path
    line: int  # 1-based line of the opening fence
    language: str
    code: str
    requires: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.document.relative_to(ROOT)}:{self.line}"


def fenced_blocks(document: Path, text: str | None = None) -> list[Block]:
    """Every fenced block of ``text`` (default: the document's), its fence's indentation removed
    (blocks inside list items are indented)."""
    lines = (document.read_text(encoding="utf-8") if text is None else text).splitlines()
    blocks, index = [], 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        end = index + 1
        while end < len(lines) and not (FENCE.match(lines[end]) and lines[end].strip() == "```"):
            end += 1
        marker = REQUIRES.match(lines[index - 1]) if index else None
        requires = tuple(name.strip() for name in marker["names"].split(",")) if marker else ()
        code = textwrap.dedent("\n".join(lines[index + 1:end])) + "\n"
        blocks.append(Block(document, index + 1, opening["language"], code, requires))
        index = end + 1
    return blocks


PYTHON_BLOCKS = [block for document in DOCUMENTS for block in fenced_blocks(document) if block.language == "python"]


def missing_requirement(name: str) -> str | None:
    if name == "gpu":
        cupy = {info.name: info for info in kuiper.backends()}.get("cupy")
        return None if cupy is not None and cupy.available else "needs a GPU (kuiper's cupy backend)"
    try:
        found = importlib.util.find_spec(name) is not None  # "dask.array" imports dask to look inside it
    except ImportError:
        found = False
    return None if found else f"needs {name}, which is not installed"


def test_the_readme_has_python_examples_to_check():
    assert len([block for block in PYTHON_BLOCKS if block.document.name == "README.md"]) >= 6


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=lambda block: block.name)
def test_python_block_runs_as_written(block, tmp_path):
    reasons = [reason for reason in map(missing_requirement, block.requires) if reason]
    if reasons:
        pytest.skip(f"{block.name} {'; '.join(reasons)}")
    script = tmp_path / "block.py"
    script.write_text(block.code, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    assert done.returncode == 0, f"{block.name} failed:\n{block.code}\n{done.stderr[-3000:]}"


@pytest.mark.parametrize(("heading", "variable"), [("Quick start", "QUICK_START"), ("Tests", "TEST_COMMAND")])
def test_ci_runs_the_readme_commands_word_for_word(heading, variable):
    # .ci/run writes both commands out and runs them; each must be the README's one-line block.
    readme = ROOT / "README.md"
    section = readme.read_text(encoding="utf-8").split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    blocks = [block for block in fenced_blocks(readme, section) if block.language == "bash"]
    assert len(blocks) == 1 and len(blocks[0].code.strip().splitlines()) == 1
    command = blocks[0].code.strip()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert f"{variable}='{command}'" in ci  # the command .ci/run checks against the README ...
    assert command in ci  # ... and the line it runs


def test_requires_markers_are_found_and_name_what_is_needed(tmp_path):
    (tmp_path / "doc.md").write_text("text\n<!-- requires: gpu, dask_cuda -->\n  ```python\n  x = 1\n  ```\n"
                                     "```python\ny = 2\n```\n")
    first, second = fenced_blocks(tmp_path / "doc.md")
    assert (first.requires, first.code, first.line) == (("gpu", "dask_cuda"), "x = 1\n", 3)
    assert (second.requires, second.code) == ((), "y = 2\n")
    assert missing_requirement("no_such_module_here") == "needs no_such_module_here, which is not installed"
    assert missing_requirement("no_such_module_here.array") == "needs no_such_module_here.array, which is not installed"
