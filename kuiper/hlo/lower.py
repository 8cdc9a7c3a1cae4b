"""HLO computation -> ModelIR: one op per instruction, tuples flattened away, calls inlined.

* A tuple-shaped value becomes its leaves (one operand each); ``tuple`` and
  ``get-tuple-element`` only regroup leaves and emit no op.
* ``call`` and ``fusion`` are inlined: the called computation's instructions join
  the caller's graph under the prefix ``caller/``, so the graph sees through them.
* An instruction with a translator (kuiper/hlo/translators.py: convolution, dot, the shape
  and elementwise families, reduce, gather, sort, control flow) becomes canonical ops with
  plain typed params; a computation it calls (a loop body, a reducer, a comparator) is
  lowered here too, into a ModelIR that the op holds as a sub-graph param.
* A custom call whose target a plugin registers (kuiper_add_custom_calls) translates as the
  plugin says.
* ``async-start`` runs its computation at once (inlined, as a call); ``async-update`` and
  ``async-done`` only regroup its (operands, results, contexts) tuple.
* Any other instruction is unsupported (``check_supported`` names them all at once), so the
  graph never holds an HLO object.
* ``vectorized=True`` leaves the parameter shapes free: used for computations that
  XLA applies to scalars (reduce's ``to_apply``, comparators), which kuiper applies
  to whole arrays at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import GraphError, UnsupportedOperatorError
from ..ir import dtypes
from ..model_ir import ModelIR, OperandInfo, OpNode
from .literals import literal_array
from .module import HloComputation, HloInstruction, HloModule
from .shapes import ArrayShape, Shape
from .site import Site
from .translate_custom_call import registered_translator
from .translators import TRANSLATORS, UNSUPPORTED
from .tree_reductions import split_long_reductions
from .widen_types import widen_extended_types

INLINED = ("call", "fusion")
# Elementwise opcodes whose operands may be scalars broadcast by the array rules instead.
ELEMENTWISE = frozenset(
    ["add", "subtract", "multiply", "divide", "remainder", "power", "maximum", "minimum", "atan2", "and", "or", "xor", "shift-left", "shift-right-arithmetic", "shift-right-logical", "complex", "compare", "select", "clamp"]
)
REGROUPING = ("tuple", "get-tuple-element", "parameter", "async-update", "async-done")
ASYNC_START = "async-start"  # runs its computation at once: inlined, as a call is


def translation_key(instruction: HloInstruction) -> str:
    """The opcode; a custom call is ``custom-call.<target>`` (e.g. the TopK custom call)."""
    if instruction.opcode == "custom-call":
        return f"custom-call.{instruction.attributes.get('custom_call_target', '')}"
    return instruction.opcode


def leaves(value) -> list[str]:
    """The operand names of a value: itself, or a tuple's leaves in order."""
    if isinstance(value, tuple):
        return [leaf for item in value for leaf in leaves(item)]
    return [value]


def check_supported(module: HloModule) -> None:
    """One UnsupportedOperatorError naming every instruction (reachable from ENTRY) kuiper cannot run."""
    problems: list[str] = []
    for computation in reachable_computations(module):
        for instruction in computation.instructions:
            buffers = [str(shape) for shape in instruction.shape.leaves() if shape.buffer]
            if buffers:  # XLA's reference to an array, even as a parameter: kuiper's values are arrays
                problems.append(f"  {instruction.name} in {computation.name}: buffer shape {', '.join(buffers)} "
                                "(a reference to an array, as XLA's Pin and CreateBuffer give; kuiper runs "
                                "array values only)")
            if instruction.opcode in (*INLINED, *REGROUPING, ASYNC_START):
                continue
            if translation_key(instruction) not in TRANSLATORS and registered_translator(instruction) is None:
                what = instruction.opcode
                if instruction.opcode == "custom-call":
                    what += (f" (custom_call_target={instruction.attributes.get('custom_call_target')!r}: "
                             "no plugin registers it through the kuiper_add_custom_calls hook)")
                if instruction.opcode in UNSUPPORTED:
                    what += f": {UNSUPPORTED[instruction.opcode]}"
                problems.append(f"  {instruction.name} in {computation.name}: {what}")
            for shape in instruction.shape.leaves():
                if shape.dtype is None and shape.element_type != "token":  # a token is held as a bool
                    problems.append(f"  {instruction.name} in {computation.name}: element type "
                                    f"{shape.element_type} (it holds no numbers)")
                elif shape.dtype is not None and not dtypes.is_available(shape.dtype):
                    problems.append(f"  {instruction.name} in {computation.name}: element type "
                                    f"{shape.element_type} (the installed ml_dtypes has no {shape.dtype})")
    if problems:
        raise UnsupportedOperatorError(
            f"{module.source or module.name}: {len(problems)} instruction(s) kuiper cannot run:\n" + "\n".join(problems)
        )


