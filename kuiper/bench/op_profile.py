"""``kuiper bench --profile``: kuiper's time op by op, through the model's own executor and a StepObserver."""

from __future__ import annotations

import time

import numpy as np


class _StepTimer:
    """A StepObserver that times each step, synchronising the backend around it."""

    def __init__(self, model):
        self.backend = model.backend
        self.index = {id(step.node): i for i, step in enumerate(model.steps)}
        self.samples: dict[int, list[float]] = {i: [] for i in range(len(model.steps))}
        self.started = 0.0

    def before_step(self, node, inputs):
        self.backend.synchronize()
        self.started = time.perf_counter()

    def after_step(self, node, inputs, outputs):
        self.backend.synchronize()
        self.samples[self.index[id(node)]].append(time.perf_counter() - self.started)


def profile_steps(model, inputs: list, rounds: int) -> dict[int, list[float]]:
    """Seconds per step (index into model.steps), through the model's own executor and a StepObserver.

    Each step is synchronised on its own, so on an asynchronous backend the per-op
    times add up to more than a normal run (which overlaps launches).
    """
    timer = _StepTimer(model)
    for _ in range(rounds):
        model(*inputs, observer=timer)
    return timer.samples


def format_profile(model, samples: dict[int, list[float]], top: int = 12) -> list[str]:
    """Median time per op type (summed over its ops) and the slowest single ops."""
    medians = {i: float(np.median(s)) * 1e3 for i, s in samples.items()}
    total = sum(medians.values()) or float("nan")
    by_type: dict[str, list[float]] = {}
    for index, ms in medians.items():
        by_type.setdefault(model.steps[index].node.type, []).append(ms)
    rounds = len(next(iter(samples.values()), []))
    lines = [f"kuiper per-op profile (median of {rounds} step-by-step runs, sum {total:.2f} ms):", "  by op type:"]
    for op_type, times in sorted(by_type.items(), key=lambda kv: -sum(kv[1])):
        lines.append(f"    {op_type:<28} {sum(times):9.2f} ms {100 * sum(times) / total:5.1f}%  ({len(times)} ops)")
    lines.append(f"  slowest {min(top, len(medians))} ops:")
    for index in sorted(medians, key=lambda i: -medians[i])[:top]:
        node = model.steps[index].node
        info = model.ir.operands.get(node.inputs[0]) if node.inputs else None
        shape = _shape_text(info.shape) if info is not None and info.shape is not None else "?"
        lines.append(f"    {node.name:<28} {node.type:<22} {medians[index]:9.2f} ms  input {shape}")
    return lines


def _shape_text(shape) -> str:
    """``(?, 4, 7, 7)``: a symbolic dim (None, e.g. the batch) shows as ``?``."""
    return "(" + ", ".join("?" if dim is None else str(dim) for dim in shape) + ")"
