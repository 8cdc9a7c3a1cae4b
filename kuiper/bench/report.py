"""What a benchmark found (``Report``), and the table ``kuiper bench`` prints from it."""

from __future__ import annotations

from dataclasses import dataclass, field

from .agreement import agreement_tolerance, agrees
from .peers import Engine
from .timing import Stats


@dataclass
class Report:
    """What ``run_benchmark`` found; ``format_report`` turns it into text."""

    model: str
    batch: int
    runs: int
    warmup: int
    notes: list[str] = field(default_factory=list)
    engines: list[Engine] = field(default_factory=list)
    stats: dict[str, Stats] = field(default_factory=dict)
    max_abs_diff: dict[str, float] = field(default_factory=dict)
    output_scale: float = 0.0
    unavailable: dict[str, str] = field(default_factory=dict)


def format_report(report: Report) -> str:
    rounds = (f"batch {report.batch}; {report.runs} timed rounds after {report.warmup} warm-up, "
              f"engines interleaved round-robin in one process")
    lines = [f"model: {report.model}", rounds, *report.notes]
    header = ("engine", "load ms", "median ms", "p10 ms", "p90 ms", "images/s", "kuiper/peer", "max|diff|")
    rows = [header]
    kuiper_median = report.stats["kuiper"].median_ms if "kuiper" in report.stats else float("nan")
    for engine in report.engines:
        s = report.stats[engine.name]
        ratio = "-" if engine.name == "kuiper" else f"{kuiper_median / s.median_ms:.2f}x"
        diff = report.max_abs_diff.get(engine.name)
        diff_text = "-" if diff is None else f"{diff:.2e}" + ("" if agrees(diff, report.output_scale) else " DIFFERS")
        rows.append((engine.label, f"{engine.load_ms:.1f}", f"{s.median_ms:.2f}", f"{s.p10_ms:.2f}",
                     f"{s.p90_ms:.2f}", f"{report.batch / s.median_ms * 1e3:.1f}", ratio, diff_text))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        cells = [row[0].ljust(widths[0])] + [cell.rjust(w) for cell, w in zip(row[1:], widths[1:])]
        lines.append("  ".join(cells))
    lines.append("kuiper/peer = kuiper median / peer median (above 1: kuiper is slower); "
                 f"max|diff| = largest |kuiper - peer| over the outputs (output scale {report.output_scale:.3g}, "
                 f"DIFFERS above {agreement_tolerance(report.output_scale):.2g})")
    for name, reason in report.unavailable.items():
        lines.append(f"not compared: {name}: {reason}")
    return "\n".join(lines)
