"""Split an expression string into tokens that remember their position.

Token kinds:
  NAME     a function name or keyword: ``add``, ``torch.float``, ``True``, ``None``
  INPUT    ``@3`` (value: 3)
  INT      ``2``, ``-1`` (value: int)
  FLOAT    ``2.0``, ``1.000000e-05``, ``-inf``, ``nan`` (value: float)
  COMPLEX  ``1.0+-2.0j``, ``1.0-2.0j``, ``3j`` (value: complex)
  ( ) , [ ]  punctuation, the kind is the character itself

Whitespace is skipped (PNNX never writes any).  Anything else raises
ExpressionSyntaxError with the position of the offending character.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kuiper.errors import ExpressionSyntaxError

NAME = "NAME"
INPUT = "INPUT"
INT = "INT"
FLOAT = "FLOAT"
COMPLEX = "COMPLEX"
PUNCTUATION = "()[],"

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_INPUT_RE = re.compile(r"@([0-9]+)")
# A real number: decimal with optional exponent, or inf/nan, optionally signed.
_REAL_RE = re.compile(r"[+-]?(?:(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|nan)")
_IDENTIFIER_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.@")


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
        elif char in PUNCTUATION:
            tokens.append(Token(char, char, pos))
            pos += 1
        elif char == "@":
            match = _INPUT_RE.match(text, pos)
            if match is None:
                raise ExpressionSyntaxError("expected an input number after '@'", text, pos)
            tokens.append(Token(INPUT, match.group(), pos, int(match.group(1))))
            pos = match.end()
        elif (char.isascii() and char.isalpha()) or char == "_":
            match = _NAME_RE.match(text, pos)
            if match.group() in ("inf", "nan", "infj", "nanj") or text.startswith(("inf+", "nan+"), pos):
                token = _number(text, pos)
            else:
                token = Token(NAME, match.group(), pos)
            tokens.append(token)
            pos += len(token.text)
        elif char in "+-.0123456789":
            token = _number(text, pos)
            tokens.append(token)
            pos += len(token.text)
        else:
            raise ExpressionSyntaxError(f"unexpected character {char!r}", text, pos)
    return tokens


def _number(text: str, pos: int) -> Token:
    """Read a real, imaginary (``2j``) or complex (``1.0+-2.0j``) literal at pos."""
    real = _REAL_RE.match(text, pos)
    if real is None:
        raise ExpressionSyntaxError("malformed number", text, pos)
    end = real.end()
    kind = FLOAT if _looks_float(real.group()) else INT
    value: object = float(real.group()) if kind == FLOAT else int(real.group())
    if text.startswith("j", end):
        kind, value, end = COMPLEX, complex(0.0, float(real.group())), end + 1
    elif text.startswith(("+", "-"), end):
        # 1.0+2.0j, 1.0+-2.0j and, as pnnx prints a negative imaginary part, 1.0-2.0j
        imag = _REAL_RE.match(text, end + 1 if text[end] == "+" else end)
        if imag is not None and text.startswith("j", imag.end()):
            kind = COMPLEX
            value = complex(float(real.group()), float(imag.group()))
            end = imag.end() + 1
    if end < len(text) and text[end] in _IDENTIFIER_CHARS:
        raise ExpressionSyntaxError("malformed number", text, pos)
    if end < len(text) and text[end] in "+-" and kind != COMPLEX:
        raise ExpressionSyntaxError("malformed number (a complex literal is written like 1.0+-2.0j)", text, pos)
    return Token(kind, text[pos:end], pos, value)


def _looks_float(number: str) -> bool:
    return any(c in number for c in ".eEn")  # '.', exponent, inf, nan
