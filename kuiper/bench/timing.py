"""Timing: engines run interleaved round-robin, and the median and percentiles of their times."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .peers import Engine

PROGRESS_AFTER_S = 2.0  # runs shorter than this print no progress line


@dataclass
class Stats:
    median_ms: float
    p10_ms: float
    p90_ms: float
    runs: int


def summarise(seconds: Sequence[float]) -> Stats:
    ms = np.asarray(seconds, dtype=np.float64) * 1e3
    return Stats(float(np.median(ms)), float(np.percentile(ms, 10)), float(np.percentile(ms, 90)), len(ms))


def interleaved_timings(engines: Sequence[Engine], runs: int, warmup: int, progress=None,
                        pause: float = 0.0, clock=time.perf_counter, sleep=time.sleep) -> dict[str, list[float]]:
    """Round-robin: each round runs every engine once; returns seconds per engine for the timed rounds.

    ``pause`` seconds of sleep before each run let the previous engine's worker threads
    stop spinning (OpenBLAS, OpenMP and ONNX Runtime pools busy-wait after a call), so
    they do not steal cores from the next engine.  ``progress`` (a text stream or
    None) gets one line, rewritten each round, once the run has taken PROGRESS_AFTER_S.
    """
    samples: dict[str, list[float]] = {e.name: [] for e in engines}
    began = clock()
    total = warmup + runs
    shown = False
    for round_index in range(total):
        for engine in engines:
            if pause > 0:
                sleep(pause)
            start = clock()
            engine.call()
            elapsed = clock() - start
            if round_index >= warmup:
                samples[engine.name].append(elapsed)
        if progress is not None and (shown or clock() - began > PROGRESS_AFTER_S):
            phase = "warm-up" if round_index < warmup else "timed"
            latest = ", ".join(f"{n} {s[-1] * 1e3:.1f} ms" for n, s in samples.items() if s)
            progress.write(f"\rkuiper bench: round {round_index + 1}/{total} ({phase}) {latest}   ")
            progress.flush()
            shown = True
    if shown:
        progress.write("\n")
        progress.flush()
    return samples


def best_microseconds(call, repeats: int, warmup: int = 1) -> float:
    """The fastest of seven batches of ``repeats`` calls of ``call`` (after ``warmup`` untimed ones), in us a call:
    for a step or a kernel alone, where the fastest batch is the one the machine left alone (the tools'
    per-step profiles)."""
    for _ in range(warmup):
        call()
    batches = []
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(repeats):
            call()
        batches.append((time.perf_counter() - start) / repeats * 1e6)
    return min(batches)


def alternating(models: dict, inputs: list, seconds: float, turn: int,
                clock=time.perf_counter) -> dict[str, list[float]]:
    """Seconds per call of each of ``models`` ({name: model}) on ``inputs``, each called ``turn`` times in turn
    for ``seconds`` after three untimed calls each, so that all meet the same phases of a shared machine
    (the A/B tools in tools/)."""
    times: dict[str, list[float]] = {name: [] for name in models}
    for model in models.values():
        for _ in range(3):
            model(*inputs)
    end = clock() + seconds
    while clock() < end:
        for name, model in models.items():
            for _ in range(turn):
                start = clock()
                model(*inputs)
                times[name].append(clock() - start)
    return times


@dataclass
class Comparison:
    """Two builds A and B of one model timed by ``alternating``: their 10th percentiles and medians in ms,
    whether their first outputs were equal bit for bit, and the calls timed per side."""

    p10_ms: dict[str, float]
    median_ms: dict[str, float]
    equal: bool
    calls: int

    def line(self, digits: int = 3) -> str:
        """``p10 A .. B .. A/B ..  median A .. B .. A/B ..  outputs equal  calls N each``."""
        p10, median = self.p10_ms, self.median_ms
        return (f"p10 A {p10['A']:.{digits}f} ms  B {p10['B']:.{digits}f} ms  A/B {p10['A'] / p10['B']:.3f}   "
                f"median A {median['A']:.{digits}f} B {median['B']:.{digits}f} A/B {median['A'] / median['B']:.3f}   "
                f"outputs {'equal' if self.equal else 'DIFFER'}   calls {self.calls} each")


def compare_builds(models: dict, inputs: list, seconds: float, turn: int) -> Comparison:
    """Time ``models`` ({"A": model, "B": model}) with ``alternating`` after one call each (a first call
    specializes the steps), and compare those first outputs bit for bit."""
    outputs = {side: model(*inputs) for side, model in models.items()}
    flat = {side: out if isinstance(out, tuple) else (out,) for side, out in outputs.items()}
    equal = all(np.array_equal(a, b) for a, b in zip(flat["A"], flat["B"]))
    times = alternating(models, inputs, seconds, turn)
    return Comparison({side: float(np.percentile(samples, 10)) * 1e3 for side, samples in times.items()},
                      {side: float(np.median(samples)) * 1e3 for side, samples in times.items()},
                      equal, len(times["A"]))
