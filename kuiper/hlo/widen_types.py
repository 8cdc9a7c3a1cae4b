"""Compute on the element types NumPy lacks as XLA's CPU backend does: in a wider type.

XLA's CPU backend has no bf16, f8 or f4 arithmetic. Its float normalization pass gives each
instruction that computes on such a type converted operands, runs it in f32 (bf16) or f16 (the
8-bit floats, f4e2m1fn) and converts the result back; kuiper computes in f32 and rounds an 8-bit
or f4 result through f16 first (ROUNDS_THROUGH_F16), so every instruction rounds as XLA's does.
A reduce or reduce-window of these floats stays in its type, as in XLA, where only its reducer's
instructions are normalized: it accumulates in its type, each step rounded (a one-op bf16 reducer
stays one op, which the backend computes in f32 and rounds once, as the normalized one would); the
computations that scatter and select-and-scatter call run in f32 throughout. Sub-byte integers
(s4, u2 ...) compute here in s8/u8, whose wraparound agrees with theirs modulo 2^bits.

``widen_extended_types`` rewrites a module the same way before it is lowered; data movement
(reshape, slice, transpose, convert, bitcast-convert ...) keeps the narrow type, which ml_dtypes
stores in NumPy arrays.
"""

from __future__ import annotations

from dataclasses import replace

from ..errors import UnsupportedOperatorError
from .module import CALLED_ATTRIBUTES, HloComputation, HloInstruction, HloModule
from .shapes import ArrayShape, Shape, TupleShape
from .translate_called import REDUCER_NAMES, binary_root_opcode
from .translate_elementwise import FUNCTIONS

COMPUTE_TYPE = {
    **{t: "f32" for t in ("bf16", "f4e2m1fn", "f8e3m4", "f8e4m3", "f8e4m3fn", "f8e4m3b11fnuz", "f8e4m3fnuz",
                          "f8e5m2", "f8e5m2fnuz", "f8e8m0fnu")},
    "s1": "s8", "s2": "s8", "s4": "s8", "u1": "u8", "u2": "u8", "u4": "u8",
}
# XLA's CPU compiler normalizes the 8-bit floats and f4e2m1fn to f16 (FloatSupport(F8E4M3FN, F16) ...),
# bf16 to f32: an instruction on an 8-bit float rounds its result to f16 first, then to its own type.
# kuiper computes in f32 and rounds the same way, through f16: an f8 dot of 16 + 1 + 2^-9 is 16,
# as in XLA (17.002 is 17 in f16, a tie that rounds to even), where rounding once gives 18.
ROUNDS_THROUGH_F16 = frozenset(["f4e2m1fn", "f8e3m4", "f8e4m3", "f8e4m3fn", "f8e4m3b11fnuz", "f8e4m3fnuz", "f8e5m2",
                                "f8e5m2fnuz"])
# Opcodes that compute on their operands' values; every other opcode moves values as they are.
COMPUTING = frozenset([
    *(opcode for opcode in FUNCTIONS if opcode != "convert"),
    "dot", "convolution", "reduce", "reduce-window", "map", "select-and-scatter", "scatter", "reduce-precision",
    "cholesky", "triangular-solve", "fft", "batch-norm-inference", "batch-norm-training", "batch-norm-grad",
])
# Functions of the bits whose result depends on the width, so s8 cannot stand for s4: (opcode, signed types only).
WIDTH_DEPENDENT = {"shift-right-logical": True, "popcnt": True, "count-leading-zeros": False, "clz": False}
_CALLED_FOR_VALUES = ("to_apply", "select", "scatter")
_ACCUMULATE_IN_THEIR_TYPE = ("reduce", "reduce-window")


def widen_extended_types(module: HloModule) -> HloModule:
    """``module`` with every computation on bf16/f8/f4/sub-byte values done in f32, s8 or u8."""
    if not any(_narrow(i.shape) for c in module.computations.values() for i in c.instructions):
        return module
    widening = _Widening(module)
    for name in list(module.computations):
        widening.computations[name] = widening.convert_around(module.computations[name])
    return replace(module, computations=widening.computations)


def _narrow(shape: Shape) -> bool:
    return any(leaf.element_type in COMPUTE_TYPE for leaf in shape.leaves())


