"""Split a tensor-expression kernel into tokens that remember their offset.

Kinds: NAME (``A``, ``i``, ``exp``, ``where``, ``select``), INT, FLOAT and the
operators and punctuation themselves (``+=``, ``//``, ``&&``, ``<`` ...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kuiper.errors import TESyntaxError

NAME = "NAME"
INT = "INT"
FLOAT = "FLOAT"
END = "END"

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER_RE = re.compile(r"(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][+-]?[0-9]+)?")
# Longest first, so that '//' wins over '/' and '<=' over '<'.
_OPERATORS = ("+=", "//", "&&", "||", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "<", ">", "=", "!")
_PUNCTUATION = "[](),;"


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    position: int
    value: object = None


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    pos = 0
    while pos < len(text):
        char = text[pos]
        if char.isspace():
            pos += 1
            continue
        if char == "#":  # a comment runs to the end of the line
            end = text.find("\n", pos)
            pos = len(text) if end < 0 else end
            continue
        if char in _PUNCTUATION:
            tokens.append(Token(char, char, pos))
            pos += 1
            continue
        name = _NAME_RE.match(text, pos)
        if name:
            tokens.append(Token(NAME, name.group(), pos))
            pos = name.end()
            continue
        number = _NUMBER_RE.match(text, pos)
        if number:
            literal = number.group()
            is_float = any(c in literal for c in ".eE")
            tokens.append(Token(FLOAT if is_float else INT, literal, pos, float(literal) if is_float else int(literal)))
            pos = number.end()
            continue
        operator = next((op for op in _OPERATORS if text.startswith(op, pos)), None)
        if operator is None:
            raise TESyntaxError(f"unexpected character {char!r}", text, pos)
        tokens.append(Token(operator, operator, pos))
        pos += len(operator)
    tokens.append(Token(END, "", len(text)))
    return tokens
