"""kuiper.bench.timing.compare_builds, the A/B tools' comparison: both builds called in turn, their
first outputs compared bit for bit, and the ratios read off the same samples."""

from __future__ import annotations

import numpy as np

from kuiper.bench import timing


def test_two_builds_are_called_in_turn_and_their_outputs_compared():
    calls = []
    a = lambda x: calls.append("A") or x * 2  # noqa: E731
    b = lambda x: calls.append("B") or x + x  # noqa: E731 - the same numbers another way
    result = timing.compare_builds({"A": a, "B": b}, [np.arange(4.0)], seconds=0.01, turn=2)
    assert result.equal
    assert calls[:2] == ["A", "B"]  # one first call each, before the timed turns
    timed = calls[2 + 6:]  # after three untimed calls each: turns of two
    assert timed[:4] == ["A", "A", "B", "B"]
    assert result.calls == timed.count("A") == timed.count("B")


def test_outputs_that_differ_say_so_in_the_line():
    x = [np.float32([1.0, 2.0])]
    result = timing.compare_builds({"A": lambda v: v, "B": lambda v: v + np.float32(1e-7)}, x, seconds=0.01, turn=2)
    assert not result.equal and "DIFFER" in result.line()
    assert result.calls > 0 and set(result.p10_ms) == {"A", "B"}
