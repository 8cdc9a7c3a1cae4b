"""One benchmark: every engine's output checked against kuiper's once, then the engines timed interleaved."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .agreement import max_abs_difference
from .peers import Engine, first_line
from .report import Report
from .timing import interleaved_timings, summarise


def run_benchmark(engines: list[Engine], batch: int, runs: int, warmup: int, model: str = "",
                  notes: Sequence[str] = (), unavailable: dict[str, str] | None = None, progress=None,
                  pause: float = 0.0) -> Report:
    """Check outputs once (first call of every engine), then time them interleaved."""
    report = Report(model, batch, runs, warmup, list(notes), unavailable=dict(unavailable or {}))
    reference = None
    working = []
    for engine in engines:
        try:
            outputs = engine.to_numpy(engine.call())
        except Exception as exc:  # a failing peer is reported, not fatal
            if engine.name == "kuiper":
                raise
            report.unavailable[engine.name] = f"failed to run at batch {batch}: {type(exc).__name__}: {first_line(exc)}"
            continue
        if reference is None:  # kuiper comes first
            reference = outputs
            report.output_scale = max((float(np.max(np.abs(o))) for o in outputs if o.size), default=0.0)
        else:
            report.max_abs_diff[engine.name] = max_abs_difference(reference, outputs)
        working.append(engine)
    report.engines = working
    samples = interleaved_timings(working, runs, warmup, progress=progress, pause=pause)
    report.stats = {name: summarise(s) for name, s in samples.items()}
    return report
