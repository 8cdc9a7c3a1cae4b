"""``kuiper bench --profile``: kuiper's time op by op, through the model's own executor and a StepObserver."""

from __future__ import annotations

import time

import numpy as np

from ..graph.providers import PARTITION_TYPE


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
    """Median time per op type (summed over its ops; a provider's partitions as one kind), the ops that
    ran inside partitions, and the slowest single steps."""
    medians = {i: float(np.median(s)) * 1e3 for i, s in samples.items()}
    total = sum(medians.values()) or float("nan")
    by_type: dict[str, list[float]] = {}
    ops_of: dict[str, int] = {}
    for index, ms in medians.items():
        node = model.steps[index].node
        by_type.setdefault(_kind(node), []).append(ms)
        ops_of[_kind(node)] = ops_of.get(_kind(node), 0) + _op_count(node)
    rounds = len(next(iter(samples.values()), []))
    ops = sum(ops_of.values())
    partitions = [model.steps[i].node for i in medians if model.steps[i].node.type == PARTITION_TYPE]
    claimed = sum(_op_count(node) for node in partitions)
    lines = [f"kuiper per-op profile (median of {rounds} step-by-step runs, sum {total:.2f} ms):",
             f"  {ops} ops in {len(medians)} steps, {1e3 * total / max(ops, 1):.1f} us per op; {claimed} ops ran in "
             f"{len(partitions)} provider partitions (one compiled call each); {model.plan.specialized_count()} "
             f"steps ran a specialized forward (Op.specialized)", _memory_line(model), "  by op type:"]
    for op_type, times in sorted(by_type.items(), key=lambda kv: -sum(kv[1])):
        count = (f"{len(times)} partitions, {ops_of[op_type]} ops" if op_type.startswith(PARTITION_TYPE)
                 else f"{len(times)} ops")
        lines.append(f"    {op_type:<28} {sum(times):9.2f} ms {100 * sum(times) / total:5.1f}%  ({count})")
    lines.append(f"  slowest {min(top, len(medians))} ops:")
    for index in sorted(medians, key=lambda i: -medians[i])[:top]:
        node = model.steps[index].node
        info = model.ir.operands.get(node.inputs[0]) if node.inputs else None
        shape = _shape_text(info.shape) if info is not None and info.shape is not None else "?"
        lines.append(f"    {node.name:<28} {_kind(node):<22} {medians[index]:9.2f} ms  input {shape}")
    return lines


def _memory_line(model) -> str:
    """How the memory plans of the calls so far lay out their values (kuiper/graph/memory_plan.py)."""
    plans = [plan for plan in model.plan.memory_plans.values() if plan is not None]
    if not model.plan.plans_memory:
        return "  memory plan: off (KUIPER_MEMORY_PLAN=0, or a backend whose arrays are not NumPy's)"
    if not plans:
        return "  memory plan: none (no step's result is a kernel's array that stays inside the call)"
    planned = {request.step for plan in plans for request in plan.requests}
    arena = max(plan.nbytes for plan in plans)
    return (f"  memory plan: {len(planned)} of {len(model.steps)} steps take their results from an arena of "
            f"{arena / 2**20:.2f} MiB a thread ({len(plans)} feed shape{'s' if len(plans) > 1 else ''})")


def _kind(node) -> str:
    """The op type, or for a provider's partition ``Partition (provider)``."""
    return f"{PARTITION_TYPE} ({node.params.get('provider')})" if node.type == PARTITION_TYPE else node.type


def _op_count(node) -> int:
    """The ops a step runs: a partition's members, else one."""
    return len(node.params.get("members", ())) if node.type == PARTITION_TYPE else 1


def _shape_text(shape) -> str:
    """``(?, 4, 7, 7)``: a symbolic dim (None, e.g. the batch) shows as ``?``."""
    return "(" + ", ".join("?" if dim is None else str(dim) for dim in shape) + ")"