def reachable_computations(module: HloModule) -> list[HloComputation]:
    seen: dict[str, HloComputation] = {}
    stack = [module.entry]
    while stack:
        computation = stack.pop()
        if computation.name in seen:
            continue
        seen[computation.name] = computation
        for instruction in computation.instructions:
            stack.extend(module.computations[name] for name in instruction.called_computations())
    return list(seen.values())


def lower_computation(module: HloModule, computation: HloComputation, vectorized: bool = False) -> ModelIR:
    lowering = _Lowering(module, vectorized)
    arguments = []
    inputs: list[str] = []
    for parameter in computation.parameters():
        value = lowering.fresh_value(parameter.name, parameter.shape)
        arguments.append(value)
        inputs.extend(leaves(value))
    root = lowering.emit(computation, arguments, prefix="")
    source = f"{module.source or module.name}:{computation.name}"
    return ModelIR(lowering.ops, lowering.operands, inputs, leaves(root), source)


@dataclass
class _Frame:
    """A computation being emitted: its instructions in order, how far it got, the values so far."""

    computation: HloComputation
    arguments: list
    prefix: str
    order: list[HloInstruction]
    position: int = 0
    values: dict = field(default_factory=dict)


class _Lowering:
    def __init__(self, module: HloModule, vectorized: bool):
        self.module = module
        self.vectorized = vectorized
        self.ops: list[OpNode] = []
        self.operands: dict[str, OperandInfo] = {}
        self.inlining: list[str] = []  # computations being inlined, innermost last

    def fresh_value(self, name: str, shape: Shape):
        """Operand names for a value of ``shape``: ``name``, or ``name#0``, ``name#1`` ... per leaf."""
        if not shape.is_tuple:
            self.declare(name, shape)
            return name
        return tuple(self.fresh_value(f"{name}#{i}", element) for i, element in enumerate(shape.elements))

    def declare(self, name: str, shape: ArrayShape) -> None:
        dims = None if self.vectorized else tuple(None if d < 0 else d for d in shape.dims)
        dtype = "bool" if shape.element_type == "token" else shape.dtype  # a token carries no data
        self.operands[name] = OperandInfo(name, dims, dtype)

    def emit(self, computation: HloComputation, arguments: list, prefix: str):
        """Emit ops for ``computation`` with parameters bound to ``arguments``; return the root's value.

        Iterative: an inlined call pushes a frame instead of recursing, so a chain of 10,000
        calls is as safe as one.
        """
        frames = [_Frame(computation, arguments, prefix, _post_order(computation))]
        self.inlining.append(computation.name)
        while True:
            frame = frames[-1]
            if frame.position == len(frame.order):  # done: hand the root's value to the caller
                frames.pop()
                self.inlining.pop()
                result = frame.values[frame.computation.root.name]
                if not frames:
                    return result
                caller = frames[-1]
                caller.values[caller.order[caller.position].name] = result
                caller.position += 1
                continue
            instruction = frame.order[frame.position]
            if instruction.opcode in INLINED:
                callee = self.callee(instruction)
                operands = [frame.values[o] for o in instruction.operands]
                name = frame.prefix + instruction.name
                frames.append(_Frame(callee, operands, name + "/", _post_order(callee)))
                self.inlining.append(callee.name)
                continue
            self.emit_one(frame, instruction)
            frame.position += 1

    def emit_one(self, frame: _Frame, instruction: HloInstruction) -> None:
        """Emit the ops of one instruction that is not an inlined call."""
        computation, values = frame.computation, frame.values
        name = frame.prefix + instruction.name
        operands = [values[o] for o in instruction.operands]
        opcode = instruction.opcode
        if opcode == "parameter":
            if instruction.parameter_number >= len(frame.arguments):
                raise GraphError(f"{computation.name}: parameter({instruction.parameter_number}) has no argument")
            values[instruction.name] = frame.arguments[instruction.parameter_number]
        elif opcode == "tuple":
            values[instruction.name] = tuple(operands)
        elif opcode == "get-tuple-element":
            values[instruction.name] = operands[0][instruction.attributes["index"]]
        elif opcode == ASYNC_START:
            values[instruction.name] = self.async_start(instruction, name, operands)
        elif opcode == "async-update":
            values[instruction.name] = operands[0]
        elif opcode == "async-done":
            if not isinstance(operands[0], tuple) or len(operands[0]) < 2:
                raise GraphError(f"{self.module.where(instruction)}: async-done '{instruction.name}' must take "
                                 "the (operands, results, contexts...) of an async-start")
            values[instruction.name] = operands[0][1]
        elif opcode == "constant" and instruction.shape.is_tuple:
            values[instruction.name] = self.tuple_constant(instruction, name)
        else:
            operands = self.unbroadcast_scalars(computation, instruction, operands, values)
            output = self.fresh_value(name, instruction.shape)
            translator = TRANSLATORS.get(translation_key(instruction)) or registered_translator(instruction)
            if translator is None:  # lowered without check_supported (which names every such instruction)
                raise UnsupportedOperatorError(f"{self.module.where(instruction)}: {instruction.opcode} "
                                               f"'{instruction.name}' has no translation into kuiper's ops")
            self.ops.extend(translator(self.site(instruction, name, operands, leaves(output))))
            values[instruction.name] = output

    def unbroadcast_scalars(self, computation: HloComputation, instruction: HloInstruction, operands: list,
                            values: dict) -> list:
        """Feed an elementwise instruction the scalar behind ``broadcast(scalar)`` operands.

        Array broadcasting gives the same values when another operand has the full shape, and
        it saves a full-size array per scalar constant; the elementwise chain can then fuse.
        """
        if instruction.opcode not in ELEMENTWISE or len(operands) < 2:
            return operands
        scalars = {}
        for position, operand_name in enumerate(instruction.operands):
            producer = computation.by_name[operand_name]
            if producer.opcode == "broadcast" and len(producer.operands) == 1:
                source = computation.by_name[producer.operands[0]].shape
                if not source.is_tuple and source.rank == 0:
                    scalars[position] = values[producer.operands[0]]
        if not scalars or len(scalars) == len(operands):
            return operands  # nothing to do, or no operand left to carry the full shape
        return [scalars.get(position, operand) for position, operand in enumerate(operands)]

    def async_start(self, instruction: HloInstruction, name: str, operands: list) -> tuple:
        """``(operands, results, contexts...)``: the computation runs now; each context holds 0."""
        result = self.emit(self.callee(instruction), operands, prefix=name + "/")
        shape = instruction.shape
        if not shape.is_tuple or len(shape.elements) < 2:
            raise GraphError(f"{self.module.where(instruction)}: async-start '{instruction.name}' must give "
                             f"(operands, results, contexts...), found {shape}")
        contexts = []
        for index, context in enumerate(shape.elements[2:], start=2):
            contexts.append(self.fresh_value(f"{name}#{index}", context))
            for leaf, leaf_shape in zip(leaves(contexts[-1]), context.leaves()):
                zeros = np.zeros(leaf_shape.dims, leaf_shape.dtype)
                self.ops.append(OpNode("Constant", leaf, [], [leaf], {}, {"data": zeros},
                                       source=self.module.where(instruction)))
        return (tuple(operands), result, *contexts)

    def callee(self, instruction: HloInstruction) -> HloComputation:
        """The computation a call or fusion inlines (a computation calling itself is an error)."""
        name = instruction.attributes.get("calls") or instruction.attributes.get("to_apply")
        if not isinstance(name, str) or name not in self.module.computations:
            raise GraphError(f"{self.module.where(instruction)}: {instruction.opcode} '{instruction.name}' "
                             f"names no computation to call (calls= or to_apply=)")
        if name in self.inlining:
            raise GraphError(f"{self.module.where(instruction)}: computation '{name}' calls itself")
        return self.module.computations[name]

    def site(self, instruction: HloInstruction, name: str, operands: list, outputs: list[str]) -> Site:
        return Site(instruction, self.module, name, [leaf for o in operands for leaf in leaves(o)], outputs,
                    [len(leaves(o)) for o in operands], self.declare, self.lower_called)

    def lower_called(self, computation: HloComputation, vectorized: bool) -> ModelIR:
        """A computation that an instruction calls (a loop body, a reducer) as a sub-graph of its own."""
        return lower_computation(self.module, computation, vectorized)

    def tuple_constant(self, instruction: HloInstruction, name: str):
        def build(shape: Shape, literal, path: str):
            if shape.is_tuple:
                return tuple(build(s, lit, f"{path}#{i}") for i, (s, lit) in enumerate(zip(shape.elements, literal)))
            self.declare(path, shape)
            data = literal_array(instruction, shape, literal)
            self.ops.append(OpNode("Constant", path, [], [path], {}, {"data": data},
                                   source=self.module.where(instruction)))
            return path

        return build(instruction.shape, instruction.literal, name)


