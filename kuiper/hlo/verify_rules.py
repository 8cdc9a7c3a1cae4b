"""Per-instruction rules of XLA's parser and verifier: opcodes, operand counts and shapes, attributes.

``instruction_problem`` returns what is wrong with one instruction (a sentence), or None.  Each
rule is one that XLA enforces when it parses or verifies a module; kuiper is never stricter.
"""

from __future__ import annotations

import math
import re

from .literals import literal_problem
from .module import HloComputation, HloInstruction, Quoted
from .shapes import ArrayShape, Shape
from .windows import dim_labels_problem

# Every opcode XLA's HLO text may name (kuiper parses them all; translators say which run).
XLA_OPCODES = frozenset("""
abs add add-dependency after-all all-gather all-gather-done all-gather-start all-reduce all-reduce-done
all-reduce-start all-to-all and async-done async-start async-update atan2 batch-norm-grad batch-norm-inference
batch-norm-training bitcast bitcast-convert broadcast call cbrt ceil cholesky clamp count-leading-zeros
collective-broadcast collective-permute collective-permute-done collective-permute-start compare complex
concatenate conditional constant convert convolution copy copy-done copy-start cosine custom-call divide domain
dot dynamic-reshape dynamic-slice dynamic-update-slice erf exponential exponential-minus-one fft floor fusion
gather get-dimension-size get-tuple-element imag infeed iota is-finite log log-plus-one logistic map maximum
minimum multiply negate not opt-barrier or outfeed pad parameter partition-id popcnt power ragged-all-to-all
ragged-dot real recv recv-done reduce reduce-precision reduce-scatter reduce-window remainder replica-id reshape
reverse rng rng-bit-generator rng-get-and-update-state round-nearest-afz round-nearest-even rsqrt scatter select
select-and-scatter send send-done set-dimension-size shift-left shift-right-arithmetic shift-right-logical sign
sine slice sort sqrt stochastic-convert subtract tan tanh topk transpose triangular-solve tuple while xor
cos sin clz optimization-barrier acos acosh asin asinh atanh cosh sinh scan scaled-dot
""".split())

# Opcodes whose operands and result share their dims (XLA has no implicit broadcasting).
ELEMENTWISE_UNARY = frozenset(
    ["abs", "cbrt", "ceil", "cos", "cosine", "erf", "exponential", "exponential-minus-one", "floor", "imag",
     "is-finite", "log", "log-plus-one", "logistic", "negate", "not", "popcnt", "real", "round-nearest-afz",
     "round-nearest-even", "rsqrt", "sign", "sin", "sine", "sqrt", "tan", "tanh", "count-leading-zeros", "clz",
     "convert", "copy", "reduce-precision", "acos", "acosh", "asin", "asinh", "atanh", "cosh", "sinh"]
)
ELEMENTWISE_BINARY = frozenset(
    ["add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "power", "atan2", "and", "or",
     "xor", "shift-left", "shift-right-arithmetic", "shift-right-logical", "compare", "complex"]
)
# Opcodes with a fixed operand count (beyond the elementwise ones).
OPERAND_COUNTS = {"rng-bit-generator": 1, "scaled-dot": 4, "select": 3, "clamp": 3, "get-tuple-element": 1, "bitcast-convert": 1,
                  "reshape": 1, "transpose": 1, "broadcast": 1, "pad": 2}
MINIMUM_OPERANDS = {"dynamic-reshape": 1, "concatenate": 1, "conditional": 1}
API_VERSIONS = ("API_VERSION_ORIGINAL", "API_VERSION_STATUS_RETURNING", "API_VERSION_STATUS_RETURNING_UNIFIED",
                "API_VERSION_TYPED_FFI")
ACCURACY_MODES = ("default", "highest")
# Opcodes that take a result_accuracy (XLA's unary transcendental functions).
WITH_RESULT_ACCURACY = frozenset(
    ["acos", "acosh", "asin", "asinh", "atanh", "exponential-minus-one", "log", "log-plus-one", "logistic", "sqrt",
     "cbrt", "rsqrt", "tanh", "erf", "sine", "sin", "sinh", "cosine", "cos", "cosh", "tan", "exponential"])
