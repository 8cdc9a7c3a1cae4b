"""HLO elementwise instructions as tensor-IR math, where the IR's semantics are XLA's.

An instruction given IR math here runs as the IR compiled by the backend, and the
graph's fusion pass can merge chains of them into one kernel.  Everything else (integer
divide and remainder, shifts, float -> int conversion, total-order compares, uint16+
types the IR does not have) returns None and runs the XLA-exact code in ops_elementwise.
"""

from __future__ import annotations

from ..ir import composites, make
from ..ir.dtypes import TENSOR_DTYPES
from ..ops.elementwise import ElementwiseMath
from .module import HloInstruction, HloModule

FLOATS = ("f16", "f32", "f64")


def _call(name: str):
    return lambda x, *rest: make.call(name, x, *rest)


# opcode -> (IR builder, the result element types it holds for)
FLOAT_UNARY = {
    "exponential": _call("exp"),
    "exponential-minus-one": _call("expm1"),
    "log": _call("log"),
    "log-plus-one": _call("log1p"),
    "sqrt": _call("sqrt"),
    "rsqrt": lambda x: make.div(1, make.call("sqrt", x)),
    "sine": _call("sin"),
    "cosine": _call("cos"),
    "tan": _call("tan"),
    "tanh": _call("tanh"),
    "logistic": composites.sigmoid,
    "erf": _call("erf"),
    "floor": _call("floor"),
    "ceil": _call("ceil"),
    "round-nearest-even": _call("round"),
    "abs": _call("abs"),
}
FLOAT_BINARY = {
    "divide": make.div,
    "power": make.pow,
    "remainder": make.fmod,  # C's fmod: the sign of the dividend, as XLA
    "atan2": _call("atan2"),
}
NUMERIC = {  # integers wrap around in both
    "negate": make.neg,
    "subtract": make.sub,
}
ANY_TYPE = {  # pred too: add is or, multiply is and
    "add": make.add,
    "multiply": make.mul,
    "maximum": make.maximum,
    "minimum": make.minimum,
}
BITWISE = {
    "and": lambda a, b: make.bitwise("and", a, b),
    "or": lambda a, b: make.bitwise("or", a, b),
    "xor": lambda a, b: make.bitwise("xor", a, b),
}
DIRECTIONS = {"EQ": "eq", "NE": "ne", "LT": "lt", "LE": "le", "GT": "gt", "GE": "ge"}


def _operand_type(module: HloModule, instruction: HloInstruction, index: int) -> str:
    shape = module.computations[instruction.computation].by_name[instruction.operands[index]].shape
    return "" if shape.is_tuple else shape.element_type


def ir_math(module: HloModule | None, instruction: HloInstruction | None) -> ElementwiseMath | None:
    """The instruction's math as IR, or None when only XLA-exact code gives XLA's result."""
    if module is None or instruction is None or instruction.shape.is_tuple:
        return None
    opcode = instruction.opcode
    result = instruction.shape.element_type
    types = {result, *(_operand_type(module, instruction, i) for i in range(len(instruction.operands)))}
    if any(t == "" or _numpy(t) not in TENSOR_DTYPES for t in types):
        return None
    arity = len(instruction.operands)
    build = None
    if opcode in FLOAT_UNARY and result in FLOATS and arity == 1:
        build = FLOAT_UNARY[opcode]
    elif opcode in FLOAT_BINARY and result in FLOATS and arity == 2:
        build = FLOAT_BINARY[opcode]
    elif opcode in NUMERIC and result != "pred":
        build = NUMERIC[opcode]
    elif opcode in ANY_TYPE and arity == 2:
        build = ANY_TYPE[opcode]
    elif opcode in BITWISE and result not in FLOATS and arity == 2:
        build = BITWISE[opcode]
    elif opcode == "not" and result == "pred":
        build = make.logical_not
    elif opcode == "select" and arity == 3:
        build = make.select
    elif opcode == "clamp" and arity == 3:
        build = _clamp
    elif opcode == "compare" and arity == 2:
        build = _compare_builder(instruction, _operand_type(module, instruction, 0))
    elif opcode == "convert" and arity == 1:
        build = _convert_builder(_operand_type(module, instruction, 0), result)
    if build is None or len(instruction.operands) != arity:
        return None
    return ElementwiseMath(build, arity)


def _numpy(element_type: str) -> str:
    from .shapes import ELEMENT_TYPES

    return ELEMENT_TYPES.get(element_type) or ""


def _clamp(low, x, high):
    return make.minimum(make.maximum(x, low), high)


def _compare_builder(instruction: HloInstruction, operand: str):
    direction = DIRECTIONS.get(instruction.attributes.get("direction"))
    kind = instruction.attributes.get("type", "")
    natural = {"": True, "FLOAT": operand in FLOATS, "SIGNED": operand[0] == "s", "UNSIGNED": operand[0] in "up"}
    if direction is None or not natural.get(kind, False):
        return None  # TOTALORDER, or an unsigned view of signed bits: XLA-exact code

    def build(a, b):
        return make.compare(direction, a, b)

    return build


def _convert_builder(source: str, target: str):
    if target == "pred":
        return lambda x: make.ne(x, 0)
    if source in FLOATS and target not in FLOATS:
        return None  # saturating, NaN -> 0: XLA-exact code
    numpy_target = _numpy(target)
    return lambda x: make.cast(x, numpy_target)
