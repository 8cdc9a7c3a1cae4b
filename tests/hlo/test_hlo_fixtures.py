"""JAX programs dumped as HLO text (tools/make_hlo_fixtures.py): both texts parse, and run like JAX."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuiper.hlo import build_dfg, parse

FIXTURES = Path(__file__).parents[1] / "fixtures" / "hlo"
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
    graph = build_dfg(module)
    assert len(graph.nodes) == module.instruction_count()


def _arrays(data, prefix):
    return [data[f"{prefix}{i}"] for i in range(sum(key.startswith(prefix) for key in data.files))]


UNFUSED = [("mlp", ".hlo.txt"), ("float_math", ".hlo.txt"), ("softmax_layernorm", ".opt.hlo.txt")]


@pytest.mark.parametrize("name, suffix, fuse", [(n, s, True) for n, s in TEXTS] + [(n, s, False) for n, s in UNFUSED],
                         ids=[f"{n}{s}" for n, s in TEXTS] + [f"{n}{s}-unfused" for n, s in UNFUSED])
def test_runs_like_jax_on_numpy(name, suffix, fuse):
    _check_against_jax(name, suffix, "numpy", fuse)


@pytest.mark.parametrize("name", PROGRAMS)
def test_runs_like_jax_on_other_backends(name, backend_name):
    if backend_name == "numpy":
        pytest.skip("numpy is checked above")
    _check_against_jax(name, ".opt.hlo.txt", backend_name, True)


def _check_against_jax(name, suffix, backend, fuse):
    import kuiper

    data = np.load(FIXTURES / f"{name}.npz")
    model = kuiper.load(FIXTURES / f"{name}{suffix}", backend=backend, fuse=fuse)
    if (name, suffix) in UNFUSED:  # these have elementwise chains the IR runs: fused or not, same answers
        assert bool(model.fused_groups) == fuse
    outputs = model(*_arrays(data, "input"), to_numpy=True)
    outputs = list(outputs) if isinstance(outputs, tuple) else [outputs]
    expected = _arrays(data, "output")
    assert len(outputs) == len(expected)
    for index, (got, want) in enumerate(zip(outputs, expected)):
        got = np.asarray(got)
        assert (got.shape, got.dtype) == (want.shape, want.dtype), f"output {index}"
        if want.dtype.kind in "fc":
            np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-3, equal_nan=True, err_msg=f"output {index}")
        else:
            np.testing.assert_array_equal(got, want, err_msg=f"output {index}")


_SLICING = (FIXTURES / "slicing.opt.hlo.txt").read_text() if (FIXTURES / "slicing.opt.hlo.txt").exists() else ""
_WORDS = list(re.finditer(r"[0-9]+|[a-z_]+", _SLICING))


# Derandomized in CI, like tests/reliability/test_fuzz.py; KUIPER_FUZZ_EXAMPLES=N explores new examples.
@settings(max_examples=int(os.environ.get("KUIPER_FUZZ_EXAMPLES", "40")), deadline=None,
          derandomize="KUIPER_FUZZ_EXAMPLES" not in os.environ)
@given(st.integers(0, max(len(_WORDS) - 1, 0)), st.sampled_from(["0", "1", "2", "7", "-1", "f32", "s32", "pred", "x", ""]))
def test_a_mutated_program_runs_or_raises_a_kuiper_error(index, replacement):
    import kuiper

    word = _WORDS[index]
    text = _SLICING[: word.start()] + replacement + _SLICING[word.end() :]
    inputs = _arrays(np.load(FIXTURES / "slicing.npz"), "input")
    try:
        kuiper.load_hlo(text)(*inputs)
    except kuiper.KuiperError:
        pass
