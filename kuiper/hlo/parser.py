"""Parser for HLO text, both as JAX lowers it and as XLA prints it (and XLA's shorter test forms).

Grammar (the parts kuiper reads; attribute values are read generically by parse_values)::

    module       := ['HloModule' NAME [':'] (',' attribute)*] preamble* computation+
    preamble     := ('FileNames' | 'FunctionNames' | 'FileLocations' | 'StackFrames') (INT value)*
    computation  := ['ENTRY'] NAME [signature] '{' instruction+ '}' (',' attribute)*
    signature    := '(' [NAME ':' shape (',' NAME ':' shape)*] ')' '->' shape
    instruction  := ['ROOT'] NAME '=' [shape] NAME '(' operands ')' (',' attribute)*
    operands     := literal (for constant) | INT (for parameter) | [operand (',' operand)*]
    operand      := [shape] NAME ('#' INT)*                      a named instruction (or its tuple element)
                  | [shape] NAME '(' operands ')'                a nested instruction (no attributes)
    attribute    := NAME '=' value
                  | NAME '=' '{' instruction+ '}'                 a computation written in place (to_apply ...)

Shapes are in parse_shapes, literals and attribute values in parse_values.  Without a header the
module is named after its entry computation: ENTRY, or else the last computation.  An instruction
without a shape gets its operand's shape where that is the rule (elementwise ops), else an error.
Names lose their ``%``.  Positions are kept so later checks can point at the text.
"""

from __future__ import annotations

import gc
from typing import Any

from .infer_shapes import inferred_shape
from .lexer import END, INT, NAME, SourceText, Token
from .module import HloComputation, HloInstruction, HloModule
from .parse_shapes import is_shape_start, parse_shape
from .parse_values import parse_frontend_attributes, parse_literal, parse_value
from .shapes import Shape
from .token_stream import TokenStream
from .verify import verify_module
from .verify_rules import module_attribute_problem

PREAMBLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
# Attributes that name one computation, where XLA's parser also reads a computation written in place.
ONE_COMPUTATION = ("to_apply", "calls", "condition", "body", "true_computation", "false_computation", "select",
                   "scatter", "comparator")


def parse(text: str, source: str = "", verify: bool = True) -> HloModule:
    """Parse HLO text into an HloModule; ``verify`` also checks names, calls and shapes."""
    if not isinstance(text, str):
        raise TypeError(f"kuiper.hlo.parse expects text (str), got {type(text).__name__}")
    # The parser allocates millions of small objects that all stay alive: without this, the
    # cyclic garbage collector rescans the growing heap again and again and parsing turns quadratic.
    collecting = gc.isenabled()
    gc.disable()
    try:
        parser = _Parser(SourceText(text, source))
        module = parser.module()
    finally:
        if collecting:
            gc.enable()
    if verify:
        verify_module(module, parser.source)
    return module


