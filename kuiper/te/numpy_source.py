"""Print a kernel's execution plans (kuiper.te.execute) as a standalone NumPy function.

    def grad_case10(dA):
        dB = np.zeros((10, 8), dtype=np.float32)
        # dB<10, 8>[i, j] += dA<8, 8>[i, j] / 3.0 where i < 8;
        dB[0:8, 0:8] += np.broadcast_to(np.einsum("ab->ab", dA[0:8, 0:8]) * np.float32(0.33333334), (8, 8))
        ...
        return {"dB": dB}

The same plans run through ``kuiper.te.compile``, so the source computes what it computes.
"""

from __future__ import annotations

import numpy

from kuiper.ir.functions import INTRINSICS, OPERATORS
from kuiper.ir.nodes import Binary, Call, Cast, Compare, Const, Indexing, IRExpr, Select, Unary, Var
from kuiper.te.execute import EinsumPlan, GridPlan, plan
from kuiper.te.kernel import Kernel
from kuiper.te.lower import nests

# Python infix operators where NumPy arrays follow the IR's meaning (// and % round toward -inf).
_INFIX = {name: OPERATORS[name].symbol for name in ("add", "sub", "mul", "div", "floordiv", "mod",
                                                       "lt", "le", "gt", "ge", "eq", "ne")}
# Everything else by its NumPy name from the one operation table (its last array spelling);
# te's and/or are logical (on bools).
_FUNCTIONS = {
    name: f"np.{op.array_names[-1]}" for name, op in {**OPERATORS, **INTRINSICS}.items() if name not in _INFIX
} | {"and": "np.logical_and", "or": "np.logical_or"}


def numpy_source(kernel: Kernel, name: str) -> str:
    lines = ["import numpy as np", "", "", f"def {name}({', '.join(kernel.inputs)}):"]
    for output in kernel.outputs:
        buffer = kernel.buffers[output]
        lines.append(f"    {output} = np.zeros({buffer.shape!r}, dtype=np.{buffer.dtype})")
    for stmt, nest in zip(kernel.statements, nests(kernel)):
        lines.append(f"    # {stmt}")
        step = plan(nest)
        if step is None:
            lines.append("    # (empty iteration space)")
        elif isinstance(step, EinsumPlan):
            lines += _einsum_lines(step)
        else:
            lines += _grid_lines(step)
    lines.append("    return {" + ", ".join(f"{o!r}: {o}" for o in kernel.outputs) + "}")
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
            source = operand.tensor
            if operand.windows:
                lengths = tuple(n for _, n in operand.windows)
                axes = tuple(a for a, _ in operand.windows)
                source = f"np.lib.stride_tricks.sliding_window_view({source}, {lengths!r}, axis={axes!r})"
            operands.append(f"{source}[{_region(operand.slices)}]")
            continue
        for axis, var in enumerate(operand.labels):
            start, stop = step.loops[var]
            shape = tuple(-1 if a == axis else 1 for a in range(len(operand.labels)))
            lines.append(f"    {var} = np.arange({start}, {stop}).reshape({shape!r})")
        indices = ", ".join(_expr(index, False, {}) for index in operand.gather)
        source = operand.tensor
        if operand.padding is not None:
            source = f"np.pad({operand.tensor}, {operand.padding!r})"
        lines.append(f"    gathered{number} = {source}[{indices}]")
        operands.append(f"gathered{number}")
    if operands and step.equation.split("->")[0] == step.equation.split("->")[1]:
        result = operands[0]
    elif operands:
        result = f"np.einsum({step.equation!r}, {', '.join(operands)}, optimize=True)"
    else:
        result = f"np.{step.dtype}(1.0)"
    if step.scale != 1.0:
        result += f" * np.{step.dtype}({_number(step.scale, step.dtype)})"
    if step.expanded != step.shape:
        result = f"np.broadcast_to(np.reshape({result}, {step.expanded!r}), {step.shape!r})"
    return [*lines, f"    {step.target}[{_region(step.region)}] += {result}"]


def _grid_lines(step: GridPlan) -> list[str]:
    count = len(step.loops)
    lines = []
    for axis, (var, start, stop) in enumerate(step.loops):
        shape = tuple(-1 if a == axis else 1 for a in range(count))
        lines.append(f"    {var} = np.arange({start}, {stop}).reshape({shape!r})")
    shapes = {name: tensor_shape for name, tensor_shape in _tensor_shapes(step.value)}
    guarded = bool(step.guard)
    shape = tuple(stop - start for _, start, stop in step.loops)
    lines.append(f"    value = np.broadcast_to({_expr(step.value, guarded, shapes)}, {shape!r})")
    if guarded:
        mask = " & ".join(f"({_expr(test, guarded, shapes)})" for test in step.guard)
        lines.append(f"    value = np.where({mask}, value, 0)")
    total = f"value.sum(axis={step.reduced!r})" if step.reduced else "value"
    return [*lines, f"    {step.target}[{_region(step.region)}] += {total}"]


def _tensor_shapes(expr: IRExpr):
    if isinstance(expr, Indexing):
        yield expr.tensor.name, expr.tensor.shape
    for child in expr.children():
        yield from _tensor_shapes(child)


def _expr(node: IRExpr, clamp: bool, shapes) -> str:
    def sub(child):
        return _expr(child, clamp, shapes)

    if isinstance(node, Const):
        if isinstance(node.value, bool) or node.dtype in ("int64", "pyint"):
            return repr(node.value)
        return f"np.{node.dtype if node.dtype.startswith('float') else 'float64'}({_number(node.value, node.dtype)})"
    if isinstance(node, Indexing):
        indices = [sub(i) for i in node.indices]
        if clamp:  # a guarded point may subscript outside; it is masked out afterwards
            indices = [f"np.clip({i}, 0, {extent - 1})" for i, extent in zip(indices, node.tensor.shape)]
        return f"{node.tensor.name}[{', '.join(indices)}]"
    if isinstance(node, Var):
        return node.name
    if isinstance(node, Unary):
        return f"(-{sub(node.operand)})" if node.op == "neg" else f"np.logical_not({sub(node.operand)})"
    if isinstance(node, (Binary, Compare)):
        if node.op in _INFIX:
            return f"({sub(node.lhs)} {_INFIX[node.op]} {sub(node.rhs)})"
        return f"{_FUNCTIONS.get(node.op, 'np.' + node.op)}({sub(node.lhs)}, {sub(node.rhs)})"
    if isinstance(node, Call):
        return f"{_FUNCTIONS.get(node.func, 'np.' + node.func)}({', '.join(sub(a) for a in node.args)})"
    if isinstance(node, Cast):
        return f"np.asarray({sub(node.operand)}).astype(np.{node.dtype})"
    if isinstance(node, Select):
        return f"np.where({sub(node.cond)}, {sub(node.true_value)}, {sub(node.false_value)})"
    raise TypeError(f"no NumPy source for {type(node).__name__}")


def _number(value: float, dtype: str) -> str:
    return str(numpy.float32(value)) if dtype == "float32" else repr(float(value))