# Ops with async forms of their own (all-reduce-start ...): XLA's parser wraps none of them in a
# sugared async chain, so ``all-reduce-update`` or ``copy-update`` is no opcode.
_NOT_ASYNC_WRAPPED = frozenset(["all-gather", "all-reduce", "collective-permute", "copy", "recv", "send"])
_PADDING = re.compile(r"-?[0-9]+_-?[0-9]+(?:_[0-9]+)?(?:x-?[0-9]+_-?[0-9]+(?:_[0-9]+)?)*")
_WINDOW_PAD = re.compile(r"-?[0-9]+_-?[0-9]+(?:x-?[0-9]+_-?[0-9]+)*")
# Module attributes: ``input_output_alias={ {0}: (0, {}, may-alias), ... }``, ``buffer_donor={ (0, {1}), ... }``.
_INDEX = r"\{\s*(?:[0-9]+\s*(?:,\s*[0-9]+\s*)*)?\}"
_ALIAS = rf"{_INDEX}\s*:\s*\(\s*[0-9]+\s*,\s*{_INDEX}\s*(?:,\s*(?:may-alias|must-alias)\s*)?\)"
_DONOR = rf"\(\s*[0-9]+\s*,\s*{_INDEX}\s*\)"
_MODULE_ATTRIBUTE_SYNTAX = {
    "input_output_alias": (re.compile(rf"\{{\s*(?:{_ALIAS}\s*(?:,\s*{_ALIAS}\s*)*)?\}}\s*"),
                           "{ {output index}: (parameter number, {parameter index}[, may-alias|must-alias]), ... }"),
    "buffer_donor": (re.compile(rf"\{{\s*(?:{_DONOR}\s*(?:,\s*{_DONOR}\s*)*)?\}}\s*"),
                     "{ (parameter number, {parameter index}), ... }"),
}
_BIT_WIDTHS = {"pred": 8, "s1": 1, "u1": 1, "s2": 2, "u2": 2, "s4": 4, "u4": 4, "f4e2m1fn": 4}


def module_attribute_problem(key: str, text: str) -> str | None:
    """What is wrong with the text of a module attribute whose syntax XLA fixes, or None."""
    syntax = _MODULE_ATTRIBUTE_SYNTAX.get(key)
    if syntax is None or syntax[0].fullmatch(text):
        return None
    return f"{key} must be written {syntax[1]}"


def instruction_problem(instruction: HloInstruction, computation: HloComputation) -> str | None:
    opcode = instruction.opcode
    base = re.sub(r"-(start|update|done)$", "", opcode)  # ``custom-call-start``: the async form of an op
    if opcode not in XLA_OPCODES and (base not in XLA_OPCODES or base in _NOT_ASYNC_WRAPPED):
        return f"unknown opcode '{opcode}'"
    operands = [computation.by_name[name].shape for name in instruction.operands]
    count = OPERAND_COUNTS.get(opcode, 1 if opcode in ELEMENTWISE_UNARY else 2 if opcode in ELEMENTWISE_BINARY else None)
    if count is not None and len(operands) != count:
        return f"takes {count} operand(s), found {len(operands)}"
    if len(operands) < MINIMUM_OPERANDS.get(opcode, 0):
        return f"takes at least {MINIMUM_OPERANDS[opcode]} operand(s), found {len(operands)}"
    if opcode == "constant":
        return literal_problem(instruction)
    for check in (_shape_problem, _attribute_problem):
        problem = check(instruction, operands, computation)
        if problem:
            return problem
    return None


