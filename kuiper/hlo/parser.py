"""Recursive-descent parser for HLO text, both as JAX lowers it and as XLA prints it after compiling.

Grammar (the parts kuiper reads; anything in an attribute value is read generically)::

    module       := 'HloModule' NAME (',' attribute)* preamble* computation*
    preamble     := ('FileNames' | 'FunctionNames' | 'FileLocations' | 'StackFrames') (INT value)*
    computation  := ['ENTRY'] NAME [signature] '{' instruction* '}' [',' attribute]*
    signature    := '(' [NAME ':' shape (',' NAME ':' shape)*] ')' '->' shape
    instruction  := ['ROOT'] NAME '=' shape NAME '(' operands ')' (',' attribute)*
    operands     := literal (for constant) | INT (for parameter) | [[shape] NAME (',' [shape] NAME)*]
    shape        := '(' [shape (',' shape)*] ')' | TYPE '[' [dim (',' dim)*] ']' [layout]
    dim          := INT | '<=' INT | '?'
    layout       := '{' [INT (',' INT)*] [':' anything] '}'
    attribute    := NAME '=' value
    value        := atom | '{' items '}' | '[' items ']' | '(' items ')'    (items: values, key=value, "key": value)

Names lose their ``%``.  Positions are kept so later checks can point at the text.
"""

from __future__ import annotations

import gc
import re
from typing import Any

from .lexer import (
    DIMS,
    END,
    FLOAT,
    INT,
    LABELS,
    NAME,
    RECORD,
    SHAPE,
    STRING,
    SourceText,
    Token,
    tokenize,
    unquote,
)
from .module import ELIDED, HloComputation, HloInstruction, HloModule, Quoted, Slice
from .shapes import ELEMENT_TYPES, ArrayShape, Layout, Shape, TupleShape

PREAMBLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
_CLOSE = {"{": "}", "[": "]", "(": ")"}
# One pair of a RECORD: key (bare or quoted), '=' or ':', value (quoted, or up to a space, ',' or '}').
_PAIR_RE = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([A-Za-z0-9_.\-]+))\s*[=:]\s*("(?:[^"\\]|\\.)*"|[^\s,}"]+)\s*,?')
_INT_RE = re.compile(r"-?[0-9]+")
_SHAPE_PARTS_RE = re.compile(r"([a-z0-9]+)\[([0-9,]*)\](?:\{([0-9,]*)\})?")


def _plain_shape(text: str) -> ArrayShape:
    """A SHAPE token's shape: ``f32[8,16]{1,0}``."""
    element_type, dims, layout = _SHAPE_PARTS_RE.fullmatch(text).groups()
    dims = tuple(int(d) for d in dims.split(",")) if dims else ()
    if layout is not None:
        layout = Layout(tuple(int(d) for d in layout.split(",")) if layout else ())
    return ArrayShape(element_type, dims, (), layout)


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
        from .verify import verify_module

        verify_module(module, parser.source)
    return module


