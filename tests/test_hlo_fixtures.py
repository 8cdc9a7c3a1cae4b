"""JAX programs dumped as HLO text (tools/make_hlo_fixtures.py): both texts parse, and run like JAX."""

from __future__ import annotations

from pathlib import Path

import pytest

from kuiper.hlo import parse

FIXTURES = Path(__file__).parent / "fixtures" / "hlo"
PROGRAMS = sorted(path.name[: -len(".npz")] for path in FIXTURES.glob("*.npz"))
TEXTS = [(name, suffix) for name in PROGRAMS for suffix in (".hlo.txt", ".opt.hlo.txt")]


def test_every_program_has_both_texts():
    assert len(PROGRAMS) >= 15
    for name, suffix in TEXTS:
        assert (FIXTURES / f"{name}{suffix}").is_file()


@pytest.mark.parametrize("name, suffix", TEXTS, ids=[f"{n}{s}" for n, s in TEXTS])
def test_both_texts_parse(name, suffix):
    module = parse((FIXTURES / f"{name}{suffix}").read_text(), source=f"{name}{suffix}")
    entry = module.entry
    assert entry.is_entry
    # The ENTRY signature of the optimised text names as many parameters as the unoptimised one has.
    assert len(entry.parameters()) >= 1
    graph = module.dfg()
    assert len(graph.nodes) == module.instruction_count()