def _wide(shape: Shape) -> Shape:
    if shape.is_tuple:
        return TupleShape(tuple(_wide(element) for element in shape.elements))
    return ArrayShape(COMPUTE_TYPE.get(shape.element_type, shape.element_type), shape.dims, shape.dynamic)


class _Widening:
    def __init__(self, module: HloModule):
        self.module = module
        self.computations = dict(module.computations)
        self.wide_copies: dict[str, str] = {}  # computation -> its all-wide copy
        self.narrow_copies: dict[str, str] = {}  # one-op reducer -> its copy left in its narrow type

    def convert_around(self, computation: HloComputation) -> HloComputation:
        """Each computing instruction on narrow values gets converted operands and a converted result."""
        emitted: list[HloInstruction] = []
        converted: dict[str, str] = {}  # narrow operand -> its widened copy
        for instruction in computation.instructions:
            operand_shapes = [computation.by_name[o].shape for o in instruction.operands]
            if instruction.opcode not in COMPUTING or not any(map(_narrow, [instruction.shape, *operand_shapes])):
                emitted.append(instruction)
                continue
            self._check_width(instruction, operand_shapes)
            if instruction.opcode in _ACCUMULATE_IN_THEIR_TYPE and _narrow_floats_only(operand_shapes):
                reducer = instruction.attributes.get("to_apply")
                if isinstance(reducer, str) and reducer in self.module.computations:
                    attributes = {**instruction.attributes, "to_apply": self.step_reducer(reducer)}
                    emitted.append(replace(instruction, attributes=attributes))
                    continue
            operands = []
            for operand, shape in zip(instruction.operands, operand_shapes):
                if _narrow(shape) and operand not in converted:
                    converted[operand] = self._fresh(computation, f"{operand}.{_wide(shape)}".split("[")[0])
                    emitted.append(_convert(converted[operand], operand, _wide(shape), instruction, computation.name))
                operands.append(converted.get(operand, operand))
            attributes = dict(instruction.attributes)
            for key in _CALLED_FOR_VALUES:
                if isinstance(attributes.get(key), str):
                    attributes[key] = self.wide_copy(attributes[key])
            widened = replace(instruction, operands=operands, attributes=attributes)
            emitted += self._round_result(computation, widened)
        return _rebuilt(computation, computation.name, emitted)

    def _round_result(self, computation: HloComputation, instruction: HloInstruction) -> list[HloInstruction]:
        """The instruction computing in the wide type, then its result converted back under its own name."""
        if not _narrow(instruction.shape):
            return [instruction]
        wide_name = self._fresh(computation, f"{instruction.name}.wide")
        wide = replace(instruction, name=wide_name, shape=_wide(instruction.shape), is_root=False)
        if not instruction.shape.is_tuple:
            rounding = self._rounded(computation, instruction.name, wide_name, instruction.shape, instruction)
            return [wide, *rounding[:-1], replace(rounding[-1], is_root=instruction.is_root)]
        emitted, parts = [wide], []
        for index, element in enumerate(instruction.shape.elements):
            part = self._fresh(computation, f"{wide_name}.{index}")
            emitted.append(replace(instruction, name=part, opcode="get-tuple-element", shape=_wide(element),
                                   operands=[wide_name], attributes={"index": index}, is_root=False))
            parts.append(self._fresh(computation, f"{part}.rounded"))
            emitted += self._rounded(computation, parts[-1], part, element, instruction)
        emitted.append(replace(instruction, opcode="tuple", operands=parts, attributes={}))
        return emitted

    def _rounded(self, computation: HloComputation, name: str, wide_name: str, shape: Shape,
                 at: HloInstruction) -> list[HloInstruction]:
        """Converts of the wide value ``wide_name`` back to ``shape`` named ``name``: through f16 for the
        types XLA computes in f16 (ROUNDS_THROUGH_F16), else at once."""
        if shape.is_tuple or shape.element_type not in ROUNDS_THROUGH_F16:
            return [_convert(name, wide_name, shape, at, computation.name)]
        half = self._fresh(computation, f"{wide_name}.f16")
        return [_convert(half, wide_name, ArrayShape("f16", shape.dims, shape.dynamic), at, computation.name),
                _convert(name, half, shape, at, computation.name)]

    def step_reducer(self, name: str) -> str:
        """The reducer a narrow-float reduction calls for each step, as XLA's float normalization leaves it.

        Every computation is normalized instruction by instruction (``convert_around``), and so is
        this one; but a named one-op reducer (add, maximum ...) on a type that XLA computes in f32
        (bf16) stays one op in its type, which the backend computes in f32 and rounds once, as the
        normalized op does, and runs as a named reduction.
        """
        original = self.module.computations[name]
        leaves = [leaf for _, shape in original.parameter_shapes or [] for leaf in shape.leaves()] or \
            original.root.shape.leaves()
        if binary_root_opcode(original) not in REDUCER_NAMES or \
                any(leaf.element_type in ROUNDS_THROUGH_F16 for leaf in leaves):
            return name
        if name not in self.narrow_copies:
            copy_name = f"{name}.narrow"
            while copy_name in self.computations:
                copy_name += "_"
            self.narrow_copies[name] = copy_name
            self.computations[copy_name] = _rebuilt(original, copy_name, [
                replace(i, computation=copy_name) for i in original.instructions])
        return self.narrow_copies[name]

    def wide_copy(self, name: str) -> str:
        """A copy of computation ``name`` in which every value is wide (a reducer that accumulates in f32)."""
        if name in self.wide_copies:
            return self.wide_copies[name]
        copy_name = f"{name}.wide"
        while copy_name in self.computations:
            copy_name += "_"
        self.wide_copies[name] = copy_name
        original = self.module.computations[name]
        emitted: list[HloInstruction] = []
        for instruction in original.instructions:
            attributes = {key: self.wide_copy(value) if key in CALLED_ATTRIBUTES and isinstance(value, str)
                          else value for key, value in instruction.attributes.items()}
            if instruction.opcode == "constant" and _narrow(instruction.shape):  # its literal rounds to its type
                narrow_name = self._fresh(original, f"{instruction.name}.narrow")
                emitted.append(replace(instruction, name=narrow_name, is_root=False, computation=copy_name))
                emitted.append(replace(_convert(instruction.name, narrow_name, _wide(instruction.shape), instruction,
                                                copy_name), is_root=instruction.is_root))
                continue
            emitted.append(replace(instruction, shape=_wide(instruction.shape), attributes=attributes,
                                   computation=copy_name))
        copy = _rebuilt(original, copy_name, emitted)
        copy.parameter_shapes = [(p, _wide(s)) for p, s in original.parameter_shapes or []] or None
        copy.result_shape = _wide(original.result_shape) if original.result_shape is not None else None
        self.computations[copy_name] = copy
        return copy_name

    def _check_width(self, instruction: HloInstruction, operand_shapes: list[Shape]) -> None:
        signed_only = WIDTH_DEPENDENT.get(instruction.opcode)
        if signed_only is None:
            return
        for shape in operand_shapes:
            for leaf in shape.leaves():
                if COMPUTE_TYPE.get(leaf.element_type, "f").startswith(("s",) if signed_only else ("s", "u")):
                    raise UnsupportedOperatorError(
                        f"{self.module.where(instruction)}: {instruction.opcode} '{instruction.name}' on "
                        f"{leaf.element_type}: kuiper computes sub-byte integers in 8 bits, where this function "
                        "of the bits differs; not supported")

    @staticmethod
    def _fresh(computation: HloComputation, name: str) -> str:
        while name in computation.by_name:
            name += "_"
        return name


def _narrow_floats_only(shapes: list[Shape]) -> bool:
    """Some value is a narrow float (bf16, f8 ...), and none a sub-byte integer (those still widen)."""
    leaves = [leaf for shape in shapes for leaf in shape.leaves()]
    return any(COMPUTE_TYPE.get(leaf.element_type) == "f32" for leaf in leaves) and \
        not any(COMPUTE_TYPE.get(leaf.element_type, "f32") != "f32" for leaf in leaves)


def _convert(name: str, operand: str, shape: Shape, at: HloInstruction, computation: str) -> HloInstruction:
    return HloInstruction(name, "convert", shape, [operand], position=at.position, computation=computation)


def _rebuilt(original: HloComputation, name: str, instructions: list[HloInstruction]) -> HloComputation:
    return HloComputation(name, instructions, original.is_entry and name == original.name, original.parameter_shapes,
                          original.result_shape, original.position)
