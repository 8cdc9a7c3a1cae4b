"""Constant literals and attribute values in HLO text.

    literal  := [shape] ( '{' '...' '}' | '{' [literal (',' literal)*] '}' | '(' [literal (',' literal)*] ')'
                        | INT | FLOAT | true | false | inf | -inf | nan | -nan )
    value    := atom | '{' items '}' | '[' items ']' | '(' items ')'   (items: values, key=value, "key": value)
              | ('mesh' | 'maximal_mesh') '[' ... ']' ['{' ... '}']       replica groups over mesh axes (_mesh)

Attribute values are read generically (lists, dicts, words, numbers, shapes); the verifier and
the translators give them meaning.
"""

from __future__ import annotations

import re
from typing import Any

from .lexer import DIMS, END, FLOAT, INT, LABELS, NAME, RECORD, SHAPE, STRING, Token, unquote
from .module import ELIDED, NanPayload, Quoted, Slice
from .parse_shapes import is_shape_start, parse_shape
from .shapes import ELEMENT_TYPES, Shape
from .token_stream import TokenStream

LITERAL_WORDS = ("true", "false", "inf", "-inf", "nan", "-nan")
MESHES = ("mesh", "maximal_mesh")
_CLOSE = {"{": "}", "[": "]", "(": ")"}
# One pair of a RECORD: key (bare or quoted), '=' or ':', value (quoted, or up to a space, ',' or '}').
_PAIR_RE = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([A-Za-z0-9_.\-]+))\s*[=:]\s*("(?:[^"\\]|\\.)*"|[^\s,}"]+)\s*,?')
_INT_RE = re.compile(r"-?[0-9]+")
_NAN_PAYLOAD = re.compile(r"-?nan\(0x([0-9a-fA-F]+)\)")
_SKIPPED_IN_GROUPS = (",", "->", "*", "!", "@", "+", "|", "?", "<", ">", "...", "#", "~")


def parse_literal(stream: TokenStream, cache: dict[str, Shape]) -> Any:
    """A constant's value: nested lists of numbers/words, a tuple (Python tuple), or ELIDED."""
    if is_shape_start(stream) and stream.token.kind != "(":
        parse_shape(stream, cache)  # long form: ``constant(f32[2] {1, 2})``
    token = stream.token
    if token.kind in ("{", "("):
        stream.advance()
        close = _CLOSE[token.kind]
        if token.kind == "{" and stream.accept("..."):
            stream.expect("}", "'}' after '...'")
            return ELIDED
        stream.nest("literals")
        items: list[Any] = []
        while not stream.accept(close):
            items.append(parse_literal(stream, cache))
            if not stream.accept(","):
                stream.expect(close, f"',' or '{close}' in a literal")
                break
        stream.unnest()
        return items if close == "}" else tuple(items)
    if token.kind == INT:
        stream.advance()
        return int(token.text)
    if token.kind == FLOAT:
        stream.advance()
        return float(token.text)
    if token.kind == NAME and token.text in LITERAL_WORDS:
        stream.advance()
        return token.text
    payload = _NAN_PAYLOAD.fullmatch(token.text) if token.kind == NAME else None
    if payload:  # ``-nan(0x7f)``: one token
        stream.advance()
        return NanPayload(token.text.startswith("-"), int(payload.group(1), 16))
    raise stream.error(f"expected a literal value, found {stream.describe(token)}")