class _Parser:
    def __init__(self, source: SourceText, start: int = 0, end: int | None = None):
        self.source = source
        self.tokens = tokenize(source, start, end)
        self.index = 0
        self.shape_cache: dict[str, Shape] = {}

    # -- token helpers ------------------------------------------------------------
    @property
    def token(self) -> Token:
        return self.tokens[self.index]

    def peek(self, offset: int = 1) -> Token:
        return self.tokens[min(self.index + offset, len(self.tokens) - 1)]

    def advance(self) -> Token:
        token = self.tokens[self.index]
        if token.kind != END:
            self.index += 1
        return token

    def accept(self, kind: str) -> Token | None:
        if self.tokens[self.index].kind == kind:
            return self.advance()
        return None

    def expect(self, kind: str, what: str | None = None) -> Token:
        token = self.tokens[self.index]
        if token.kind != kind:
            raise self.error(f"expected {what or repr(kind)}, found {self.describe(token)}", token)
        return self.advance()

    def describe(self, token: Token) -> str:
        return "end of text" if token.kind == END else repr(token.text)

    def error(self, message: str, token: Token | None = None):
        return self.source.error(message, (token or self.token).position)

    def name(self, what: str = "a name") -> str:
        token = self.expect(NAME, what)
        return token.text.removeprefix("%")

    # -- module ---------------------------------------------------------------------
    def module(self) -> HloModule:
        token = self.token
        if not (token.kind == NAME and token.text == "HloModule"):
            raise self.error(f"expected 'HloModule' at the start of the text, found {self.describe(token)}")
        self.advance()
        name = self.name("the module name")
        attributes = self.attribute_list()
        while self.token.kind == NAME and self.token.text in PREAMBLES:
            self.advance()
            while self.token.kind == INT:
                self.advance()
                self.value()
        computations: dict[str, HloComputation] = {}
        while self.token.kind != END:
            computation = self.computation()
            if computation.name in computations:
                raise self.source.error(f"computation '{computation.name}' is defined twice", computation.position)
            computations[computation.name] = computation
        if not computations:
            raise self.error("the module has no computations")
        return HloModule(name, computations, attributes, self.source.source, self.source)

    def attribute_list(self) -> dict[str, Any]:
        attributes: dict[str, Any] = {}
        while self.accept(","):
            key = self.name("an attribute name")
            self.expect("=", f"'=' after attribute '{key}'")
            attributes[key] = self.value()
        return attributes

    # -- computations -------------------------------------------------------------
    def computation(self) -> HloComputation:
        is_entry = False
        if self.token.kind == NAME and self.token.text == "ENTRY":
            is_entry = True
            self.advance()
        position = self.token.position
        name = self.name("a computation name (or 'ENTRY')")
        parameter_shapes = result_shape = None
        if self.accept("("):
            parameter_shapes = []
            if not self.accept(")"):
                while True:
                    parameter = self.name("a parameter name")
                    self.expect(":", "':' after the parameter name")
                    parameter_shapes.append((parameter, self.shape()))
                    if self.accept(")"):
                        break
                    self.expect(",", "',' or ')' in the parameter list")
            self.expect("->", "'->' before the result shape")
            result_shape = self.shape()
        self.expect("{", f"'{{' to open computation '{name}'")
        instructions: list[HloInstruction] = []
        while not self.accept("}"):
            if self.token.kind == END:
                raise self.error(f"computation '{name}' is not closed with '}}'")
            instruction = self.instruction()
            instruction.computation = name
            instructions.append(instruction)
        if not instructions:
            raise self.source.error(f"computation '{name}' has no instructions", position)
        self.attribute_list()  # e.g. ', execution_thread="main"'
        return HloComputation(name, instructions, is_entry, parameter_shapes, result_shape, position)

    def instruction(self) -> HloInstruction:
        is_root = False
        position = self.token.position
        if self.token.kind == NAME and self.token.text == "ROOT":
            is_root = True
            self.advance()
        name = self.name("an instruction name")
        self.expect("=", f"'=' after instruction name '{name}'")
        shape = self.shape()
        opcode_token = self.expect(NAME, "an opcode")
        opcode = opcode_token.text
        self.expect("(", f"'(' after opcode '{opcode}'")
        operands: list[str] = []
        literal = parameter_number = None
        if opcode == "constant":
            literal = self.literal()
            self.expect(")", "')' after the constant's literal")
        elif opcode == "parameter":
            parameter_number = int(self.expect(INT, "the parameter number").text)
            if parameter_number < 0:
                raise self.error("a parameter number cannot be negative", self.peek(-1))
            self.expect(")", "')' after the parameter number")
        elif not self.accept(")"):
            while True:
                if self.is_shape_start():
                    self.shape()  # long form: typed operands ``f32[2] %x``
                operands.append(self.name("an operand name"))
                if self.accept(")"):
                    break
                self.expect(",", "',' or ')' between operands")
        attributes = self.attribute_list()
        return HloInstruction(name, opcode, shape, operands, attributes, literal, parameter_number, is_root, position)

    # -- shapes -------------------------------------------------------------------
    def is_shape_start(self) -> bool:
        token = self.token
        if token.kind in ("(", SHAPE):
            return True
        return token.kind == NAME and token.text in ELEMENT_TYPES and self.peek().kind == "["

    def shape(self) -> Shape:
        token = self.tokens[self.index]
        if token.kind == SHAPE:  # a plain array shape: one token, parsed once per distinct text
            self.index += 1
            shape = self.shape_cache.get(token.text)
            if shape is None:
                shape = _plain_shape(token.text)
                self.check_layout(shape, token)
                self.shape_cache[token.text] = shape
            return shape
        return self.full_shape()

    def full_shape(self) -> Shape:
        if self.accept("("):
            elements: list[Shape] = []
            if not self.accept(")"):
                while True:
                    elements.append(self.shape())
                    if self.accept(")"):
                        break
                    self.expect(",", "',' or ')' in a tuple shape")
            return TupleShape(tuple(elements))
        token = self.token
        if token.kind != NAME or token.text not in ELEMENT_TYPES:
            raise self.error(f"expected a shape such as f32[2,3], found {self.describe(token)}")
        self.advance()
        self.expect("[", f"'[' after element type '{token.text}'")
        dims: list[int] = []
        dynamic: list[bool] = []
        if not self.accept("]"):
            while True:
                if self.accept("?"):
                    dims.append(-1)
                    dynamic.append(True)
                else:
                    bounded = self.accept("<=") is not None
                    dim = self.expect(INT, "a dimension size")
                    if dim.text.startswith("-"):
                        raise self.error("a dimension size cannot be negative", dim)
                    dims.append(int(dim.text))
                    dynamic.append(bounded)
                if self.accept("]"):
                    break
                self.expect(",", "',' or ']' in the dimensions")
        # '{' opens a layout only when an int, ':' or '}' follows; else it opens a computation body.
        layout = self.layout() if self.token.kind == "{" and self.peek().kind in (INT, ":", "}") else None
        shape = ArrayShape(token.text, tuple(dims), tuple(dynamic) if any(dynamic) else (), layout)
        self.check_layout(shape, token)
        return shape

    def check_layout(self, shape: ArrayShape, token: Token) -> None:
        """A layout must order every dimension once (ops read it as a permutation)."""
        order = shape.layout.minor_to_major if shape.layout is not None else ()
        if order and sorted(order) != list(range(len(shape.dims))):
            raise self.error(f"layout {shape.layout} is not an order of the {len(shape.dims)} dimension(s) "
                             f"of {shape.element_type}{list(shape.dims)}", token)

    def layout(self) -> Layout:
        self.expect("{")
        minor_to_major: list[int] = []
        while self.token.kind == INT:
            minor_to_major.append(int(self.advance().text))
            if not self.accept(","):
                break
        extra = ""
        if self.accept(":"):
            start = self.token.position
            depth = 0
            while not (self.token.kind == "}" and depth == 0):
                if self.token.kind == END:
                    raise self.error("unclosed layout")
                depth += {"(": 1, ")": -1}.get(self.token.kind, 0)
                self.advance()
            extra = self.source.text[start : self.token.position].strip()
        self.expect("}", "'}' to close the layout")
        return Layout(tuple(minor_to_major), extra)

    # -- literals -----------------------------------------------------------------
    def literal(self) -> Any:
        """A constant's value: nested lists of numbers/words, a tuple (Python tuple), or ELIDED."""
        if self.is_shape_start() and self.token.kind != "(":
            self.shape()  # long form: ``constant(f32[2] {1, 2})``
        token = self.token
        if token.kind == "{":
            self.advance()
            if self.accept("..."):
                self.expect("}", "'}' after '...'")
                return ELIDED
            items: list[Any] = []
            while not self.accept("}"):
                items.append(self.literal())
                if not self.accept(","):
                    self.expect("}", "',' or '}' in an array literal")
                    break
            return items
        if token.kind == "(":
            self.advance()
            items = []
            while not self.accept(")"):
                items.append(self.literal())
                if not self.accept(","):
                    self.expect(")", "',' or ')' in a tuple literal")
                    break
            return tuple(items)
        if token.kind == INT:
            self.advance()
            return int(token.text)
        if token.kind == FLOAT:
            self.advance()
            return float(token.text)
        if token.kind == NAME and token.text in ("true", "false", "inf", "-inf", "nan"):
            self.advance()
            return token.text
        raise self.error(f"expected a literal value, found {self.describe(token)}")

    # -- generic attribute values ---------------------------------------------------
    def value(self) -> Any:
        token = self.token
        if token.kind in _CLOSE:
            self.advance()
            result = self.group(token.kind)
        elif token.kind == STRING:
            self.advance()
            result = Quoted(unquote(token.text))
        elif token.kind == INT:
            self.advance()
            result = int(token.text)
        elif token.kind == FLOAT:
            self.advance()
            result = float(token.text)
        elif token.kind == NAME:
            self.advance()
            result = token.text.removeprefix("%")
            if result in ELEMENT_TYPES and self.token.kind == "[":  # a shape inside a value
                self.index -= 1
                result = self.shape()
        elif token.kind == RECORD:
            self.advance()
            result = self.record(token)
        elif token.kind == SHAPE:
            result = self.shape()
        elif token.kind in (DIMS, LABELS):
            self.advance()
            result = token.text
        else:
            raise self.error(f"expected an attribute value, found {self.describe(token)}")
        if self.token.kind == "<=":  # iota replica groups ``[2,2]<=[4]T(1,0)``
            self.advance()
            result = (result, self.value())
            if self.token.kind == NAME and self.token.text == "T" and self.peek().kind == "(":
                self.advance()
                self.value()
        return result

    def record(self, token: Token) -> Any:
        """A RECORD token's ``key=value`` / ``"key": value`` pairs; anything else parses token by token."""
        body = token.text[1:-1]
        pairs = _PAIR_RE.findall(body)
        if _PAIR_RE.sub("", body).replace(",", "").strip():
            # Lex from after the '{' (else the same RECORD token comes back) to the end.
            return _Parser(self.source, token.position + 1, token.position + len(token.text)).group("{")
        result: dict[str, Any] = {}
        for quoted_key, key, value in pairs:
            key = unquote(f'"{quoted_key}"') if quoted_key else key
            if value.startswith('"'):
                result[key] = Quoted(unquote(value))
            elif _INT_RE.fullmatch(value):
                result[key] = int(value)
            else:
                result[key] = value
        return result

    def group(self, opener: str) -> Any:
        close = _CLOSE[opener]
        items: list[Any] = []
        keyed: dict[Any, Any] = {}
        saw_colon = False
        while not self.accept(close):
            kind = self.token.kind
            if kind == END:
                raise self.error(f"'{opener}' is never closed with '{close}'")
            if kind in (",", "->", "*", "!", "@", "+", "|", "?", "<", ">", "..."):
                self.advance()
                continue
            if kind == ":":
                saw_colon = True
                self.advance()
                continue
            if kind in ("}", "]", ")"):
                raise self.error(f"expected '{close}', found {self.describe(self.token)}")
            item = self.value()
            if self.token.kind == "=" or (self.token.kind == ":" and isinstance(item, Quoted)):
                self.advance()
                keyed[item] = self.value()
            else:
                items.append(item)
        if keyed:
            if items:
                keyed["_items"] = items
            return keyed
        if saw_colon and opener == "[" and 2 <= len(items) <= 3 and all(isinstance(i, int) for i in items):
            return Slice(*items)
        return items