def _shape_problem(instruction: HloInstruction, operands: list[Shape], computation: HloComputation) -> str | None:
    shape = instruction.shape
    opcode = instruction.opcode
    if opcode in ELEMENTWISE_UNARY or opcode in ELEMENTWISE_BINARY:
        for operand in operands:
            if not shape.same_dims(operand):
                return f"operand shape {operand} does not match the result shape {shape}"
        if opcode == "compare" and shape.element_type != "pred":
            return f"compare must give pred, the result says {shape.element_type}"
    elif opcode == "bitcast-convert":
        return _bitcast_convert_problem(operands[0], shape)
    elif opcode == "get-tuple-element":
        if not operands[0].is_tuple:
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
        if not all(shape.same_dims(o) for o in operands[1:]):
            return "the two branches must have the result's shape"
    elif opcode == "concatenate":
        return _concatenate_problem(instruction, operands)
    elif opcode == "conditional":
        return _conditional_problem(instruction, operands)
    elif opcode in ("recv", "infeed"):
        if not shape.is_tuple or not shape.elements:
            return f"{opcode} must have a non-empty tuple shape (its data, then a token), found {shape}"
    elif opcode == "dynamic-reshape":
        if not shape.is_tuple and len(operands) - 1 != shape.rank:
            return f"expects one dim size operand per result dimension; the result {shape} has {shape.rank}, " \
                   f"found {len(operands) - 1}"
        if not shape.is_tuple and not operands[0].is_tuple and -1 not in shape.dims + operands[0].dims \
                and shape.size() != operands[0].size():
            return f"expects the same number of elements in result shape {shape} ({shape.size()}) as in the " \
                   f"operand {operands[0]} ({operands[0].size()}), counting bounded dims at their bound"
    elif opcode.startswith("async-") or opcode not in XLA_OPCODES:  # the rest: sugared async forms
        return _async_problem(instruction, operands, computation)
    return None