def parse_value(stream: TokenStream, cache: dict[str, Shape]) -> Any:
    token = stream.token
    kind = token.kind
    if kind in _CLOSE:
        stream.advance()
        stream.nest("attribute values")
        result = _group(stream, cache, kind)
        stream.unnest()
    elif kind == SHAPE or kind == NAME and token.text in ELEMENT_TYPES and stream.peek().kind == "[":
        result = parse_shape(stream, cache)  # a shape inside a value, or a typed literal: ``s32[2] {1, 2}``
        if stream.token.kind in ("{", INT, FLOAT) or stream.token.kind == NAME and stream.token.text in LITERAL_WORDS:
            result = (result, parse_literal(stream, cache))
    else:
        stream.advance()
        if kind == STRING:
            result = Quoted(unquote(token.text))
        elif kind == INT:
            result = int(token.text)
        elif kind == FLOAT:
            result = float(token.text)
        elif kind == NAME:
            result = token.text.removeprefix("%")
            if stream.token.kind == "@":  # a sparsity descriptor: ``L.1@2:4``, ``L.1@2:4_R.0@2:4``
                while stream.token.kind in ("@", ":", INT, DIMS) or stream.token.kind == NAME \
                        and stream.token.text.startswith("_"):
                    stream.advance()
                result = stream.source.text[token.position : stream.previous.position + len(stream.previous.text)]
            elif result in MESHES and stream.token.kind == "[":
                result = _mesh(stream, cache, result)
        elif kind == RECORD:
            result = _record(stream, token)
        elif kind in (DIMS, LABELS):
            result = token.text
        else:
            raise stream.error(f"expected an attribute value, found {stream.describe(token)}", token)
    if stream.token.kind == "<=":  # iota replica groups ``[2,2]<=[4]T(1,0)``
        stream.advance()
        result = (result, parse_value(stream, cache))
        if stream.token.kind == NAME and stream.token.text == "T" and stream.peek().kind == "(":
            stream.advance()
            parse_value(stream, cache)
    return result


def parse_frontend_attributes(stream: TokenStream, cache: dict[str, Shape]) -> Any:
    """``frontend_attributes={key="text", key={any balanced braces}}`` as XLA reads it: each value a
    string or a JSON-like dict kept as its text (``{empty_mesh = #sdy.mesh<[]>}``, MLIR attributes
    that no other value grammar reads). A RECORD token (strings only) is read as a record."""
    token = stream.token
    if token.kind == RECORD:
        return parse_value(stream, cache)
    stream.expect("{", "'{' to start frontend attributes")
    result: dict[str, Any] = {}
    while not stream.accept("}"):
        key = stream.expect(NAME, "a frontend attribute name").text
        stream.expect("=", f"'=' after frontend attribute '{key}'")
        if stream.token.kind == STRING:
            result[key] = Quoted(unquote(stream.advance().text))
        elif stream.token.kind in ("{", RECORD):
            result[key] = _balanced_braces(stream)
        else:
            raise stream.error(f"expected a string or '{{' for frontend attribute '{key}', found "
                               f"{stream.describe(stream.token)}")
        if not stream.accept(","):
            stream.expect("}", "'}' at the end of frontend attributes")
            break
    return result


def _balanced_braces(stream: TokenStream) -> str:
    """The text from a '{' to its matching '}', whatever tokens lie between."""
    first = stream.token
    if first.kind == RECORD:  # a flat ``{...}`` with a string, already one token
        stream.advance()
        return first.text
    depth = 0
    while True:
        token = stream.advance()
        if token.kind == END:
            raise stream.error("'{' is never closed with '}'", first)
        depth += {"{": 1, "}": -1}.get(token.kind, 0)
        if depth == 0:
            return stream.source.text[first.position : token.position + 1]


