"""Loading an HLO module costs work linear in its size: counted, not timed.

A straight chain of negates once took 1.1 s at 8,000 instructions and 9.4 s at 30,000: every op
lowered asked for its line number, and each answer counted the newlines from the top of the text.
These tests count work instead of timing it (a shared CI machine times nothing reliably): the
characters that string searches scan in the module's text, and the Python function calls of a
whole load, at two sizes. Linear work doubles with the size; the quadratic step above made the
scanned characters grow with the square of it. The time itself is tracked by
``asv_benchmarks/benchmarks/bench_hlo.py`` (``LoadHlo``).
"""

from __future__ import annotations

import sys

import kuiper
from kuiper.hlo import parse
from kuiper.hlo.lower import lower_entry


def negate_chain(instructions: int) -> str:
    lines = ["HloModule chain", "ENTRY e {", "  x0 = f32[4] parameter(0)"]
    lines += [f"  x{i} = f32[4] negate(x{i - 1})" for i in range(1, instructions)]
    lines += [f"  ROOT r = f32[4] negate(x{instructions - 1})", "}"]
    return "\n".join(lines)


class ScanCountingText(str):
    """A str that adds up how many characters its searches and slices go over."""

    scanned = 0

    @staticmethod
    def _span(text, start, end):
        start = 0 if start is None else start if start >= 0 else max(len(text) + start, 0)
        end = len(text) if end is None else min(end, len(text)) if end >= 0 else max(len(text) + end, 0)
        return start, max(end, start)

    def count(self, sub, start=None, end=None):
        low, high = self._span(self, start, end)
        ScanCountingText.scanned += high - low
        return str.count(self, sub, low, high)

    def find(self, sub, start=None, end=None):
        low, high = self._span(self, start, end)
        found = str.find(self, sub, low, high)
        ScanCountingText.scanned += (found if found >= 0 else high) - low
        return found

    def rfind(self, sub, start=None, end=None):
        low, high = self._span(self, start, end)
        found = str.rfind(self, sub, low, high)
        ScanCountingText.scanned += high - (found if found >= 0 else low)
        return found

    def __getitem__(self, key):
        part = str.__getitem__(self, key)
        ScanCountingText.scanned += len(part)
        return part


def scanned_per_character(instructions: int) -> float:
    text = ScanCountingText(negate_chain(instructions))
    ScanCountingText.scanned = 0
    lower_entry(parse(text, source="chain.hlo"))
    return ScanCountingText.scanned / len(text)


def test_reading_a_module_scans_its_text_a_bounded_number_of_times():
    small, large = scanned_per_character(1_000), scanned_per_character(4_000)
    # Linear work scans each character a fixed number of times, whatever the size (0.1 today: the
    # lines of error messages);
    # the quadratic line count scanned 500 times the text at 1,000 instructions and 2,000 at 4,000.
    assert large <= 8, (small, large)
    assert large <= small * 1.25 + 1, (small, large)


def python_calls_to_load(instructions: int) -> int:
    text = negate_chain(instructions)
    calls = 0

    def count(frame, event, arg):
        nonlocal calls
        if event == "call":
            calls += 1

    sys.setprofile(count)
    try:
        kuiper.load_hlo(text, backend="numpy")
    finally:
        sys.setprofile(None)
    return calls


def test_a_whole_load_makes_python_calls_in_proportion_to_the_module():
    kuiper.load_hlo(negate_chain(10), backend="numpy")  # imports and first-use caches, once
    small, large = python_calls_to_load(500), python_calls_to_load(2_000)
    # Four times the instructions, about four times the calls; a pass that walked the graph once
    # per op would make sixteen times as many.
    assert large <= 4.5 * small, (small, large)