def _bitcast_convert_problem(operand: Shape, shape: Shape) -> str | None:
    """Same bit width: same dims.  Wider to narrower adds a minor dim of the ratio; the reverse drops it."""
    if operand.is_tuple or shape.is_tuple:
        return "takes and gives arrays, not tuples"
    source, target = _bits(operand.element_type), _bits(shape.element_type)
    if source == target:
        expected = operand.dims
    elif source > target:
        expected = (*operand.dims, source // target)
    else:
        expected = operand.dims[:-1] if operand.dims and operand.dims[-1] == target // source else None
    if expected != shape.dims:
        return (f"cannot reinterpret {operand} ({source}-bit elements) as {shape} ({target}-bit elements): "
                "the minor dimension must hold the width ratio")
    return None


def _bits(element_type: str) -> int:
    if element_type in _BIT_WIDTHS:
        return _BIT_WIDTHS[element_type]
    digits = re.search(r"[0-9]+", element_type)
    width = int(digits.group()) if digits else 0
    return 8 if element_type.startswith("f8") else width


def _concatenate_problem(instruction: HloInstruction, operands: list[Shape]) -> str | None:
    dimension = instruction.attributes.get("dimensions")
    dimension = dimension[0] if isinstance(dimension, list) and len(dimension) == 1 else dimension
    shape = instruction.shape
    if any(o.is_tuple for o in operands) or shape.is_tuple:
        return "takes and gives arrays, not tuples"
    if not isinstance(dimension, int) or not 0 <= dimension < shape.rank:
        return f"dimensions={{{dimension}}} is not one dimension of the result {shape}"
    for operand in operands:
        if operand.rank != shape.rank or any(
                a != b for axis, (a, b) in enumerate(zip(operand.dims, shape.dims)) if axis != dimension):
            return f"operand {operand} differs from the result {shape} outside dimension {dimension}"
    if -1 not in shape.dims and sum(o.dims[dimension] for o in operands) != shape.dims[dimension]:
        return f"the operands' dimension {dimension} adds up to {sum(o.dims[dimension] for o in operands)}, " \
               f"the result {shape} says {shape.dims[dimension]}"
    return None


def _conditional_problem(instruction: HloInstruction, operands: list[Shape]) -> str | None:
    selector = operands[0]
    if selector.is_tuple or selector.rank != 0:
        return f"the first operand must be a scalar, found {selector}"
    branches = instruction.attributes.get("branch_computations")
    if branches is not None:
        if selector.element_type != "s32":
            return f"with branch_computations the first operand must be s32, found {selector}"
        count = len(branches) if isinstance(branches, list) else 1
        if count != len(operands) - 1:
            return f"{count} branch computation(s) but {len(operands) - 1} branch operand(s)"
    elif selector.element_type not in ("pred", "s32"):
        return f"the first operand must be a scalar of PRED or S32, found {selector}"
    return None


def _async_problem(instruction: HloInstruction, operands: list[Shape], computation: HloComputation) -> str | None:
    """``async-start`` gives ((operands), outputs, state...); an update may bind more operands; done gives the outputs.

    As XLA's verifier: an ``async-update`` takes the chain's state first and then the operands it
    binds, and its shape extends its state's (the bound operands and the outputs each a prefix of
    its own); the state reaches an update or a done through tuples, get-tuple-elements, copies and
    barriers (``_async_producer``). The sugared forms (``custom-call-start``/``-update``/``-done``)
    follow the same rules and must name the same wrapped opcode all along the chain.
    """
    opcode = instruction.opcode
    shape = instruction.shape
    stage = opcode.rsplit("-", 1)[1]
    if stage in ("start", "update"):
        if not shape.is_tuple or len(shape.elements) < 2 or not shape.elements[0].is_tuple:
            return f"the shape must be ((async operands), async outputs, state...), found {shape}"
    if stage == "start":
        written = shape.elements[0].elements
        if len(written) != len(operands) or not all(a.same_dims(b) for a, b in zip(written, operands)):
            return f"the shape's operand part {shape.elements[0]} does not match the operands"
        return None
    if not operands or stage == "done" and len(operands) != 1:
        return f"takes {'one operand' if stage == 'done' else 'the async state first'} (the async-start or " \
               f"async-update), found {len(operands)} operands"
    state = operands[0]
    if not state.is_tuple or len(state.elements) < 2 or not state.elements[0].is_tuple:
        return f"its first operand must be an async state ((operands), outputs, state...), found {state}"
    if stage == "update":
        problem = _async_update_shape_problem(state, shape, operands[1:])
        if problem:
            return problem
    elif not state.elements[1].same_dims(shape):
        return f"gives {shape}, its async-start's outputs are {state.elements[1]}"
    producer = _async_producer(instruction, computation)
    if producer is None:
        return None  # the state comes through a parameter or a while: XLA follows it across computations
    if producer.opcode == "parameter":  # of the entry: no caller hands it an async state
        return f"its operand '{instruction.operands[0]}' comes from parameter '{producer.name}' of the entry " \
               f"computation, not from an async-start or -update"
    wrapped = opcode.rsplit("-", 1)[0]
    if producer.opcode not in (f"{wrapped}-start", f"{wrapped}-update", "async-start", "async-update") or \
            wrapped != "async" and not producer.opcode.startswith(wrapped + "-"):
        return f"its operand '{instruction.operands[0]}' comes from {producer.opcode} '{producer.name}', not the " \
               f"{wrapped}-start or -update of its chain"
    start = producer
    for _ in range(len(computation.instructions)):  # bounded: a chain of updates that loops ends too
        if not (start.opcode.endswith("-update") and start.operands):
            break
        start = _async_producer(start, computation)
        if start is None:
            return None
    called, expected = instruction.attributes.get("calls"), start.attributes.get("calls")
    if called is not None and expected is not None and called != expected:
        return f"expected async_wrapped_computation to be {expected} (its async-start's), but got {called}"
    thread = instruction.attributes.get("async_execution_thread")  # unwritten: the start's
    if thread is not None and thread != start.attributes.get("async_execution_thread", "main"):
        return f"expected async_execution_thread to be {start.attributes.get('async_execution_thread', 'main')} " \
               f"(its async-start's), but got {thread}"
    return None


def _async_update_shape_problem(state: Shape, shape: Shape, bound: list[Shape]) -> str | None:
    """An update's shape: its state's bound operands then those it binds, its outputs extended, any context."""
    before, after = state.elements[0].elements, shape.elements[0].elements
    if len(after) < len(before) or not all(a.same_dims(b) for a, b in zip(before, after)):
        return f"the state's operands {state.elements[0]} must begin the update's {shape.elements[0]}"
    if not _is_prefix(state.elements[1], shape.elements[1]):
        return f"the state's outputs {state.elements[1]} must begin the update's {shape.elements[1]}"
    if len(bound) != len(after) - len(before):
        return f"binds {len(bound)} new operand(s), but its shape adds {len(after) - len(before)}: {shape.elements[0]}"
    for number, (operand, written) in enumerate(zip(bound, after[len(before):]), start=1):
        if not written.same_dims(operand):
            return f"operand {number} is {operand}, its shape binds {written}"
    return None


def _is_prefix(first: Shape, second: Shape) -> bool:
    """XLA's ShapeUtil::IsPrefix: tuple elements a prefix of the other's, arrays equal."""
    if first.is_tuple and second.is_tuple:
        return len(first.elements) <= len(second.elements) and all(
            _is_prefix(a, b) for a, b in zip(first.elements, second.elements))
    return first.same_dims(second)


# Instructions an async state passes through unchanged on its way from a start to an update or done.
_ASYNC_PASSTHROUGH = ("copy", "opt-barrier", "optimization-barrier")


def _async_producer(instruction: HloInstruction, computation: HloComputation) -> HloInstruction | None:
    """Where the async state of ``instruction``'s first operand is made, as XLA's FindAsyncProducer
    traces it within the computation: back through get-tuple-elements of tuples, copies and
    barriers. None when it comes through a parameter or a while (XLA follows those into other
    computations; kuiper leaves those chains unchecked) or from no instruction of the computation;
    an entry parameter itself, which no caller can have given an async state."""
    path: list[int] = []  # tuple indices still to take, innermost last
    current = computation.by_name.get(instruction.operands[0])
    for _ in range(len(computation.instructions) + 1):  # a chain visits each instruction once at most
        if current is None or current.opcode == "while" or current.opcode == "parameter" and not computation.is_entry:
            return None
        if current.opcode == "parameter":
            return current if not path else None
        if current.opcode == "get-tuple-element" and current.operands:
            index = current.attributes.get("index")
            if not isinstance(index, int):
                return None
            path.append(index)
            current = computation.by_name.get(current.operands[0])
        elif current.opcode == "tuple" and path:
            index = path.pop()
            current = computation.by_name.get(current.operands[index]) if 0 <= index < len(current.operands) else None
        elif current.opcode in _ASYNC_PASSTHROUGH and current.operands:
            current = computation.by_name.get(current.operands[0])
        else:
            return current if not path else None
    return None


def _attribute_problem(instruction: HloInstruction, operands: list[Shape], computation: HloComputation) -> str | None:
    attributes = instruction.attributes
    opcode = instruction.opcode
    for name in attributes.get("control-predecessors", []) or []:
        if not isinstance(name, str) or name not in computation.by_name:
            return f"control-predecessors names '{name}', which computation '{computation.name}' does not define"
    padding = attributes.get("padding")
    if opcode == "pad" and not (isinstance(padding, str) and _PADDING.fullmatch(padding)
                                or padding is not None and not operands[0].is_tuple and operands[0].rank == 0
                                and padding == []):
        return f"padding={padding!r} is not a pad config such as 0_0x1_1 (low_high[_interior] per dimension)"
    if opcode == "pad" and isinstance(padding, str) and len(padding.split("x")) != operands[0].rank:
        return f"padding={padding} has {len(padding.split('x'))} dimension(s), the operand {operands[0]} has " \
               f"{operands[0].rank}"
    window = attributes.get("window")
    if isinstance(window, dict) and "pad" in window and not _WINDOW_PAD.fullmatch(str(window["pad"])):
        return f"window pad={window['pad']} must give low_high per dimension, such as 1_1x0_0"
    labels = attributes.get("dim_labels")
    if opcode == "convolution" and labels is not None:
        problem = dim_labels_problem(labels) if isinstance(labels, str) else f"dim_labels={labels!r} is not a word"
        if problem or not operands[0].is_tuple and len(labels.split("_")[0]) != operands[0].rank:
            return problem or f"dim_labels={labels} do not fit the input {operands[0]}"
    if opcode in ("all-gather", "reduce-scatter", "all-gather-start") and attributes.get("dimensions") == []:
        return "dimensions={} is empty: it must name the dimension to gather or scatter"
    if "result_accuracy" in attributes and opcode not in WITH_RESULT_ACCURACY:
        return f"{opcode} takes no result_accuracy: only unary transcendental functions (exponential, log, " \
               f"tanh, sine ...) do"
    if opcode == "broadcast" and "dimensions" not in attributes and not operands[0].is_tuple and operands[0].rank:
        return f"a broadcast of {operands[0]} needs dimensions={{...}}: only a scalar's may be left out"
    if isinstance(window, dict) and "rhs_reversal" in window:
        sizes, reversal = str(window.get("size", "")).split("x"), str(window["rhs_reversal"]).split("x")
        if len(reversal) != len(sizes):
            return f"window rhs_reversal={window['rhs_reversal']} has {len(reversal)} value(s), the window " \
                   f"size={window.get('size')} {len(sizes)} dimension(s)"
    for key in ("replica_groups", "sharding"):
        problem = _device_list_problem(key, attributes.get(key))
        if problem:
            return problem
    if "result_accuracy" in attributes and not _is_result_accuracy(attributes["result_accuracy"]):
        return (f"result_accuracy={attributes['result_accuracy']!r} is neither {{mode=default|highest}} nor "
                "{tolerance={atol=..,rtol=..,ulps=..}}")
    if opcode == "custom-call":
        return _custom_call_problem(instruction, operands)
    return None


def _device_list_problem(key: str, value) -> str | None:
    """An iota device list ``[2,2]<=[4]`` or a sharding's ``devices=[2,2]0,1,2,3`` must fill its tile."""
    devices = value.get("devices") if key == "sharding" and isinstance(value, dict) else value
    if isinstance(devices, tuple) and len(devices) == 2 and all(_ints(part) for part in devices):
        tile, iota = devices
        if math.prod(tile) != math.prod(iota):
            return f"{key}: the iota device list {list(iota)} holds {math.prod(iota)} devices, which does not match " \
                   f"the tile assignment dimensions {list(tile)} ({math.prod(tile)} devices)"
    if key == "sharding" and isinstance(value, dict) and _ints(devices):
        listed = [item for item in value.get("_items", []) if isinstance(item, int)]
        if listed and len(listed) != math.prod(devices):
            return f"sharding lists {len(listed)} devices, which does not match the tile assignment size " \
                   f"{math.prod(devices)} of devices={devices}"
    return None


def _ints(value) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, int) and not isinstance(v, bool)
                                                           for v in value)