class _Parser:
    def __init__(self, source: SourceText):
        self.source = source
        self.stream = TokenStream(source)
        self.shape_cache: dict[str, Shape] = {}
        self.anonymous = 0  # numbers the names given to nested instructions
        # The computation being parsed: its name, its instructions so far, and those by name.
        self.computation_name = ""
        self.instructions: list[HloInstruction] = []
        self.defined: dict[str, HloInstruction] = {}
        self.computations: dict[str, HloComputation] = {}  # those parsed so far

    def error(self, message: str, token=None):
        return self.stream.error(message, token)

    def shape(self) -> Shape:
        return parse_shape(self.stream, self.shape_cache)

    # -- module ---------------------------------------------------------------------
    def module(self) -> HloModule:
        stream = self.stream
        name = None
        attributes: dict[str, Any] = {}
        if stream.accept_word("HloModule"):
            name = stream.name("the module name")
            stream.accept(":")  # old dumps: ``HloModule name:``
            attributes = self.attribute_list(check_text=module_attribute_problem)
            while stream.token.kind == NAME and stream.token.text in PREAMBLES:
                stream.advance()
                while stream.token.kind == INT:
                    stream.advance()
                    parse_value(stream, self.shape_cache)
        computations = self.computations
        while stream.token.kind != END:
            computation = self.computation(is_first=not computations and name is None)
            if computation.name in computations:
                raise self.source.error(f"computation '{computation.name}' is defined twice", computation.position)
            computations[computation.name] = computation
        if not computations:
            raise self.error("expected 'HloModule' or a computation, found end of text")
        module = HloModule(name or "", computations, attributes, self.source.source, self.source)
        if name is None:
            module.name = f"module_{module.entry.name}"
        return module

    def attribute_list(self, check_text=None) -> dict[str, Any]:
        """``, key=value`` pairs; ``check_text(key, text)`` may name a problem in a value's text."""
        stream = self.stream
        attributes: dict[str, Any] = {}
        while stream.accept(","):
            key = stream.name("an attribute name")
            stream.expect("=", f"'=' after attribute '{key}'")
            start = stream.token
            if key == "frontend_attributes":
                attributes[key] = parse_frontend_attributes(stream, self.shape_cache)
            elif key in ONE_COMPUTATION and stream.token.kind == "{" and "=" in (
                    stream.peek(2).kind, stream.peek(3).kind if stream.peek().text == "ROOT" else ""):
                attributes[key] = self.nested_computation()
            else:
                attributes[key] = parse_value(stream, self.shape_cache)
            problem = check_text and check_text(key, self.source.text[start.position : stream.token.position])
            if problem:
                raise self.error(problem, start)
        return attributes

    # -- computations -------------------------------------------------------------
    def computation(self, is_first: bool) -> HloComputation:
        stream = self.stream
        is_entry = stream.accept_word("ENTRY")
        position = stream.token.position
        what = "a computation name" if is_entry else "'HloModule', 'ENTRY' or a computation name"
        name = stream.name(what)
        parameter_shapes = result_shape = None
        if stream.accept("("):
            parameter_shapes = []
            if not stream.accept(")"):
                while True:
                    parameter = stream.name("a parameter name")
                    stream.expect(":", "':' after the parameter name")
                    parameter_shapes.append((parameter, self.shape()))
                    if stream.accept(")"):
                        break
                    stream.expect(",", "',' or ')' in the parameter list")
            stream.expect("->", "'->' before the result shape")
            result_shape = self.shape()
        opening = f"'{{' to open computation '{name}'"
        if is_first and parameter_shapes is None and not is_entry:  # e.g. a misspelt header: 'HloModel m'
            opening += " (or 'HloModule' at the start of the text)"
        stream.expect("{", opening)
        self.computation_name, self.instructions, self.defined = name, [], {}
        instructions = self.instructions
        while not stream.accept("}"):
            if stream.token.kind == END:
                raise self.error(f"computation '{name}' is not closed with '}}'")
            self.instruction()
        if not instructions:
            raise self.source.error(f"computation '{name}' has no instructions", position)
        self.attribute_list()  # e.g. ', execution_thread="main"'
        return HloComputation(name, instructions, is_entry, parameter_shapes, result_shape, position)

    def nested_computation(self) -> str:
        """``to_apply={ a = f32[] parameter(0) ... }``: a computation written where its name would be.

        XLA's parser names such a computation ``_`` (its module then makes the name unique); kuiper
        names it ``_``, ``_.1``, ``_.2`` ... The computation around it goes on after its ``}``.
        """
        stream = self.stream
        position = stream.token.position
        stream.expect("{")
        stream.nest("nested computations")
        outer = self.computation_name, self.instructions, self.defined
        name, number = "_", 0
        while name in self.computations:
            number += 1
            name = f"_.{number}"
        self.computation_name, self.instructions, self.defined = name, [], {}
        while not stream.accept("}"):
            if stream.token.kind == END:
                raise self.source.error("a computation written in place is not closed with '}'", position)
            self.instruction()
        if not self.instructions:
            raise self.source.error("a computation written in place has no instructions", position)
        self.computations[name] = HloComputation(name, self.instructions, False, None, None, position)
        self.computation_name, self.instructions, self.defined = outer
        stream.unnest()
        return name

    def instruction(self) -> None:
        """Parse one instruction (and any nested in its operands) into ``self.instructions``."""
        stream = self.stream
        position = stream.token.position
        is_root = stream.accept_word("ROOT")
        name = stream.name("an instruction name")
        stream.expect("=", f"'=' after instruction name '{name}'")
        shape = self.shape() if is_shape_start(stream) else None
        opcode_token = stream.expect(NAME, "a shape or an opcode")
        if stream.token.kind == "[":  # ``f33[2]``: a misspelt element type, not an opcode
            raise self.error(f"expected a shape such as f32[2,3], found {opcode_token.text!r}", opcode_token)
        self.instruction_body(name, shape, opcode_token, is_root, position, with_attributes=True)

    def instruction_body(self, name: str, shape: Shape | None, opcode_token: Token, is_root: bool, position: int,
                         with_attributes: bool) -> None:
        """From the opcode's '(' on; nested instructions (``with_attributes`` False) stop at their ')'."""
        stream = self.stream
        opcode = opcode_token.text
        stream.expect("(", f"'(' after opcode '{opcode}'")
        operands: list[str] = []
        literal = parameter_number = None
        if opcode == "constant":
            literal = parse_literal(stream, self.shape_cache)
            stream.expect(")", "')' after the constant's literal")
        elif opcode == "parameter":
            number = stream.expect(INT, "the parameter number")
            parameter_number = int(number.text)
            if parameter_number < 0:
                raise self.error("a parameter number cannot be negative", number)
            stream.expect(")", "')' after the parameter number")
        elif not stream.accept(")"):
            stream.nest("nested instructions")
            while True:
                operands.append(self.operand())
                if stream.accept(")"):
                    break
                stream.expect(",", "',' or ')' between operands")
            stream.unnest()
        attributes = self.attribute_list() if with_attributes else {}
        if shape is None:
            shape = self.inferred_shape(opcode, operands, attributes, opcode_token)
        instruction = HloInstruction(name, opcode, shape, operands, attributes, literal, parameter_number, is_root,
                                     position, self.computation_name)
        self.instructions.append(instruction)
        self.defined.setdefault(name, instruction)

    def operand(self) -> str:
        """An operand's name; a nested instruction is added to the computation first, named ``opcode.anonN``."""
        stream = self.stream
        position = stream.token.position
        shape = self.shape() if is_shape_start(stream) else None
        token = stream.expect(NAME, "an operand name")
        if stream.token.kind != "(":
            name = token.text.removeprefix("%")
            definition = self.defined.get(name)
            if stream.token.kind == "#":
                name, definition = self.tuple_element_operand(name, definition, token)
            if shape is not None and definition is not None and not _compatible(shape, definition.shape):
                raise self.error(f"operand '{name}' is written as {shape}, but it is defined as {definition.shape}",
                                 token)
            return name
        self.anonymous += 1
        name = f"{token.text}.anon{self.anonymous}"
        self.instruction_body(name, shape, token, False, position, with_attributes=False)
        return name

    def tuple_element_operand(self, name: str, definition: HloInstruction | None,
                              token: Token) -> tuple[str, HloInstruction]:
        """``%t#1#0``, XLA's compact get-tuple-element: element 0 of element 1 of ``t``.

        Each step is a get-tuple-element added to the computation before its user, once per
        computation however often it is used, named ``t#1`` and ``t#1#0`` (no name in the text
        can hold a ``#``, so none collides), as XLA's parser does.
        """
        stream = self.stream
        if definition is None:
            raise self.error(f"operand '{name}' must be defined before one of its tuple elements is taken "
                             f"('{name}#index')", token)
        while stream.accept("#"):
            index_token = stream.expect(INT, "a tuple index after '#'")
            index, shape = int(index_token.text), definition.shape
            if not shape.is_tuple:
                raise self.error(f"'{name}' is {shape}, not a tuple, so '#{index}' takes no element of it", index_token)
            if not 0 <= index < len(shape.elements):
                raise self.error(f"tuple index {index} is out of range for '{name}' of shape {shape}", index_token)
            element = f"{name}#{index}"
            if element not in self.defined:
                made = HloInstruction(element, "get-tuple-element", shape.elements[index], [name], {"index": index},
                                      position=token.position, computation=self.computation_name)
                self.instructions.append(made)
                self.defined[element] = made
            name, definition = element, self.defined[element]
        return name, definition

    def inferred_shape(self, opcode: str, operands: list[str], attributes: dict, token: Token) -> Shape:
        """The shape XLA would infer (kuiper/hlo/infer_shapes.py), or an error asking for it."""
        known = [self.defined[o].shape if o in self.defined else None for o in operands]
        shape = inferred_shape(opcode, known, attributes, self.computations, lambda message: self.error(message, token))
        if shape is None:
            raise self.error(f"'{opcode}' needs its shape written out: kuiper infers the shape of elementwise, tuple, "
                             "get-tuple-element, dot, convolution and conditional instructions whose operands (and "
                             "branch computations) are defined before them", token)
        return shape


def _compatible(written: Shape, defined: Shape) -> bool:
    """Same element types and dims, leaf by leaf (layouts may differ: XLA prints them either way)."""
    if written.is_tuple or defined.is_tuple:
        return written.is_tuple and defined.is_tuple and len(written.elements) == len(defined.elements) and all(
            _compatible(a, b) for a, b in zip(written.elements, defined.elements))
    return written.element_type == defined.element_type and written.dims == defined.dims
