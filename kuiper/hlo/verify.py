"""Checks XLA's verifier would make: every name defined, every call resolved, shapes that agree.

Each failure is an HloSyntaxError pointing at the instruction's line and column.
"""

from __future__ import annotations

from .lexer import SourceText
from .module import HloComputation, HloInstruction, HloModule
from .verify_rules import instruction_problem

def verify_module(module: HloModule, source: SourceText) -> None:
    for computation in module.computations.values():
        _verify_computation(module, computation, source)
    entries = [c for c in module.computations.values() if c.is_entry]
    if len(entries) > 1:
        raise source.error("the module has more than one ENTRY computation", entries[1].position)
    _check_no_recursion(module, source)


def _check_no_recursion(module: HloModule, source: SourceText) -> None:
    """XLA's call graph is acyclic: no computation may call itself, directly or not."""
    state: dict[str, int] = {}  # 1: being visited, 2: done
    for start in module.computations:
        if state.get(start):
            continue
        stack = [(start, iter(_calls(module, start)))]
        state[start] = 1
        while stack:
            name, pending = stack[-1]
            step = next(pending, None)
            if step is None:
                state[name] = 2
                stack.pop()
                continue
            instruction, called = step
            if state.get(called) == 1:
                raise source.error(f"computation '{called}' calls itself (through '{instruction.name}')",
                                   instruction.position)
            if not state.get(called):
                state[called] = 1
                stack.append((called, iter(_calls(module, called))))


def _calls(module: HloModule, name: str):
    for instruction in module.computations[name].instructions:
        for called in instruction.called_computations():
            yield instruction, called


def _verify_computation(module: HloModule, computation: HloComputation, source: SourceText) -> None:
    names: set[str] = set()
    roots = [i for i in computation.instructions if i.is_root]
    if len(roots) > 1:
        raise source.error(f"computation '{computation.name}' has more than one ROOT", roots[1].position)
    numbers: dict[int, HloInstruction] = {}
    for instruction in computation.instructions:
        if instruction.name in names:
            raise source.error(f"instruction '{instruction.name}' is defined twice", instruction.position)
        names.add(instruction.name)
        if instruction.parameter_number is not None:
            if instruction.parameter_number in numbers:
                raise source.error(f"parameter({instruction.parameter_number}) appears twice", instruction.position)
            numbers[instruction.parameter_number] = instruction
    if sorted(numbers) != list(range(len(numbers))):
        last = max(numbers.values(), key=lambda i: i.parameter_number)
        raise source.error(
            f"computation '{computation.name}' has parameters {sorted(numbers)}; expected 0..{len(numbers) - 1}",
            last.position,
        )
    # XLA reads a signature's result shape (it must fit the root) but not its parameter list: that
    # may name more parameters than the body has, or other shapes (XLA's own lit files do both).
    if computation.result_shape is not None and not computation.result_shape.same_dims(computation.root.shape):
        raise source.error(f"the shape of computation '{computation.name}', {computation.result_shape}, is not "
                           f"compatible with that of its root instruction, {computation.root.shape}",
                           computation.position)
    for instruction in computation.instructions:
        for operand in instruction.operands:
            if operand not in computation.by_name:
                raise source.error(
                    f"instruction '{instruction.name}' uses '{operand}', which computation "
                    f"'{computation.name}' does not define",
                    instruction.position,
                )
        for called in instruction.called_computations():
            if called not in module.computations:
                raise source.error(
                    f"instruction '{instruction.name}' calls computation '{called}', which the module does not define",
                    instruction.position,
                )
        problem = instruction_problem(instruction, computation)
        if problem:
            raise source.error(f"instruction '{instruction.name}' ({instruction.opcode}): {problem}", instruction.position)
