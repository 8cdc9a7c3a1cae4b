"""Checks XLA's verifier would make: every name defined, every call resolved, shapes that agree.

Each failure is an HloSyntaxError pointing at the instruction's line and column.
"""

from __future__ import annotations

from .lexer import SourceText
from .module import HloComputation, HloInstruction, HloModule
from .shapes import ArrayShape

# Opcodes whose operands and result share their dims (XLA has no implicit broadcasting).
ELEMENTWISE_UNARY = frozenset(
    ["abs", "cbrt", "ceil", "cos", "erf", "exponential", "exponential-minus-one", "floor", "imag", "is-finite", "log", "log-plus-one", "logistic", "negate", "not", "popcnt", "real", "round-nearest-afz", "round-nearest-even", "rsqrt", "sign", "sin", "sqrt", "tan", "tanh", "count-leading-zeros", "clz", "convert", "bitcast-convert", "copy", "reduce-precision"]
)
ELEMENTWISE_BINARY = frozenset(
    ["add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "power", "atan2", "and", "or", "xor", "shift-left", "shift-right-arithmetic", "shift-right-logical", "compare", "complex"]
)


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
    if computation.parameter_shapes is not None:
        if len(computation.parameter_shapes) != len(numbers):
            raise source.error(
                f"computation '{computation.name}' declares {len(computation.parameter_shapes)} parameter(s) "
                f"in its signature but has {len(numbers)} parameter instruction(s)",
                computation.position,
            )
        for number, (_, declared) in enumerate(computation.parameter_shapes):
            instruction = numbers[number]
            if not declared.same_dims(instruction.shape):
                raise source.error(
                    f"parameter({number}) has shape {instruction.shape}, the signature says {declared}",
                    instruction.position,
                )
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
        problem = _shape_problem(instruction, computation)
        if problem:
            raise source.error(f"instruction '{instruction.name}' ({instruction.opcode}): {problem}", instruction.position)


def _shape_problem(instruction: HloInstruction, computation: HloComputation) -> str | None:
    operands = [computation.by_name[name].shape for name in instruction.operands]
    shape = instruction.shape
    opcode = instruction.opcode
    if opcode in ELEMENTWISE_UNARY or opcode in ELEMENTWISE_BINARY:
        expected = 1 if opcode in ELEMENTWISE_UNARY else 2
        if len(operands) != expected:
            return f"takes {expected} operand(s), found {len(operands)}"
        for operand in operands:
            if not shape.same_dims(operand):
                return f"operand shape {operand} does not match the result shape {shape}"
        if opcode == "compare" and shape.element_type != "pred":
            return f"compare must give pred, the result says {shape.element_type}"
    elif opcode == "get-tuple-element":
        if len(operands) != 1 or not operands[0].is_tuple:
            return "takes one tuple-shaped operand"
        index = instruction.attributes.get("index")
        if not isinstance(index, int) or not 0 <= index < len(operands[0].elements):
            return f"index={index!r} is out of range for a tuple of {len(operands[0].elements)}"
        if not operands[0].elements[index].same_dims(shape):
            return f"element {index} has shape {operands[0].elements[index]}, the result says {shape}"
    elif opcode == "tuple":
        if not shape.is_tuple or len(shape.elements) != len(operands):
            return f"result shape {shape} does not hold {len(operands)} operand(s)"
        for element, operand in zip(shape.elements, operands):
            if not element.same_dims(operand):
                return f"operand shape {operand} does not match the tuple element {element}"
    elif opcode in ("reshape", "bitcast") and len(operands) == 1 and isinstance(shape, ArrayShape):
        operand = operands[0]
        if operand.is_tuple:
            return "takes an array operand, not a tuple"
        same_type = opcode == "reshape" or operand.element_type == shape.element_type
        if operand.size() != shape.size() and same_type and -1 not in shape.dims + operand.dims:
            return f"{operand} has {operand.size()} elements, the result {shape} has {shape.size()}"
    elif opcode == "select":
        if len(operands) != 3:
            return f"takes 3 operands, found {len(operands)}"
        if not all(shape.same_dims(o) for o in operands[1:]):
            return "the two branches must have the result's shape"
    return None
