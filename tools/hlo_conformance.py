#!/usr/bin/env python3
"""Measure kuiper's HLO parser and verifier against the modules in a local XLA checkout.

  python3 tools/hlo_conformance.py /path/to/xla                     # counts
  python3 tools/hlo_conformance.py /path/to/xla --corpus build/hlo-corpus --show 20

The corpus is extracted from the checkout on each run and never committed (XLA's files are
XLA's): the raw-string modules of ``xla/hlo/parser/hlo_parser_test.cc`` and ``xla/tests/*_test.cc``,
and every ``.hlo`` file (split at lit's ``// -----`` separators when its RUN line says
``-split-input-file``, as lit splits it; ``invalid_*.hlo`` files count as invalid). A chunk in
protobuf's text format (an HloModuleProto, ``opcode: "add"``, which ``hlo-translate`` also reads) is no
HLO text, and is skipped.

A raw string counts as *invalid* when the C++ that follows it, up to the next raw string or test,
expects a failure (``EXPECT_NE(absl::OkStatus()``, ``ExpectHasSubstr``, ``.ok())`` in an
``ASSERT_FALSE``/``EXPECT_FALSE``, ``!...ok()``); every other module counts as *valid*.  Templates
(``$0``, ``%s``, ``%d``, ``<<TYPE>>``, ``DATATYPE`` placeholders) and raw strings that hold no computation are skipped.

A valid module *parses* when ``kuiper.hlo.parse`` (parser and verifier) returns, or, for a module
its test parses without XLA's verifier (``ParseAndReturnUnverifiedModule``) and kuiper's verifier
refuses, when kuiper's parser alone (``verify=False``) returns: these are listed apart. An invalid one is
*rejected* when it raises a KuiperError that names a line and column.  Any other exception is a
crash and is listed.  ``--corpus DIR`` also writes the extracted modules there, one file each.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from kuiper.errors import HloSyntaxError, KuiperError
from kuiper.hlo import parse

_RAW_STRING = re.compile(r'R"([a-z]*)\((.*?)\)\1"', re.DOTALL)
_TEST_START = re.compile(r"^(?:TEST(?:_F|_P)?\(|XLA_TEST_F\(|XLA_TEST_P\(|std::vector<\w+> Create)", re.MULTILINE)
_EXPECTS_FAILURE = re.compile(
    r"EXPECT_NE\(absl::OkStatus\(\)|ExpectHasSubstr|(?:ASSERT|EXPECT)_FALSE\([^;]*ok\(\)|!\s*[\w.()]*ok\(\)"
    r"|StatusIs\(|IsNotOk|Not\(IsOk"
)
_TEMPLATE = re.compile(r"\$[0-9a-z_]|%[sd]\b|\{\{|<<[A-Z0-9_]+>>|\bDATATYPE\b")
_HAS_COMPUTATION = re.compile(r"\{[^{}]*=", re.DOTALL)
# An HloModuleProto in protobuf's text format (``opcode: "add"``), which hlo-translate also reads:
# no HLO text at all (its ``#`` comments are protobuf's), so no module of this grammar.
_PROTO_TEXT = re.compile(r'^\s*opcode: "', re.MULTILINE)


@dataclass
class Case:
    origin: str  # file:line
    group: str  # "parser test", "xla/tests", ".hlo files"
    text: str
    valid: bool
    verified: bool = True  # False: its test parses it without XLA's verifier (ParseAndReturnUnverifiedModule)


def extract(xla: Path) -> tuple[list[Case], dict[str, int]]:
    """The cases of the checkout, and how many texts were skipped, by why."""
    cases: list[Case] = []
    skipped = 0
    skipped_proto: list[str] = []
    sources = [(xla / "xla/hlo/parser/hlo_parser_test.cc", "parser test")]
    sources += [(path, "xla/tests") for path in sorted((xla / "xla/tests").glob("*_test.cc"))]
    for path, group in sources:
        if not path.is_file():
            continue
        found, templates = _raw_string_cases(path, xla, group)
        cases += found
        skipped += templates
    for path in sorted(xla.rglob("*.hlo")):
        text = path.read_text(encoding="utf-8", errors="replace")
        line = 1
        # lit splits a file at ``// -----`` only when a RUN line asks for it (-split-input-file);
        # elsewhere such lines are comments (while.hlo's ``// -------`` banners inside one module).
        chunks = re.split(r"^// -----[^\n]*$", text, flags=re.MULTILINE) if "-split-input-file" in text else [text]
        for chunk in chunks:
            if _PROTO_TEXT.search(chunk):
                skipped_proto.append(f"{path.relative_to(xla)}:{line}")
            elif _HAS_COMPUTATION.search(chunk):
                valid = not path.name.startswith("invalid")  # xla/tools/tests/invalid_*.hlo test errors
                cases.append(Case(f"{path.relative_to(xla)}:{line}", ".hlo files", chunk, valid))
            line += chunk.count("\n")
    return cases, {"templates": skipped, "HloModuleProto text, not HLO text": len(skipped_proto)}


def _raw_string_cases(path: Path, root: Path, group: str) -> tuple[list[Case], int]:
    """The modules of a C++ test file: its raw strings, and the texts its tests build by concatenation.

    A test may build its module from pieces: ``absl::StrCat(kScalarOps, R"(...)")`` or
    ``kHlo + kHloRELU`` (named raw strings, plain string literals). Such a concatenation is one
    module; a piece only ever used in concatenations is no module of its own; a concatenation
    with a piece computed at run time (``shape.ToString()``) is a template, skipped.
    """
    source = path.read_text(encoding="utf-8", errors="replace")
    test_starts = [m.start() for m in _TEST_START.finditer(source)] + [len(source)]
    matches = list(_RAW_STRING.finditer(source))
    starts = [m.start() for m in matches]
    named = _named_raw_strings(source, matches)
    pieces: list[tuple[int, int, int, str | None]] = []  # (start, end, first raw string's start, text or None)
    for call in re.finditer(r"\bStrCat\(", source):
        pieces.append(_concatenation(source, call.end(), matches, named))
    for pair in re.finditer(r"\b(\w+)\s*\+\s*(\w+)\b", source):
        left, right = (_definition(named, pair.group(i), pair.start()) for i in (1, 2))
        if left is not None and right is not None:
            pieces.append((pair.start(), pair.end(), pair.start(), left[1] + right[1]))
    in_concatenation = [(start, end) for start, end, _, _ in pieces]

    def concatenated_only(name: str, defined_at: int) -> bool:
        """Every use of this definition (up to the name's next definition) is in a concatenation."""
        later = [at for at, _ in named[name] if at > defined_at]
        until = later[0] if later else len(source)
        uses = [m.start() for m in re.finditer(rf"\b{name}\b(?!\s*(?:\[\])?\s*=\s*R\")", source)
                if defined_at < m.start() < until]  # (the name's next definition is no use)
        return bool(uses) and all(any(a <= u < b for a, b in in_concatenation) for u in uses)

    cases: list[Case] = []
    seen: set[str] = set()
    skipped = 0
    candidates = []  # (position of the text, where the acting code starts, text, built by concatenation)
    for match in matches:
        name = next((n for n, found in named.items() if any(at == match.start() for at, _ in found)), None)
        if any(a <= match.start() < b for a, b in in_concatenation) or name and concatenated_only(name, match.start()):
            continue
        candidates.append((match.start(), match.end(), match.group(2), False))
    for start, end, first, text in pieces:
        if text is None:
            skipped += 1 if _is_module(source[start:end]) else 0
        else:
            candidates.append((first, _statement_start(source, start), text, True))
    for position, acting_from, text, concatenated in sorted(candidates):
        if not _is_module(text) or concatenated and text in seen:  # ``kHlo + kHloRELU`` used twice is one module
            continue
        if concatenated:
            seen.add(text)
        if _TEMPLATE.search(text):
            skipped += 1
            continue
        # The code that acts on this text: up to the next raw string or the next test.
        end = min([s for s in test_starts if s > acting_from], default=len(source))
        end = min([end, *[s for s in starts if s > max(acting_from, position)]])
        valid = not _EXPECTS_FAILURE.search(source, acting_from, end)
        verified = "ParseAndReturnUnverifiedModule" not in source[acting_from:end]
        line = source.count("\n", 0, position) + 1
        cases.append(Case(f"{path.relative_to(root)}:{line}", group, text, valid, verified))
    return cases, skipped


def _is_module(text: str) -> bool:
    return ("ENTRY" in text or "HloModule" in text) and bool(_HAS_COMPUTATION.search(text))


def _named_raw_strings(source: str, matches: list[re.Match]) -> dict[str, list[tuple[int, str]]]:
    """``kHlo = R"(...)"`` (or ``kHlo[] = ...``): name -> [(where a raw string of that name starts, its text)].

    A name may be defined again in a later test: a use means the definition before it.
    """
    named: dict[str, list[tuple[int, str]]] = {}
    for match in matches:
        before = re.search(r"(\w+)\s*(?:\[\])?\s*=\s*$", source[max(0, match.start() - 120) : match.start()])
        if before:
            named.setdefault(before.group(1), []).append((match.start(), match.group(2)))
    return named


def _definition(named: dict, name: str, position: int) -> tuple[int, str] | None:
    """The definition of ``name`` that a use at ``position`` means: the last one before it."""
    before = [d for d in named.get(name, []) if d[0] < position]
    return before[-1] if before else None


def _concatenation(source: str, position: int, matches: list[re.Match], named: dict) -> tuple:
    """The ``StrCat(`` arguments from ``position``: (start, end, first piece's start, joined text or None)."""
    by_start = {m.start(): m for m in matches}
    opening = position
    texts: list[str] = []
    resolved = True
    first = position
    while True:
        while source[position].isspace():
            position += 1
        if position in by_start:
            first = position if not texts else first
            texts.append(by_start[position].group(2))
            position = by_start[position].end()
        elif source[position] == '"':
            literal = re.match(r'"((?:[^"\\]|\\.)*)"', source[position:])
            texts.append(literal.group(1).encode().decode("unicode_escape"))
            position += literal.end()
        else:
            expression = re.match(r"[^,()]*(?:\([^()]*\)[^,()]*)*", source[position:]).group(0)
            definition = _definition(named, expression.strip(), position)
            if definition is not None:
                texts.append(definition[1])
            else:
                resolved = False
            position += len(expression)
        while source[position].isspace():
            position += 1
        if source[position] != ",":
            break
        position += 1
    return opening, position + 1, first, "".join(texts) if resolved else None


def _statement_start(source: str, position: int) -> int:
    return max(source.rfind(";", 0, position), source.rfind("{", 0, position)) + 1


def run(case: Case) -> tuple[str, str]:
    """(outcome, detail): 'parsed', 'parsed unverified', 'rejected', 'rejected without position' or 'crash'.

    A valid module of a test that parses it without XLA's verifier (XLA's parse-only tests of async
    chains whose shapes the verifier refuses) is 'parsed unverified' when kuiper's verifier refuses
    it too but its parser (``parse(..., verify=False)``) reads it: what the test asks of XLA's parser.
    """
    try:
        parse(case.text, source=case.origin)
    except HloSyntaxError as exc:
        if case.valid and not case.verified and _parses_unverified(case):
            return "parsed unverified", exc.reason
        return ("rejected" if exc.line else "rejected without position"), exc.reason
    except KuiperError as exc:
        return "rejected without position", str(exc).splitlines()[0]
    except Exception as exc:  # noqa: BLE001 (a crash is what this tool reports)
        return "crash", f"{type(exc).__name__}: {exc}"
    return "parsed", ""


def _parses_unverified(case: Case) -> bool:
    try:
        parse(case.text, source=case.origin, verify=False)
    except KuiperError:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("xla", type=Path, help="a local XLA checkout (the directory holding xla/)")
    parser.add_argument("--corpus", type=Path, help="also write the extracted modules into this directory")
    parser.add_argument("--show", type=int, default=10, help="failures to list per class (default 10)")
    args = parser.parse_args(argv)
    cases, skipped = extract(args.xla)
    if not cases:
        print(f"no modules found under {args.xla}", file=sys.stderr)
        return 1
    if args.corpus:
        for number, case in enumerate(cases):
            kind = "valid" if case.valid else "invalid"
            args.corpus.mkdir(parents=True, exist_ok=True)
            (args.corpus / f"{number:04d}-{kind}.hlo").write_text(f"// {case.origin}\n{case.text}", encoding="utf-8")
    failures: dict[str, list[str]] = {"valid text rejected": [], "invalid text accepted": [], "crash": [],
                                      "parsed unverified, as its test does (kuiper's verifier refuses it)": []}
    counts: dict[tuple[str, bool], list[int]] = {}
    started = time.perf_counter()
    for case in cases:
        outcome, detail = run(case)
        good = outcome in ("parsed", "parsed unverified") if case.valid else outcome == "rejected"
        tally = counts.setdefault((case.group, case.valid), [0, 0])
        tally[0] += good
        tally[1] += 1
        if outcome == "crash":
            failures["crash"].append(f"{case.origin}: {detail}")
        elif outcome == "parsed unverified":
            failures["parsed unverified, as its test does (kuiper's verifier refuses it)"].append(
                f"{case.origin}: {detail}")
        elif not good:
            key = "valid text rejected" if case.valid else "invalid text accepted"
            failures[key].append(f"{case.origin}: {detail or outcome}")
    elapsed = time.perf_counter() - started
    for title, items in failures.items():
        if items:
            print(f"\n{title} ({len(items)}):")
            for item in items[: args.show]:
                print(f"  {item.splitlines()[0][:200]}")
    skips = ", ".join(f"{number} {why}" for why, number in skipped.items())
    print(f"\n{len(cases)} modules (skipped: {skips}), {elapsed:.1f} s")
    for valid in (True, False):
        good = sum(t[0] for (g, v), t in counts.items() if v == valid)
        total = sum(t[1] for (g, v), t in counts.items() if v == valid)
        verb = "parse" if valid else "rejected with line and column"
        by_group = ", ".join(f"{g} {t[0]}/{t[1]}" for (g, v), t in sorted(counts.items()) if v == valid)
        print(f"{'valid' if valid else 'invalid'}: {good}/{total} {verb} ({by_group})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