def _mesh(stream: TokenStream, cache: dict[str, Shape], word: str) -> tuple:
    """Replica groups over a device mesh, checked as XLA's parser checks them:

        'mesh' '[' [STRING '=' INT (',' STRING '=' INT)*] [',' 'device_ids' '=' '(' ids ')'] ']'
               ['{' axis (',' axis)* '}']        axis := STRING [':' '(' INT ')' INT]   (a sub-axis)
        'maximal_mesh' '[' 'device_id' '=' INT ']'

    An axis is named, or given by its index as a string (``{'1'}``). The value is ``(word, {axis
    name: size}, [the size of each axis a group spans] or None)``.
    """
    stream.advance()  # '['
    if word == "maximal_mesh":
        if not stream.accept_word("device_id"):
            raise stream.error("expected device_id= in maximal_mesh[...]")
        stream.expect("=", "'=' after device_id")
        device = int(stream.expect(INT, "a device id").text)
        stream.expect("]", "']' to end maximal_mesh")
        return word, {"device_id": device}, None
    sizes: dict[str, int] = {}
    while stream.token.kind == STRING:
        axis = unquote(stream.advance().text)
        stream.expect("=", "'=' after the mesh axis name")
        size = stream.expect(INT, "the mesh axis size")
        if int(size.text) < 0:
            raise stream.error(f"mesh axis '{axis}' has a negative size", size)
        sizes[axis] = int(size.text)
        if not stream.accept(","):
            break
    devices = 1
    for size in sizes.values():
        devices *= size
    if stream.accept_word("device_ids"):
        stream.expect("=", "'=' after device_ids")
        opening = stream.expect("(", "'(' before the device ids")
        if stream.token.kind == "[":  # an iota device list: ``[4]`` or ``[2,2]T(1,0)``
            stream.nest("attribute values")
            dims = parse_value(stream, cache)
            stream.unnest()
            if stream.token.kind == NAME and stream.token.text == "T":
                stream.advance()
                parse_value(stream, cache)
            count = 1
            for dim in dims if isinstance(dims, list) else []:
                count *= dim if isinstance(dim, int) else 1
        else:
            count = 0
            while stream.accept(INT):
                count += 1
                if not stream.accept(","):
                    break
        stream.expect(")", "')' to end device_ids")
        if count != devices:
            raise stream.error(f"mesh device_ids lists {count} devices, but the mesh axes {sizes} hold {devices}",
                               opening)
    stream.expect("]", "']' to end the mesh axes")
    if not stream.accept("{"):
        return word, sizes, None
    names = list(sizes)
    over: list[int] = []
    while not stream.accept("}"):
        token = stream.expect(STRING, "a mesh axis name or index")
        axis = unquote(token.text)
        index = names.index(axis) if axis in names else int(axis) if _INT_RE.fullmatch(axis) else None
        if index is None:
            raise stream.error(f"axis '{axis}' is not a valid axis name or index in mesh {sizes}", token)
        if not 0 <= index < len(names):
            raise stream.error(f"axis index {index} is out of bounds for mesh {sizes}, which has {len(names)} axes",
                               token)
        size = sizes[names[index]]
        if stream.accept(":"):  # a sub-axis: ``'x':(2)4``, 4 devices after the first 2 of axis x
            stream.expect("(", "'(' before the sub-axis's pre-size")
            stream.expect(INT, "the sub-axis's pre-size")
            stream.expect(")", "')' after the sub-axis's pre-size")
            size = int(stream.expect(INT, "the sub-axis's size").text)
        over.append(size)
        if not stream.accept(","):
            stream.expect("}", "',' or '}' in the mesh axes of a group")
            break
    return word, sizes, over


def _record(stream: TokenStream, token: Token) -> Any:
    """A RECORD token's ``key=value`` / ``"key": value`` pairs; anything else parses token by token."""
    body = token.text[1:-1]
    pairs = _PAIR_RE.findall(body)
    if _PAIR_RE.sub("", body).replace(",", "").strip():
        # Lex from after the '{' (else the same RECORD token comes back) to the end.
        inner = TokenStream(stream.source, token.position + 1, token.position + len(token.text))
        return _group(inner, {}, "{")
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


def _group(stream: TokenStream, cache: dict[str, Shape], opener: str) -> Any:
    close = _CLOSE[opener]
    items: list[Any] = []
    keyed: dict[Any, Any] = {}
    saw_colon = False
    while not stream.accept(close):
        kind = stream.token.kind
        if kind == END:
            raise stream.error(f"'{opener}' is never closed with '{close}'")
        if kind in _SKIPPED_IN_GROUPS:
            stream.advance()
            continue
        if kind == ":":
            saw_colon = True
            stream.advance()
            continue
        if kind in ("}", "]", ")"):
            raise stream.error(f"expected '{close}', found {stream.describe(stream.token)}")
        start = stream.token
        item = parse_value(stream, cache)
        if stream.token.kind == "=" or (stream.token.kind == ":" and isinstance(item, Quoted)):
            if not isinstance(item, (str, int, float)):  # ``{{}=1}``: found by fuzzing (a list as a dict key)
                raise stream.error(f"expected a name or number before {stream.token.text!r}", start)
            stream.advance()
            keyed[item] = parse_value(stream, cache)
        else:
            items.append(item)
    if keyed:
        if items:
            keyed["_items"] = items
        return keyed
    if saw_colon and opener == "[" and 2 <= len(items) <= 3 and all(isinstance(i, int) for i in items):
        return Slice(*items)
    return items