def _post_order(computation: HloComputation) -> list[HloInstruction]:
    """The instructions the root depends on, each after its operands (iterative: chains can be long)."""
    order: list[HloInstruction] = []
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    for start in [computation.root] + computation.parameters():
        stack = [(start, 0)]
        while stack:
            instruction, next_operand = stack.pop()
            if next_operand == 0:
                if state.get(instruction.name) == 2:
                    continue
                state[instruction.name] = 1
            if next_operand < len(instruction.operands):
                stack.append((instruction, next_operand + 1))
                operand = computation.by_name[instruction.operands[next_operand]]
                if state.get(operand.name) == 1:
                    raise GraphError(f"computation '{computation.name}' has a cycle through '{operand.name}'")
                if state.get(operand.name) != 2:
                    stack.append((operand, 0))
            else:
                state[instruction.name] = 2
                order.append(instruction)
    return order


def lower_entry(module: HloModule) -> ModelIR:
    """The ENTRY computation as a ModelIR, after checking every reachable instruction can run."""
    check_supported(module)
    module = split_long_reductions(module)  # f16, bf16, f8 reductions grouped as XLA's CPU compiler groups them
    module = widen_extended_types(module)  # bf16, f8, s4 ... compute in f32, s8 or u8, as on XLA's CPU backend
    return lower_computation(module, module.entry)