def _is_result_accuracy(value) -> bool:
    if not isinstance(value, dict) or len(value) != 1:
        return False
    (key, setting), = value.items()
    if key == "mode":
        return str(setting).lower() in ACCURACY_MODES
    if key == "tolerance":
        return isinstance(setting, dict) and set(setting) <= {"atol", "rtol", "ulps"} and all(
            isinstance(v, (int, float)) for v in setting.values())
    return False


def _custom_call_problem(instruction: HloInstruction, operands: list[Shape]) -> str | None:
    attributes = instruction.attributes
    version = attributes.get("api_version")
    if version is not None and version not in API_VERSIONS:
        return f"api_version={version} is not one of {', '.join(API_VERSIONS)}"
    constraints = attributes.get("operand_layout_constraints")
    if constraints is None:
        return None
    if not isinstance(constraints, list) or len(constraints) != len(operands):
        given = len(constraints) if isinstance(constraints, list) else 1
        return f"expected {len(operands)} operand layout constraint(s), {given} given"
    for number, (constraint, operand) in enumerate(zip(constraints, operands)):
        if isinstance(constraint, list):
            continue  # a tuple operand's constraint, read as a list of shapes
        if isinstance(constraint, Quoted) or not hasattr(constraint, "same_dims") or not constraint.same_dims(operand):
            return f"operand {number} ({operand}) is not compatible with its layout constraint {constraint}"
    return None
