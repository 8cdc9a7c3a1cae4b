#!/usr/bin/env python3
"""Measure kuiper's HLO parser and verifier against the modules in a local XLA checkout.

  python3 tools/hlo_conformance.py /path/to/xla                     # counts
  python3 tools/hlo_conformance.py /path/to/xla --corpus build/hlo-corpus --show 20

The corpus is extracted from the checkout on each run and never committed (XLA's files are
XLA's): the raw-string modules of ``xla/hlo/parser/hlo_parser_test.cc`` and ``xla/tests/*_test.cc``,
and every ``.hlo`` file (split at lit's ``// -----`` separators; ``invalid_*.hlo`` files count as invalid).

A raw string counts as *invalid* when the C++ that follows it, up to the next raw string or test,
expects a failure (``EXPECT_NE(absl::OkStatus()``, ``ExpectHasSubstr``, ``.ok())`` in an
``ASSERT_FALSE``/``EXPECT_FALSE``, ``!...ok()``); every other module counts as *valid*.  Templates
(``$0``, ``%s``, ``%d``, ``<<TYPE>>``, ``DATATYPE`` placeholders) and raw strings that hold no computation are skipped.

A valid module *parses* when ``kuiper.hlo.parse`` (parser and verifier) returns; an invalid one is
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


@dataclass
class Case:
    origin: str  # file:line
    group: str  # "parser test", "xla/tests", ".hlo files"
    text: str
    valid: bool


def extract(xla: Path) -> tuple[list[Case], int]:
    """The cases of the checkout, and how many raw strings were skipped as templates."""
    cases: list[Case] = []
    skipped = 0
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
        for chunk in re.split(r"^// -----[^\n]*$", text, flags=re.MULTILINE):
            if _HAS_COMPUTATION.search(chunk):
                valid = not path.name.startswith("invalid")  # xla/tools/tests/invalid_*.hlo test errors
                cases.append(Case(f"{path.relative_to(xla)}:{line}", ".hlo files", chunk, valid))
            line += chunk.count("\n")
    return cases, skipped


def _raw_string_cases(path: Path, root: Path, group: str) -> tuple[list[Case], int]:
    source = path.read_text(encoding="utf-8", errors="replace")
    test_starts = [m.start() for m in _TEST_START.finditer(source)] + [len(source)]
    matches = list(_RAW_STRING.finditer(source))
    cases: list[Case] = []
    skipped = 0
    for index, match in enumerate(matches):
        text = match.group(2)
        if "ENTRY" not in text and "HloModule" not in text or not _HAS_COMPUTATION.search(text):
            continue
        if _TEMPLATE.search(text):
            skipped += 1
            continue
        # The code that acts on this string: up to the next raw string or the next test.
        end = min([s for s in test_starts if s > match.end()], default=len(source))
        if index + 1 < len(matches):
            end = min(end, matches[index + 1].start())
        valid = not _EXPECTS_FAILURE.search(source, match.end(), end)
        line = source.count("\n", 0, match.start()) + 1
        cases.append(Case(f"{path.relative_to(root)}:{line}", group, text, valid))
    return cases, skipped


def run(case: Case) -> tuple[str, str]:
    """(outcome, detail): outcome is 'parsed', 'rejected', 'rejected without position' or 'crash'."""
    try:
        parse(case.text, source=case.origin)
    except HloSyntaxError as exc:
        return ("rejected" if exc.line else "rejected without position"), exc.reason
    except KuiperError as exc:
        return "rejected without position", str(exc).splitlines()[0]
    except Exception as exc:  # noqa: BLE001 (a crash is what this tool reports)
        return "crash", f"{type(exc).__name__}: {exc}"
    return "parsed", ""


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
    failures: dict[str, list[str]] = {"valid text rejected": [], "invalid text accepted": [], "crash": []}
    counts: dict[tuple[str, bool], list[int]] = {}
    started = time.perf_counter()
    for case in cases:
        outcome, detail = run(case)
        good = outcome == "parsed" if case.valid else outcome == "rejected"
        tally = counts.setdefault((case.group, case.valid), [0, 0])
        tally[0] += good
        tally[1] += 1
        if outcome == "crash":
            failures["crash"].append(f"{case.origin}: {detail}")
        elif not good:
            key = "valid text rejected" if case.valid else "invalid text accepted"
            failures[key].append(f"{case.origin}: {detail or outcome}")
    elapsed = time.perf_counter() - started
    for title, items in failures.items():
        if items:
            print(f"\n{title} ({len(items)}):")
            for item in items[: args.show]:
                print(f"  {item.splitlines()[0][:200]}")
    print(f"\n{len(cases)} modules ({skipped} templates skipped), {elapsed:.1f} s")
    for valid in (True, False):
        good = sum(t[0] for (g, v), t in counts.items() if v == valid)
        total = sum(t[1] for (g, v), t in counts.items() if v == valid)
        verb = "parse" if valid else "rejected with line and column"
        by_group = ", ".join(f"{g} {t[0]}/{t[1]}" for (g, v), t in sorted(counts.items()) if v == valid)
        print(f"{'valid' if valid else 'invalid'}: {good}/{total} {verb} ({by_group})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
