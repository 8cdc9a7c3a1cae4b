"""Fuzzing: hostile param text, zip bytes and whole models may only ever raise KuiperError.

Three targets, each with Hypothesis:

* the param grammar: op lines built from the grammar with tricky tokens;
* the zip reader: the real fixture ``.pnnx.bin`` files with bytes flipped, fields
  overwritten with extreme values, truncated or spliced;
* the whole loader and a run: the real fixtures under tests/fixtures/models with
  their param text mutated token by token (and sometimes their .bin), run on the
  fixture's own reference inputs.

Every example must end, within ``HANG_SECONDS`` of CPU time (and ``BLOCKED_SECONDS`` of
wall time, for blocking hangs, generous on a loaded machine), in success or a KuiperError,
and must not allocate more than the size budget it runs under (traced with
tracemalloc, which sees NumPy's allocations).  In CI the example counts are small
(seconds in all); docs/reliability.md gives the command for a one-hour run.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import tracemalloc
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from conftest import MODELS, reference_batches
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase

import kuiper
from kuiper.errors import KuiperError
from kuiper.formats.pnnx import load_pnnx
from kuiper.formats.pnnx_bin import WeightArchive
from kuiper.formats.pnnx_param import parse_param
from kuiper.formats.pnnx_param_names import KNOWN_PARAMS
from kuiper.plugins import op_registry

EXAMPLES = int(os.environ.get("KUIPER_FUZZ_EXAMPLES", "40"))
HANG_SECONDS = 10  # CPU time: other processes on a busy machine do not count
BLOCKED_SECONDS = 120  # wall time: an example waiting on something that never comes
BUDGET = 256 * 2**20  # the size budget every example runs under
TRACE_SLACK = 64 * 2**20  # Python objects, tables and copies beside the largest tensor

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,  # hangs are caught by the alarms in guarded(), which also interrupt them
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    derandomize="KUIPER_FUZZ_EXAMPLES" not in os.environ,  # CI: the same examples every run
    # A long run keeps what it finds (replayed first next time); CI keeps nothing.
    database=None if "KUIPER_FUZZ_EXAMPLES" not in os.environ else DirectoryBasedExampleDatabase(".hypothesis/fuzz"),
)

FIXTURES = sorted(p.parent for p in MODELS.glob("*/model.pnnx.param"))


@pytest.fixture(scope="module", autouse=True)
def compiled_kernels_warm():
    """Run every fixture once, unguarded, before any example: with numba's cache cold, the
    first call of a compiled kernel compiles it (several seconds of CPU), which the hang
    alarm must not count against an example."""
    for fixture in FIXTURES:
        try:
            model = kuiper.load(fixture / "model.pnnx.param")
            model(*(np.zeros([d if isinstance(d, int) and d > 0 else 1 for d in (spec.shape or (1,))],
                             dtype=spec.dtype or "float32") for spec in model.inputs))
        except Exception:  # noqa: BLE001 - a warm-up only; the tests below judge every failure
            pass

TRICKY = [
    "0", "-1", "1", "3", "2147483647", "-2147483648", "9223372036854775807", "99999999999999999999",
    "1e308", "-1e308", "1e-320", "nan", "inf", "-inf", "()", "[]", "(0)", "(1,1)", "(-1,-1)", "(0,0,0)",
    "(1,2,3,4,5,6,7)", "None", "True", "False", "x", "@0", "(3,x)", "1.5", "(100000,100000)",
    "(2147483647,1)", "(1,1)f32", "(0)f32", "(?)f32", "(1,?)bf16", "(2)c32", "(9999999999999)f32", "%x",
    "reflect", "circular", "nearest", "bilinear", "add(@0,@1)", "neg(@0)", "@1", "(0,@0)", "1j", "+-",
]


class Hang(Exception):
    """Raised by the alarms: an example ran too long."""


@contextmanager
def guarded():
    """Run one example under the size budget, a hang alarm and an allocation trace."""
    old_budget = os.environ.get("KUIPER_MEMORY_BUDGET")
    os.environ["KUIPER_MEMORY_BUDGET"] = str(BUDGET)

    def on_cpu_alarm(signum, frame):
        raise Hang(f"no result after {HANG_SECONDS} s of CPU time")

    def on_wall_alarm(signum, frame):
        raise Hang(f"no result after {BLOCKED_SECONDS} s (blocked?)")

    previous = signal.signal(signal.SIGPROF, on_cpu_alarm), signal.signal(signal.SIGALRM, on_wall_alarm)
    signal.setitimer(signal.ITIMER_PROF, HANG_SECONDS)
    signal.setitimer(signal.ITIMER_REAL, BLOCKED_SECONDS)
    tracemalloc.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    except KuiperError as exc:
        _log_translated(exc)
        # An op that tried an allocation the machine refused ran past the budget, and a Hang
        # raised inside an op comes back wrapped: right for the user, not for the fuzzer.
        assert not isinstance(exc.__cause__, MemoryError), f"an allocation past the budget was tried: {exc}"
        assert not isinstance(exc.__cause__, Hang), f"an op ran too long: {exc}"
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGPROF, previous[0])
        signal.signal(signal.SIGALRM, previous[1])
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        if old_budget is None:
            os.environ.pop("KUIPER_MEMORY_BUDGET", None)
        else:
            os.environ["KUIPER_MEMORY_BUDGET"] = old_budget
    assert peak <= BUDGET + TRACE_SLACK, f"allocated {peak} bytes, over the {BUDGET}-byte budget"


def _log_translated(exc: KuiperError) -> None:
    """With KUIPER_FUZZ_LOG=path, note KuiperErrors that wrap another exception (an op's raw failure
    translated by the model): they are correct for the user, but each is a message an op could improve."""
    path = os.environ.get("KUIPER_FUZZ_LOG")
    cause = exc.__cause__
    if path and cause is not None and not isinstance(cause, KuiperError):
        with open(path, "a") as log:
            log.write(f"{type(cause).__name__}: {str(exc).splitlines()[0][:300]}\n")


# -- the param grammar ---------------------------------------------------------------------

names = st.sampled_from(["0", "1", "2", "x", "y", "a.b", "in0", "out0", "@0", "#", "$", "=", "é"])
op_types = st.sampled_from(sorted(op_registry()) + ["nn.Bogus", "pnnx.Input", "pnnx.Output", ""])
values = st.one_of(st.sampled_from(TRICKY), st.text(alphabet="()[],-.?0123456789@%xefij", max_size=12))
keys = st.sampled_from(["dim", "kernel_size", "stride", "padding", "size", "expr", "shape", "sections",
                        "output_size", "scale_factor", "approximate", "groups", "in_channels", "mode", "k"])


@st.composite
def op_lines(draw):
    n_in, n_out = draw(st.integers(0, 3)), draw(st.integers(0, 2))
    counts = [str(n_in), str(n_out)] if draw(st.booleans()) else [draw(values), draw(values)]
    operands = draw(st.lists(names, min_size=n_in + n_out, max_size=n_in + n_out + 1))
    items = draw(st.lists(st.one_of(
        st.builds(lambda k, v: f"{k}={v}", keys, values),
        st.builds(lambda k, v: f"@{k}={v}", keys, values),
        st.builds(lambda k, v: f"${k}={v}", keys, names),
        st.builds(lambda k, v: f"#{k}={v}", names, values),
        values,
    ), max_size=6))
    return " ".join([draw(op_types), draw(names), *counts, *operands, *items])


@st.composite
def param_texts(draw):
    lines = draw(st.lists(op_lines(), max_size=6))
    header = f"{len(lines)} {draw(st.integers(0, 8))}" if draw(st.booleans()) else draw(values)
    magic = "7767517" if draw(st.integers(0, 9)) else draw(values)
    return "\n".join([magic, header, *lines]) + "\n"


@FUZZ
@given(text=param_texts())
def test_fuzz_param_grammar(text):
    with guarded():
        parse_param(text, "fuzz.pnnx.param")


@FUZZ
@given(text=param_texts())
def test_fuzz_grammar_built_models_load_and_run(text):
    with tempfile.TemporaryDirectory() as folder, guarded():
        param = Path(folder) / "m.pnnx.param"
        param.write_text(text)
        model = kuiper.load(param)
        model(*[np.ones([d or 1 for d in (spec.shape or (1,))], spec.dtype or "float32") for spec in model.inputs])


# -- mutations of the real fixtures ---------------------------------------------------------

EXTREME_U32 = [0, 1, 0xFFFF, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000]


@st.composite
def mutated_bytes(draw, data: bytes) -> bytes:
    data = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "u32", "u16", "truncate", "splice", "signature"]))
        at = draw(st.integers(0, max(0, len(data) - 1)))
        if kind == "flip" and data:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "u32" and len(data) >= 4:
            at = min(at, len(data) - 4)
            data[at : at + 4] = draw(st.sampled_from(EXTREME_U32)).to_bytes(4, "little")
        elif kind == "u16" and len(data) >= 2:
            at = min(at, len(data) - 2)
            data[at : at + 2] = draw(st.sampled_from([0, 1, 0xFFFF, 0x8000])).to_bytes(2, "little")
        elif kind == "truncate":
            del data[at:]
        elif kind == "splice":
            length = draw(st.integers(1, 64))
            data[at:at] = data[max(0, at - length) : at]
        elif kind == "signature":
            # Overwrite a zip record signature's neighbourhood: the fields parsers trust most.
            signature = draw(st.sampled_from([b"PK\x01\x02", b"PK\x03\x04", b"PK\x05\x06", b"PK\x06\x06", b"PK\x06\x07"]))
            found = bytes(data).find(signature)
            if found >= 0:
                offset = found + draw(st.integers(4, 44))
                if offset + 4 <= len(data):
                    data[offset : offset + 4] = draw(st.sampled_from(EXTREME_U32)).to_bytes(4, "little")
    return bytes(data)


@FUZZ
@given(data=st.data(), fixture=st.sampled_from(FIXTURES))
def test_fuzz_zip_reader_on_mutated_real_bins(data, fixture):
    ir_weights = parse_param((fixture / "model.pnnx.param").read_text()).weights
    raw = data.draw(mutated_bytes((fixture / "model.pnnx.bin").read_bytes()))
    with tempfile.TemporaryDirectory() as folder, guarded():
        path = Path(folder) / "m.pnnx.bin"
        path.write_bytes(raw)
        with WeightArchive(path, max_entries=1 + sum(len(w) for w in ir_weights.values())) as archive:
            for op_name, declared in ir_weights.items():
                for attr, decl in declared.items():
                    archive.read(f"{op_name}.{attr}", decl.shape, decl.dtype)


def _nearby_values(value: str) -> list[str]:
    """Values close to ``value``: off by one, zero, negative, doubled, an element changed or dropped."""
    if value.startswith("(") and value.endswith(")"):
        items = value[1:-1].split(",")
        options = ["(" + ",".join(items[:-1]) + ")", "(" + ",".join(items + items[-1:]) + ")"]
        for index, item in enumerate(items):
            for replacement in _nearby_values(item)[:4]:
                options.append("(" + ",".join(items[:index] + [replacement] + items[index + 1 :]) + ")")
        return options
    try:
        number = int(value)
    except ValueError:
        return [value.upper(), value[:-1] or "x", "none"]
    return [str(number + 1), str(number - 1), "0", str(-number), str(number * 2), str(number * 1000)]


@st.composite
def mutated_param(draw, text: str) -> str:
    """Mostly plausible edits (a param value nudged or made extreme, an operand shape changed),
    sometimes structural ones (tokens, lines), so that most mutants still parse and run."""
    lines = text.splitlines()
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["param"] * 6 + ["shape", "add_param", "token", "drop_token", "dup_line",
                                                      "drop_line", "swap"]))
        body = list(range(2, len(lines))) or [0]
        index = draw(st.sampled_from(body))
        tokens = lines[index].split()
        params = [i for i, token in enumerate(tokens) if "=" in token and token[0] not in "@#$"]
        shapes = [i for i, token in enumerate(tokens) if token.startswith("#")]
        if kind == "param" and params:
            at = draw(st.sampled_from(params))
            key, _, value = tokens[at].partition("=")
            tokens[at] = f"{key}={draw(st.one_of(st.sampled_from(_nearby_values(value)), values))}"
        elif kind == "shape" and shapes:
            at = draw(st.sampled_from(shapes))
            key, _, value = tokens[at].partition("=")
            dims, _, dtype = value[1:].partition(")")
            changed = draw(st.sampled_from(_nearby_values(f"({dims})")))
            tokens[at] = f"{key}={changed}{dtype if draw(st.integers(0, 3)) else draw(values)}"
        elif kind == "add_param" and len(tokens) > 1:
            known = sorted(KNOWN_PARAMS.get(tokens[0], ())) or ["k"]
            tokens.append(f"{draw(st.sampled_from(known))}={draw(values)}")
        elif kind in ("token", "drop_token") and tokens:
            at = draw(st.integers(0, len(tokens) - 1))
            if kind == "drop_token":
                del tokens[at]
            else:
                key, sep, _ = tokens[at].partition("=")
                tokens[at] = f"{key}={draw(values)}" if sep else draw(values)
        elif kind == "dup_line":
            lines.insert(index, lines[index])
        elif kind == "drop_line":
            del lines[index]
        elif kind == "swap":
            other = draw(st.sampled_from(body))
            lines[index], lines[other] = lines[other], lines[index]
        if kind in ("param", "shape", "add_param", "token", "drop_token") and index < len(lines):
            lines[index] = " ".join(tokens)
    return "\n".join(lines) + "\n"


@FUZZ
@given(data=st.data(), fixture=st.sampled_from(FIXTURES), mutate_bin=st.integers(0, 4))
def test_fuzz_loader_on_mutated_real_models(data, fixture, mutate_bin):
    text = data.draw(mutated_param((fixture / "model.pnnx.param").read_text()))
    raw = (fixture / "model.pnnx.bin").read_bytes()
    if mutate_bin == 0:
        raw = data.draw(mutated_bytes(raw))
    inputs = min(reference_batches(fixture.name).values(), key=lambda batch: batch["inputs"][0].shape[0])["inputs"]
    with tempfile.TemporaryDirectory() as folder, guarded():
        param = Path(folder) / "model.pnnx.param"
        param.write_text(text)
        (Path(folder) / "model.pnnx.bin").write_bytes(raw)
        if mutate_bin == 1:
            load_pnnx(param, strict=True)
        for fuse in (True, False):
            model = kuiper.load(param, fuse=fuse)
            model(*inputs[: len(model.inputs)])


@st.composite
def hostile_feeds(draw, specs):
    """One array per input: the declared shape with dims changed, dropped or added, in any dtype."""
    feeds = []
    for spec in specs:
        shape = [d or 2 for d in (spec.shape or (1,))]
        for _ in range(draw(st.integers(0, 2))):
            kind = draw(st.sampled_from(["dim", "drop", "add"]))
            if kind == "dim" and shape:
                shape[draw(st.integers(0, len(shape) - 1))] = draw(st.sampled_from([0, 1, 2, 3, 7, 64]))
            elif kind == "drop" and shape:
                shape.pop()
            elif kind == "add":
                shape.insert(0, draw(st.sampled_from([1, 2])))
        dtype = draw(st.sampled_from([spec.dtype or "float32", "float16", "float64", "int32", "int64", "bool",
                                      "complex64", "uint8"]))
        fill = draw(st.sampled_from([0.0, 1.0, -1.0, np.nan, np.inf, 1e30]))
        with np.errstate(all="ignore"):
            feeds.append(np.full(shape, fill).astype(dtype))
    return feeds


@FUZZ
@given(data=st.data(), fixture=st.sampled_from(FIXTURES), fuse=st.booleans())
def test_fuzz_hostile_feeds_on_real_models(data, fixture, fuse):
    model = kuiper.load(fixture / "model.pnnx.param", fuse=fuse)
    feeds = data.draw(hostile_feeds(model.inputs))
    with guarded(), np.errstate(all="ignore"):
        model(*feeds)


def test_the_guard_passes_kuiper_errors_and_fails_on_anything_else():
    with guarded():
        raise kuiper.ModelFormatError("expected: bad input")
    with pytest.raises(ZeroDivisionError), guarded():
        1 / 0  # noqa: B018 - the point is the exception
    assert len(FIXTURES) > 50  # the fuzz seeds are the fixture models


def test_the_guard_fails_a_kuiper_error_that_wraps_a_hang_or_a_memory_error():
    for cause in (Hang("no result after 10 s of CPU time"), MemoryError("Unable to allocate 8.00 GiB")):
        with pytest.raises(AssertionError, match="ran too long|allocation past the budget"), guarded():
            raise kuiper.KuiperError("op 'x' failed") from cause


def test_the_guard_interrupts_a_busy_loop(monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "HANG_SECONDS", 0.2)
    with pytest.raises(Hang, match="CPU time"), guarded():
        while True:
            pass
