"""Print a kernel's execution plans (kuiper.te.execute) as a standalone NumPy function.

    def grad_case10(u_dA):
        u_dB = np.zeros((10, 8), dtype=np.float32)
        # dB<10, 8>[i, j] += dA<8, 8>[i, j] / 3.0 where i < 8;
        u_dB[0:8, 0:8] += np.broadcast_to(np.einsum("ab->ab", u_dA[0:8, 0:8]) * np.float32(0.33333334), (8, 8))
        ...
        return {"dB": u_dB}

The same plans run through ``kuiper.te.compile``, so the source computes what it computes.
Tensor and index names are emitted as ``u_<name>`` and ``v_<name>`` (kuiper.ir.identifiers), so none can
meet ``np`` or the source's own temporaries (``value``, ``gathered0``) or a Python keyword;
call the function positionally, in the kernel's input order.
"""

from __future__ import annotations

from kuiper.ir.identifiers import tensor_identifier, variable_identifier
from kuiper.ir.render_numpy import NumpyRenderer, float_text
from kuiper.te.execute import EinsumPlan, GridPlan, plan
from kuiper.te.kernel import Kernel
from kuiper.te.lower import nests

_PLAIN = NumpyRenderer(user_names=True)
_CLAMPED = NumpyRenderer(clamp=True, user_names=True)  # a guarded point may subscript outside; it is masked out afterwards


def numpy_source(kernel: Kernel, name: str) -> str:
    """The source; ``name`` must be a function name kuiper.ir.identifiers accepts (emit() checks it)."""
    params = ", ".join(tensor_identifier(n) for n in kernel.inputs)
    lines = ["import numpy as np", "", "", f"def {name}({params}):"]
    for output in kernel.outputs:
        buffer = kernel.buffers[output]
        lines.append(f"    {tensor_identifier(output)} = np.zeros({buffer.shape!r}, dtype=np.{buffer.dtype})")
    for stmt, nest in zip(kernel.statements, nests(kernel)):
        lines.append(f"    # {stmt}")
        step = plan(nest)
        if step is None:
            lines.append("    # (empty iteration space)")
        elif isinstance(step, EinsumPlan):
            lines += _einsum_lines(step)
        else:
            lines += _grid_lines(step)
    lines.append("    return {" + ", ".join(f"{o!r}: {tensor_identifier(o)}" for o in kernel.outputs) + "}")
    return "\n".join(lines) + "\n"


def _region(region) -> str:
    return ", ".join(_slice(s) for s in region) or "()"


def _slice(item) -> str:
    if isinstance(item, slice):
        step = "" if item.step in (None, 1) else f":{item.step}"
        return f"{item.start}:{item.stop}{step}"
    return str(item)


def _einsum_lines(step: EinsumPlan) -> list[str]:
    lines, operands = [], []
    for number, operand in enumerate(step.operands):
        if operand.slices is not None:
            source = tensor_identifier(operand.tensor)
            if operand.windows:
                lengths = tuple(n for _, n in operand.windows)
                axes = tuple(a for a, _ in operand.windows)
                source = f"np.lib.stride_tricks.sliding_window_view({source}, {lengths!r}, axis={axes!r})"
            operands.append(f"{source}[{_region(operand.slices)}]")
            continue
        for axis, var in enumerate(operand.labels):
            start, stop = step.loops[var]
            shape = tuple(-1 if a == axis else 1 for a in range(len(operand.labels)))
            lines.append(f"    {variable_identifier(var)} = np.arange({start}, {stop}).reshape({shape!r})")
        indices = ", ".join(_PLAIN.render(index) for index in operand.gather)
        source = tensor_identifier(operand.tensor)
        if operand.padding is not None:
            source = f"np.pad({source}, {operand.padding!r})"
        lines.append(f"    gathered{number} = {source}[{indices}]")
        operands.append(f"gathered{number}")
    if operands and step.equation.split("->")[0] == step.equation.split("->")[1]:
        result = operands[0]
    elif operands:
        result = f"np.einsum({step.equation!r}, {', '.join(operands)}, optimize=True)"
    else:
        result = f"np.{step.dtype}(1.0)"
    if step.scale != 1.0:
        result += f" * np.{step.dtype}({float_text(step.scale, step.dtype)})"
    if step.expanded != step.shape:
        result = f"np.broadcast_to(np.reshape({result}, {step.expanded!r}), {step.shape!r})"
    return [*lines, f"    {tensor_identifier(step.target)}[{_region(step.region)}] += {result}"]


def _grid_lines(step: GridPlan) -> list[str]:
    count = len(step.loops)
    lines = []
    for axis, (var, start, stop) in enumerate(step.loops):
        shape = tuple(-1 if a == axis else 1 for a in range(count))
        lines.append(f"    {variable_identifier(var)} = np.arange({start}, {stop}).reshape({shape!r})")
    renderer = _CLAMPED if step.guard else _PLAIN
    shape = tuple(stop - start for _, start, stop in step.loops)
    lines.append(f"    value = np.broadcast_to({renderer.render(step.value)}, {shape!r})")
    if step.guard:
        mask = " & ".join(f"({renderer.render(test)})" for test in step.guard)
        lines.append(f"    value = np.where({mask}, value, 0)")
    total = f"value.sum(axis={step.reduced!r})" if step.reduced else "value"
    return [*lines, f"    {tensor_identifier(step.target)}[{_region(step.region)}] += {total}"]
