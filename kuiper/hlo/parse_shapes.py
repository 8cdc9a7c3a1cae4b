"""Shapes in HLO text: ``f32[8,16]{1,0}``, ``f32[<=4,?]``, ``(f32[2], (s32[], pred[]))``.

    shape   := '(' [shape (',' shape)*] ')' | TYPE '[' [dim (',' dim)*] ']' [layout]
    dim     := INT | '<=' INT | '?'
    layout  := '{' [INT (',' INT)*] [':' anything up to the matching '}'] '}'
"""

from __future__ import annotations

import re
from dataclasses import replace

from .lexer import END, INT, NAME, SHAPE, Token
from .shapes import ELEMENT_TYPES, ArrayShape, Layout, Shape, TupleShape
from .token_stream import TokenStream

_SHAPE_PARTS_RE = re.compile(r"([a-z0-9]+)\[([0-9,]*)\](?:\{([0-9,]*)\})?")


def is_shape_start(stream: TokenStream) -> bool:
    token = stream.token
    if token.kind in ("(", SHAPE):
        return True
    if token.kind == NAME and token.text == "b" and stream.peek().kind == "(":  # a buffer shape
        return True
    return token.kind == NAME and token.text in ELEMENT_TYPES and stream.peek().kind == "["


def parse_shape(stream: TokenStream, cache: dict[str, Shape]) -> Shape:
    token = stream.token
    if token.kind == SHAPE:  # a plain array shape: one token, parsed once per distinct text
        stream.advance()
        shape = cache.get(token.text)
        if shape is None:
            shape = _plain_shape(token.text)
            _check_layout(stream, shape, token)
            cache[token.text] = shape
        return shape
    if token.kind == NAME and token.text == "b" and stream.peek().kind == "(":
        return _buffer_shape(stream, cache)
    if stream.accept("("):
        stream.nest("tuple shapes")
        elements: list[Shape] = []
        if not stream.accept(")"):
            while True:
                elements.append(parse_shape(stream, cache))
                if stream.accept(")"):
                    break
                stream.expect(",", "',' or ')' in a tuple shape")
        stream.unnest()
        return TupleShape(tuple(elements))
    return _array_shape(stream)


def _buffer_shape(stream: TokenStream, cache: dict[str, Shape]) -> ArrayShape:
    """``b(f32[2,4])``: a buffer holds exactly one array (XLA's parser refuses a tuple, a token or a buffer)."""
    stream.advance()
    stream.expect("(")
    inner = stream.token
    shape = parse_shape(stream, cache)
    if shape.is_tuple or shape.buffer or shape.dtype is None:
        raise stream.error(f"a buffer shape b(...) holds one array shape, found {shape}", inner)
    stream.expect(")", "')' at the end of the buffer shape")
    return replace(shape, buffer=True)


def _plain_shape(text: str) -> ArrayShape:
    """A SHAPE token's shape: ``f32[8,16]{1,0}``."""
    element_type, dims, layout = _SHAPE_PARTS_RE.fullmatch(text).groups()
    dims = tuple(int(d) for d in dims.split(",")) if dims else ()
    if layout is not None:
        layout = Layout(tuple(int(d) for d in layout.split(",")) if layout else ())
    return ArrayShape(element_type, dims, (), layout)


def _array_shape(stream: TokenStream) -> ArrayShape:
    token = stream.token
    if token.kind != NAME or token.text not in ELEMENT_TYPES:
        raise stream.error(f"expected a shape such as f32[2,3], found {stream.describe(token)}")
    stream.advance()
    stream.expect("[", f"'[' after element type '{token.text}'")
    dims: list[int] = []
    dynamic: list[bool] = []
    if not stream.accept("]"):
        while True:
            if stream.accept("?"):
                dims.append(-1)
                dynamic.append(True)
            else:
                bounded = stream.accept("<=") is not None
                dim = stream.expect(INT, "a dimension size")
                if dim.text.startswith("-"):
                    raise stream.error("a dimension size cannot be negative", dim)
                dims.append(int(dim.text))
                dynamic.append(bounded)
            if stream.accept("]"):
                break
            stream.expect(",", "',' or ']' in the dimensions")
    # '{' opens a layout only when an int, ':' or '}' follows; else it opens a computation body.
    layout = _layout(stream) if stream.token.kind == "{" and stream.peek().kind in (INT, ":", "}") else None
    shape = ArrayShape(token.text, tuple(dims), tuple(dynamic) if any(dynamic) else (), layout)
    _check_layout(stream, shape, token)
    return shape


def _check_layout(stream: TokenStream, shape: ArrayShape, token: Token) -> None:
    """A layout must order every dimension once (ops read it as a permutation)."""
    order = shape.layout.minor_to_major if shape.layout is not None else ()
    if order and sorted(order) != list(range(len(shape.dims))):
        raise stream.error(f"layout {shape.layout} is not an order of the {len(shape.dims)} dimension(s) "
                           f"of {shape.element_type}{list(shape.dims)}", token)


def _dim_level_types(stream: TokenStream) -> bool:
    """``(D, C+, S~, H)``: dense, compressed, singleton, loose compressed, each maybe unique (+) or
    unordered (~), as XLA reads them; whether any is not dense."""
    stream.expect("(")
    sparse = False
    while not stream.accept(")"):
        token = stream.token
        if token.kind != NAME or token.text not in ("D", "C", "S", "H"):
            raise stream.error(f"expected a DimLevelType abbreviation (D, C, S or H), found {stream.describe(token)}")
        stream.advance()
        sparse = sparse or token.text != "D"
        stream.accept("+")
        stream.accept("~")
        if not stream.accept(","):
            stream.expect(")", "',' or ')' in the dim level types")
            break
    return sparse


def _layout(stream: TokenStream) -> Layout:
    stream.expect("{")
    minor_to_major: list[int] = []
    while stream.token.kind == INT:
        minor_to_major.append(int(stream.advance().text))
        if not stream.accept(","):
            break
    extra = ""
    if stream.accept(":"):  # tiling, memory space, sparsity: kept as text, nothing reads them
        start = stream.token.position
        depth = 0
        sparse, physical = False, None
        while not (stream.token.kind == "}" and depth == 0):
            if stream.token.kind == END:
                raise stream.error("unclosed layout")
            if depth == 0 and stream.token.kind == NAME and stream.peek().kind == "(":
                if stream.token.text == "D":  # dim level types: ``D(D,C+,S~)``
                    stream.advance()
                    sparse = _dim_level_types(stream)
                    continue
                if stream.token.text == "P":  # a physical shape: for sparse arrays only
                    physical = stream.token
            depth += {"(": 1, ")": -1}.get(stream.token.kind, 0)
            stream.advance()
        if physical is not None and not sparse:
            raise stream.error("the layout has a physical shape P(...), but is not for a sparse array "
                               "(no dim level type other than D)", physical)
        extra = stream.source.text[start : stream.token.position].strip()
    stream.expect("}", "'}' to close the layout")
    return Layout(tuple(minor_to_major), extra)
